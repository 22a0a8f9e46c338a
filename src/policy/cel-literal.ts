import type { JsonValue } from '../injection/index.js';

/**
 * CEL source text for JSON values. Kubernetes' CEL refuses list and map
 * literals whose elements differ in type (HomogeneousAggregateLiterals), so
 * every element of a mixed aggregate is wrapped in `dyn(...)`; aggregates of
 * strings alone stay plain, which keeps the common case (args, labels) readable.
 */

/** A CEL string literal: JSON's escapes are a subset of CEL's. */
export function celString(value: string): string {
  return JSON.stringify(value);
}

/** A JSON value as a CEL literal whose JSON encoding is the value itself. */
export function celValue(value: JsonValue): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return celString(value);
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number') return celNumber(value);
  if (Array.isArray(value)) {
    const wrap = needsDyn(value);
    return `[${value.map((item) => element(celValue(item), wrap)).join(', ')}]`;
  }
  const entries = Object.entries(value);
  const wrap = needsDyn(entries.map(([, item]) => item));
  return celMap(entries.map(([key, item]) => ({ key, expression: element(celValue(item), wrap) })));
}

/** One entry of a map literal; `optional` entries (`?key: optional`) are left out when their optional is none. */
export interface CelMapEntry {
  readonly key: string;
  readonly expression: string;
  readonly optional?: boolean;
}

export function celMap(entries: readonly CelMapEntry[]): string {
  return `{${entries.map(({ key, expression, optional }) => `${optional ? '?' : ''}${celString(key)}: ${expression}`).join(', ')}}`;
}

/** The longest list a CEL list operation is unrolled for (celMapList, a template's entries); longer ones keep the comprehension. */
export const MAX_UNROLLED = 8;

/**
 * `LIST.map(e, ITEM(e))` for a list variable of at most MAX elements,
 * unrolled into a size test and an index per element. The API server runs
 * a comprehension with a cost tracker observing its every step: its
 * profile puts one at ~10 µs per Pod, many times a size test. A list that
 * is not a variable (it would be evaluated once per element) or may be
 * longer keeps the comprehension.
 */
export function celMapList(list: string, item: (element: string) => string, max: number | undefined): string {
  if (list === '[]' || max === 0) return '[]';
  if (max === undefined || max > MAX_UNROLLED || !/^variables\.\w+$/.test(list)) return `${list}.map(e, ${item('e')})`;
  return `(${Array.from({ length: max }, (_, index) => `(size(${list}) > ${index} ? [${item(`${list}[${index}]`)}] : [])`).join(' + ')})`;
}

/** `dyn(expression)`: an element of a mixed aggregate. */
export function celDyn(expression: string): string {
  return `dyn(${expression})`;
}

function element(expression: string, wrap: boolean): string {
  return wrap ? celDyn(expression) : expression;
}

function needsDyn(items: readonly JsonValue[]): boolean {
  return !items.every((item) => typeof item === 'string');
}

/**
 * Integers as CEL ints, the rest as doubles: both encode to the same JSON
 * number, and a double literal needs a fraction or an exponent.
 */
function celNumber(value: number): string {
  if (Number.isInteger(value) && Number.isSafeInteger(value)) return String(value);
  const text = String(value);
  return /[.eE]/.test(text) ? text : `${text}.0`;
}
