import yaml from 'js-yaml';

/**
 * YAML as Kubernetes reads it: YAML 1.2 core types plus `<<` merge keys, and
 * no timestamp or binary types (a date-like annotation stays a string, as it
 * does for kubectl).
 */
const KUBERNETES_SCHEMA = yaml.CORE_SCHEMA.extend({ implicit: [mergeKeyType()] });

/** js-yaml exports its built-in types at run time, but @types/js-yaml does not declare them. */
function mergeKeyType(): yaml.Type {
  const { types } = yaml as unknown as { types: { merge: yaml.Type } };
  return types.merge;
}

export class YamlSyntaxError extends Error {
  /** 1-based line of the problem, when known. */
  readonly line: number | undefined;
  constructor(message: string, line: number | undefined) {
    super(message);
    this.name = 'YamlSyntaxError';
    this.line = line;
  }
}

export function parseYaml(text: string): unknown {
  try {
    return yaml.load(text, { schema: KUBERNETES_SCHEMA });
  } catch (error) {
    throw toSyntaxError(error);
  }
}

/** Every document of a multi-document stream; empty documents are dropped. */
export function parseYamlDocuments(text: string): unknown[] {
  try {
    return yaml.loadAll(text, undefined, { schema: KUBERNETES_SCHEMA }).filter((document) => document !== null && document !== undefined);
  } catch (error) {
    throw toSyntaxError(error);
  }
}

export function formatYaml(value: unknown): string {
  return yaml.dump(value, { noRefs: true, lineWidth: -1, schema: KUBERNETES_SCHEMA });
}

function toSyntaxError(error: unknown): YamlSyntaxError {
  if (error instanceof yaml.YAMLException) {
    const line = error.mark === undefined ? undefined : error.mark.line + 1;
    const where = line === undefined ? '' : ` (line ${line})`;
    return new YamlSyntaxError(`invalid YAML: ${error.reason}${where}`, line);
  }
  return new YamlSyntaxError(`invalid YAML: ${String(error)}`, undefined);
}
