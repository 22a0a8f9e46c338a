import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Nodes, Root } from 'mdast';
import { remark } from 'remark';
import remarkGfm from 'remark-gfm';
import { ROOT } from './fixtures.js';

/**
 * The repository's Markdown, read as GitHub reads it (remark with GFM), for
 * the docs checks: which files there are, and the code a page shows.
 */

const SKIPPED_FOLDERS = new Set(['node_modules', 'dist', '.git']);

/** Every Markdown file of the repository, relative to its root. */
export function markdownFiles(): string[] {
  const found: string[] = [];
  const walk = (folder: string): void => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!SKIPPED_FOLDERS.has(entry.name)) walk(join(folder, entry.name));
      } else if (entry.name.endsWith('.md')) found.push(relative(ROOT, join(folder, entry.name)));
    }
  };
  walk(ROOT);
  return found.sort();
}

/** The pages a user reads: the README, docs/ (the generated references included) and the chart's README. */
export function userDocs(): string[] {
  return markdownFiles().filter((file) => file === 'README.md' || file.startsWith('docs/') || file === 'charts/envoy-injector/README.md');
}

/** The user pages written by hand: what a name must appear in to count as documented. */
export function handWrittenDocs(): string[] {
  return userDocs().filter((file) => !file.startsWith('docs/reference/'));
}

/** Code as a page shows it: an inline span, or a fenced block with its info string. */
export interface DocCode {
  readonly file: string;
  readonly line: number;
  readonly kind: 'inline' | 'block';
  /** A block's language and the rest of its info string (`yaml values`). */
  readonly lang: string;
  readonly meta: string;
  readonly text: string;
}

export function parseMarkdown(text: string): Root {
  return remark().use(remarkGfm).parse(text);
}

/** Every code span and code block of FILE. */
export function codeOf(file: string): DocCode[] {
  const code: DocCode[] = [];
  const visit = (node: Nodes): void => {
    const line = node.position?.start.line ?? 0;
    if (node.type === 'inlineCode') code.push({ file, line, kind: 'inline', lang: '', meta: '', text: node.value });
    else if (node.type === 'code') code.push({ file, line, kind: 'block', lang: node.lang ?? '', meta: node.meta ?? '', text: node.value });
    if ('children' in node) for (const child of node.children) visit(child);
  };
  visit(parseMarkdown(readFileSync(join(ROOT, file), 'utf8')));
  return code;
}

/** FILE's text. */
export function docText(file: string): string {
  return readFileSync(join(ROOT, file), 'utf8');
}
