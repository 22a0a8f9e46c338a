import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMap, isScalar, parseDocument, type Node, type Pair } from 'yaml';
import { ROOT } from './fixtures.js';

/**
 * The chart's values reference, read from values.yaml as helm-docs reads it:
 * a value is documented by a comment whose first line starts with `--`
 * directly above its key (following comment lines continue it; a line
 * `@default -- TEXT` shows TEXT instead of the default). A key with such a
 * comment is one row, whatever it holds; a mapping without one is entered
 * and its keys are rows. The table lives in the chart's README between
 * VALUES_START and VALUES_END; test/docs-references.test.ts fails when it is
 * stale (UPDATE_GOLDEN=1 rewrites it).
 */
export const CHART_README_PATH = 'charts/envoy-injector/README.md';
const VALUES_PATH = 'charts/envoy-injector/values.yaml';
const SCHEMA_PATH = 'charts/envoy-injector/values.schema.json';
export const VALUES_START = '<!-- values-reference:start (generated from values.yaml by test/helpers/values-reference.ts: UPDATE_GOLDEN=1 node --import tsx --test test/docs-references.test.ts) -->';
export const VALUES_END = '<!-- values-reference:end -->';

export interface ValueRow {
  readonly path: string;
  readonly type: string;
  /** As the table shows it: the `@default` text, else the value as JSON. */
  readonly defaultText: string;
  readonly description: string;
}

interface SchemaNode {
  readonly type?: string | readonly string[];
  readonly properties?: Readonly<Record<string, SchemaNode>>;
}

/** The `--` comment of a key: its description and `@default` text, or undefined when it has none. */
function docComment(comment: string | undefined): { description: string; defaultText?: string } | undefined {
  if (comment === undefined) return undefined;
  const lines = comment.split('\n').map((line) => line.replace(/^ /, ''));
  const start = lines.findLastIndex((line) => line.startsWith('-- '));
  if (start === -1) return undefined;
  const description: string[] = [];
  let defaultText: string | undefined;
  for (const line of lines.slice(start)) {
    const fixed = /^@default -- (.*)$/.exec(line);
    if (fixed !== null) defaultText = fixed[1] ?? '';
    else description.push(line.replace(/^-- /, '').trim());
  }
  return { description: description.join(' ').trim(), ...(defaultText === undefined ? {} : { defaultText }) };
}

function schemaAt(schema: SchemaNode, path: readonly string[]): SchemaNode | undefined {
  let node: SchemaNode | undefined = schema;
  for (const key of path) node = node?.properties?.[key];
  return node;
}

function typeOf(schema: SchemaNode | undefined, value: unknown): string {
  const types = schema?.type;
  if (types !== undefined) return (typeof types === 'string' ? [types] : types).join(' or ');
  return Array.isArray(value) ? 'array' : value === null ? 'null' : typeof value;
}

/** The rows of values.yaml, in its order. */
export function valueRows(): ValueRow[] {
  const document = parseDocument(readFileSync(join(ROOT, VALUES_PATH), 'utf8'));
  const schema = JSON.parse(readFileSync(join(ROOT, SCHEMA_PATH), 'utf8')) as SchemaNode;
  const rows: ValueRow[] = [];
  const visit = (node: Node | null | undefined, path: string[], mapComment: string | undefined): void => {
    if (!isMap(node)) return;
    node.items.forEach((item, index) => {
      const pair = item as Pair<Node, Node>;
      const key = isScalar(pair.key) ? String(pair.key.value) : '';
      // The first key's comment is the mapping's (or, at the top, the document's).
      const comment = pair.key?.commentBefore ?? (index === 0 ? mapComment : undefined);
      const here = [...path, key];
      const doc = docComment(comment ?? undefined);
      if (doc === undefined) {
        visit(pair.value, here, pair.value?.commentBefore ?? undefined);
        return;
      }
      const value: unknown = pair.value?.toJSON() ?? null;
      rows.push({
        path: here.join('.'),
        type: typeOf(schemaAt(schema, here), value),
        defaultText: doc.defaultText ?? `\`${JSON.stringify(value)}\``,
        description: doc.description,
      });
    });
  };
  visit(document.contents, [], document.commentBefore ?? document.contents?.commentBefore ?? undefined);
  return rows;
}

/** TEXT for a table cell: pipes escaped, and `<` outside code spans too (GitHub would take `<service>` for HTML). */
function cell(text: string): string {
  return text
    .split('`')
    .map((part, index) => (index % 2 === 0 ? part.replace(/</g, '&lt;') : part))
    .join('`')
    .replace(/\|/g, '\\|');
}

export function renderValuesTable(): string {
  const lines = ['| value | type | default | description |', '|---|---|---|---|'];
  for (const row of valueRows()) lines.push(`| \`${row.path}\` | ${row.type} | ${cell(row.defaultText)} | ${cell(row.description)} |`);
  return lines.join('\n');
}

/** README (the chart's) with its values block replaced by the table of today's values.yaml. */
export function withValuesTable(readme: string): string {
  const start = readme.indexOf(VALUES_START);
  const end = readme.indexOf(VALUES_END);
  if (start === -1 || end < start) throw new Error(`${CHART_README_PATH}: no ${VALUES_START} ... ${VALUES_END} block`);
  return `${readme.slice(0, start + VALUES_START.length)}\n${renderValuesTable()}\n${readme.slice(end)}`;
}
