/**
 * Tools to build hostile JSON text: keys such as `__proto__` as plain own
 * members, duplicate keys, values nested deeper than any recursive code can
 * follow. JSON.parse turns each of these into plain data; the point is to
 * check that nothing downstream treats them otherwise.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonPath = readonly (string | number)[];
export type JsonType = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object';

export function jsonType(value: Json | undefined): JsonType | 'absent' {
  if (value === undefined) return 'absent';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value as 'boolean' | 'number' | 'string' | 'object';
}

export function isObject(value: unknown): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Own member only: `__proto__` or `constructor` never resolve to anything inherited. */
export function ownMember(value: Json | undefined, key: string | number): Json | undefined {
  if (Array.isArray(value)) return typeof key === 'number' ? value[key] : undefined;
  return isObject(value) && Object.hasOwn(value, key) ? value[key] : undefined;
}

/** Sets a key as a plain own data member, even `__proto__` (an assignment would set the prototype). */
export function setOwn(target: { [key: string]: Json } | Json[], key: string | number, value: Json): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

export function getAt(root: Json, path: JsonPath): Json | undefined {
  let node: Json | undefined = root;
  for (const token of path) node = ownMember(node, token);
  return node;
}

/** Replaces the value at `path` (its parent must exist); the root itself cannot be replaced. */
export function setAt(root: Json, path: JsonPath, value: Json): void {
  const parent = getAt(root, path.slice(0, -1));
  const key = path[path.length - 1];
  if (key === undefined || (!isObject(parent) && !Array.isArray(parent))) return;
  setOwn(parent, key, value);
}

export function deleteAt(root: Json, path: JsonPath): void {
  const parent = getAt(root, path.slice(0, -1));
  const key = path[path.length - 1];
  if (key === undefined) return;
  if (Array.isArray(parent) && typeof key === 'number') parent.splice(key, 1);
  else if (isObject(parent)) delete parent[key];
}

/** Every path in the document, the root (`[]`) first, depth-first. */
export function allPaths(root: Json, maxDepth = 12): JsonPath[] {
  const paths: JsonPath[] = [];
  const walk = (node: Json, path: JsonPath): void => {
    paths.push(path);
    if (path.length >= maxDepth) return;
    if (Array.isArray(node)) node.forEach((child, index) => walk(child, [...path, index]));
    else if (isObject(node)) for (const key of Object.keys(node)) walk(node[key] as Json, [...path, key]);
  };
  walk(root, []);
  return paths;
}

/** Paths of the objects (not arrays) in the document. */
export function objectPaths(root: Json): JsonPath[] {
  return allPaths(root).filter((path) => isObject(getAt(root, path)));
}

/** A member written into an object's JSON text on top of its own members (so a key may appear twice). */
export interface ExtraMember {
  readonly key: string;
  /** Raw JSON text of the value. */
  readonly text: string;
  /** Before the object's own members (the own value then wins in JSON.parse), else after (the extra wins). */
  readonly first: boolean;
}

/** JSON.stringify, plus extra members (duplicates allowed) written into the objects at the given paths. */
export function stringifyWithExtras(root: Json, extras: ReadonlyMap<string, readonly ExtraMember[]>): string {
  const write = (node: Json, path: JsonPath): string => {
    if (Array.isArray(node)) return `[${node.map((child, index) => write(child, [...path, index])).join(',')}]`;
    if (!isObject(node)) return JSON.stringify(node) ?? 'null';
    const members = Object.keys(node).map((key) => `${JSON.stringify(key)}:${write(node[key] as Json, [...path, key])}`);
    for (const extra of extras.get(pathKey(path)) ?? []) {
      const member = `${JSON.stringify(extra.key)}:${extra.text}`;
      if (extra.first) members.unshift(member);
      else members.push(member);
    }
    return `{${members.join(',')}}`;
  };
  return write(root, []);
}

export function pathKey(path: JsonPath): string {
  return JSON.stringify(path);
}

/** JSON text nested `depth` levels deep: arrays, objects, or both alternating. */
export function deepText(depth: number, shape: 'array' | 'object' | 'mixed'): string {
  if (shape === 'array') return '['.repeat(depth) + ']'.repeat(depth);
  if (shape === 'object') return '{"a":'.repeat(depth) + 'null' + '}'.repeat(depth);
  const half = Math.ceil(depth / 2);
  return '[{"a":'.repeat(half) + '1' + '}]'.repeat(half);
}

/**
 * JSON text of `root` with the value at `path` replaced by `raw` text (for
 * values too deep for JSON.stringify to write).
 */
export function stringifyWithRaw(root: Json, path: JsonPath, raw: string): string {
  const sentinel = `\u0000raw-${Math.random().toString(36).slice(2)}\u0000`;
  const copy = JSON.parse(JSON.stringify(root)) as Json;
  if (path.length === 0) return raw;
  setAt(copy, path, sentinel);
  return JSON.stringify(copy).replace(JSON.stringify(sentinel), () => raw);
}
