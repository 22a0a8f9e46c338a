import { describeValue, isJsonObject, own, type JsonObject, type JsonValue } from '../basics/index.js';

/** The problems of one template, each `path: problem`. */
export class ProblemList {
  readonly #problems: string[] = [];
  add(path: string, problem: string): void {
    this.#problems.push(path === '' ? problem : `${path}: ${problem}`);
  }
  addAll(problems: readonly string[]): void {
    this.#problems.push(...problems);
  }
  isEmpty(): boolean {
    return this.#problems.length === 0;
  }
  list(): string[] {
    return [...this.#problems];
  }
}

/** Absent, null or empty: what the API server's Go types read as "not given". */
export function isUnset(value: JsonValue | undefined): boolean {
  return value === undefined || value === null || value === '';
}

/** A string field limited to `allowed`; a value of another type is left to the schema check. */
export function checkEnum(entry: JsonObject, field: string, allowed: readonly string[], path: string, problems: ProblemList): void {
  const value = own(entry, field);
  if (typeof value === 'string' && !allowed.includes(value)) {
    problems.add(`${path}.${field}`, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
  }
}

export function isNonNegativeInteger(value: JsonValue | undefined): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}

/** Exactly one of `fields` set; null counts as unset, as for Go's decoder. */
export function checkOneOf(entry: JsonObject, path: string, fields: readonly string[], problems: ProblemList): void {
  const set = fields.filter((field) => {
    const value = own(entry, field);
    return value !== undefined && value !== null;
  });
  if (set.length === 0) problems.add(path, `must have exactly one of ${fields.join(', ')}`);
  else if (set.length > 1) problems.add(path, `must have exactly one of ${fields.join(', ')}, found ${set.join(', ')}`);
}

export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** IANA_SVC_NAME: at most 15 characters, at least one letter, no `--`. */
export const PORT_NAME = /^(?=.*[a-z])(?!.*--)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Each mapping of a template's top-level list; a list or entry of the wrong shape is a problem. */
export function forEachEntry(
  parent: JsonObject,
  field: string,
  problems: ProblemList,
  check: (entry: JsonObject, path: string) => void,
): void {
  const value = own(parent, field);
  if (value === undefined || value === null) return;
  if (!Array.isArray(value)) {
    problems.add(field, 'must be a list');
    return;
  }
  value.forEach((entry, index) => {
    const path = `${field}[${index}]`;
    if (isJsonObject(entry)) check(entry, path);
    else problems.add(path, 'must be a mapping');
  });
}

/** Each mapping of a nested list (`ports[0]`...); wrong shapes are the schema check's to report. */
export function forEachNested(parent: JsonObject, field: string, check: (entry: JsonObject, path: string) => void): void {
  const value = own(parent, field);
  if (!Array.isArray(value)) return;
  value.forEach((entry, index) => {
    if (isJsonObject(entry)) check(entry, `${field}[${index}]`);
  });
}

export function checkName(
  entry: JsonObject,
  path: string,
  problems: ProblemList,
  pattern: RegExp,
  patternName: string,
  maxLength = pattern === DNS1123_LABEL ? 63 : 253,
): string | undefined {
  const name = own(entry, 'name');
  if (isUnset(name)) {
    problems.add(`${path}.name`, 'required');
    return undefined;
  }
  if (typeof name !== 'string') return undefined; // the schema check reports the type
  if (name.length > maxLength || !pattern.test(name)) {
    problems.add(`${path}.name`, `"${name}" must be ${patternName} (lowercase letters, digits and '-', at most ${maxLength} characters)`);
  }
  return name;
}

export function checkUnique(name: string, path: string, seen: Map<string, string>, problems: ProblemList): void {
  const first = seen.get(name);
  if (first === undefined) seen.set(name, path);
  else problems.add(`${path}.name`, `"${name}" duplicates ${first}.name`);
}

/** Why `path` is not a relative path inside the volume (as the API server's validateLocalDescendingPath), or undefined. */
export function relativePathProblem(path: string): string | undefined {
  if (path.startsWith('/')) return `${describeValue(path)} must be a relative path`;
  if (path.split(/[/\\]/).includes('..')) return `${describeValue(path)} must not contain '..'`;
  return undefined;
}

