/** Plain JSON, as the API server sends it: we never narrow a Pod to a typed model. */
export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The object at `object[key]`, or undefined when absent or not an object. */
export function objectAt(object: JsonObject | undefined, key: string): JsonObject | undefined {
  const value = object === undefined ? undefined : own(object, key);
  return isJsonObject(value) ? value : undefined;
}

/** The array at `object[key]`, or undefined when absent or not an array. */
export function arrayAt(object: JsonObject | undefined, key: string): JsonValue[] | undefined {
  const value = object === undefined ? undefined : own(object, key);
  return Array.isArray(value) ? value : undefined;
}

/** The string at `object[key]`, or undefined. */
export function stringAt(object: JsonObject | undefined, key: string): string | undefined {
  const value = object === undefined ? undefined : own(object, key);
  return typeof value === 'string' ? value : undefined;
}

/**
 * An own property only: a key like `__proto__` or `constructor` in user input
 * must never resolve to something inherited from Object.prototype.
 */
export function own(object: JsonObject, key: string): JsonValue | undefined {
  // Most keys looked up are absent: one lookup then (nothing inherited is undefined), the own check only for a hit.
  const value = object[key];
  return value !== undefined && Object.hasOwn(object, key) ? value : undefined;
}

/** The `name` field of a list entry, when it is a string. */
export function entryName(entry: JsonValue | undefined): string | undefined {
  return isJsonObject(entry) ? stringAt(entry, 'name') : undefined;
}

/**
 * A value from a Pod for a message: a quoted string cut to `maxLength`, or its
 * kind. Never throws (JSON.stringify does on deep nesting) and never copies an
 * unbounded value into a warning.
 */
export function describeValue(value: unknown, maxLength = 64): string {
  if (typeof value === 'string') return JSON.stringify(value.length > maxLength ? `${value.slice(0, maxLength)}...` : value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return String(value);
}
