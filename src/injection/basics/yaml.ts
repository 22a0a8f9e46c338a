import yaml from 'js-yaml';

/**
 * YAML as Kubernetes reads it. kubectl, Helm and the API server turn YAML into
 * JSON with sigs.k8s.io/yaml, whose parser (a fork of go-yaml v2) resolves
 * plain scalars by YAML 1.1 rules: `0644` is octal (420), `yes`/`no`/`on`/`off`
 * and `y`/`n` are booleans, `1_000` is 1000. Timestamps stay strings, there
 * are no base-60 numbers, and `<<` merge keys work. The same rules serve for
 * writing: a string that would read as something else is quoted.
 */

/** go-yaml v2's resolve table: these exact words, nothing case-folded. */
const BOOLEANS: ReadonlyMap<string, boolean> = new Map([
  ...['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'].map((word) => [word, true] as const),
  ...['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'].map((word) => [word, false] as const),
]);

const SPECIAL_FLOATS: ReadonlyMap<string, number> = new Map([
  ...['.nan', '.NaN', '.NAN'].map((word) => [word, Number.NaN] as const),
  ...['.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF'].map((word) => [word, Number.POSITIVE_INFINITY] as const),
  ...['-.inf', '-.Inf', '-.INF'].map((word) => [word, Number.NEGATIVE_INFINITY] as const),
]);

/** Go's strconv.ParseInt(s, 0, 64) after go-yaml drops every `_`: sign, then 0x, 0o, 0b, a leading 0 (octal) or decimal. */
const GO_INTEGER = /^([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]+)|([0-9]+))$/;
/** go-yaml v2's yamlStyleFloat, tried when the integer parse fails (so `08` is the float 8). */
const GO_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;

interface ResolvedNumber {
  readonly value: number;
  /** go-yaml's int (ParseInt/ParseUint succeeded) as opposed to its float. */
  readonly integer: boolean;
}

/** The number a plain scalar stands for, or undefined when it stays a string (or is a bool or null). */
function resolveNumber(text: string): ResolvedNumber | undefined {
  const special = SPECIAL_FLOATS.get(text);
  if (special !== undefined) return { value: special, integer: false };
  if (text.startsWith('.')) return /^\.[0-9]+([eE][-+]?[0-9]+)?$/.test(text) ? { value: Number(text), integer: false } : undefined;
  if (!/^[-+0-9]/.test(text)) return undefined;
  const plain = text.replaceAll('_', '');
  const integer = GO_INTEGER.exec(plain);
  if (integer !== null) {
    const [, sign = '', hex, octal, binary, legacyOctal, decimal = ''] = integer;
    const magnitude =
      hex !== undefined ? BigInt(`0x${hex}`)
      : octal !== undefined ? BigInt(`0o${octal}`)
      : binary !== undefined ? BigInt(`0b${binary}`)
      : legacyOctal !== undefined ? BigInt(`0o${legacyOctal}`)
      : BigInt(decimal);
    // Beyond 64 bits ParseInt and ParseUint fail and go-yaml tries a float.
    if (magnitude < 1n << 64n) return { value: Number(sign === '-' ? -magnitude : magnitude), integer: true };
  }
  return GO_FLOAT.test(plain) ? { value: Number(plain), integer: false } : undefined;
}

const booleanType = new yaml.Type('tag:yaml.org,2002:bool', {
  kind: 'scalar',
  resolve: (data: string) => BOOLEANS.has(data),
  construct: (data: string) => BOOLEANS.get(data) === true,
  predicate: (value: unknown) => typeof value === 'boolean',
  represent: (value: object) => (value.valueOf() === true ? 'true' : 'false'),
});

const integerType = new yaml.Type('tag:yaml.org,2002:int', {
  kind: 'scalar',
  resolve: (data: string) => resolveNumber(data)?.integer === true,
  construct: (data: string) => resolveNumber(data)?.value,
  predicate: (value: unknown) => typeof value === 'number' && Number.isInteger(value) && !Object.is(value, -0),
  represent: (value: object) => String(value.valueOf()),
});

const floatType = new yaml.Type('tag:yaml.org,2002:float', {
  kind: 'scalar',
  resolve: (data: string) => resolveNumber(data)?.integer === false,
  construct: (data: string) => resolveNumber(data)?.value,
  predicate: (value: unknown) => typeof value === 'number' && (!Number.isInteger(value) || Object.is(value, -0)),
  represent: (value: object) => representFloat(Number(value.valueOf())),
});

function representFloat(value: number): string {
  if (Number.isNaN(value)) return '.nan';
  if (value === Number.POSITIVE_INFINITY) return '.inf';
  if (value === Number.NEGATIVE_INFINITY) return '-.inf';
  if (Object.is(value, -0)) return '-0.0';
  return String(value);
}

/** js-yaml exports its built-in types at run time, but @types/js-yaml does not declare them. */
function builtInType(name: 'null' | 'merge'): yaml.Type {
  const { types } = yaml as unknown as { types: Record<'null' | 'merge', yaml.Type> };
  return types[name];
}

// Order matters: js-yaml takes the first implicit type that resolves a scalar.
const KUBERNETES_SCHEMA = yaml.FAILSAFE_SCHEMA.extend({
  implicit: [builtInType('null'), booleanType, integerType, floatType, builtInType('merge')],
});
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
