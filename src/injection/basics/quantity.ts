import { describeValue } from './json.js';

/**
 * Kubernetes resource quantities (`250m`, `1.5`, `128Mi`, `1G`, `2e3`), parsed
 * exactly as rationals so that `1.5` and `1500m` compare equal.
 * Grammar: k8s.io/apimachinery/pkg/api/resource (signed number + suffix).
 */
export interface Quantity {
  /** value = numerator / denominator, denominator > 0 */
  readonly numerator: bigint;
  readonly denominator: bigint;
}

/** No real quantity is longer; exported with the pattern so policy mode checks the same way. */
export const MAX_QUANTITY_LENGTH = 64;
/** The largest decimal exponent (`1e1000`) accepted, either sign: Kubernetes caps far below; the bound keeps BigInt work small. */
export const MAX_QUANTITY_EXPONENT = 1000;
/** The quantity grammar as a regular expression that JavaScript and RE2 (CEL) read alike. */
export const QUANTITY_PATTERN = '^([+-]?)(\\d+(?:\\.\\d*)?|\\.\\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\\d+)?$';
const QUANTITY = new RegExp(QUANTITY_PATTERN);

/** The binary suffixes' powers of two, and the decimal ones' powers of ten. */
export const BINARY_POWER: Readonly<Record<string, number>> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
export const DECIMAL_POWER: Readonly<Record<string, number>> = { m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** The parsed quantity, or undefined when `text` is not one. */
export function parseQuantity(text: string | number): Quantity | undefined {
  const source = typeof text === 'number' ? numberToText(text) : text;
  // The bound keeps BigInt parsing cheap on hostile input.
  if (source.length > MAX_QUANTITY_LENGTH) return undefined;
  const match = QUANTITY.exec(source);
  if (match === null) return undefined;
  const [, sign = '', number = '', suffix = ''] = match;
  const [whole = '', fraction = ''] = number.split('.');
  let numerator = BigInt((whole || '0') + fraction);
  let decimalExponent = -fraction.length;
  if (sign === '-') numerator = -numerator;

  const binary = BINARY_POWER[suffix];
  const decimal = DECIMAL_POWER[suffix];
  if (binary !== undefined) numerator *= 1n << BigInt(binary);
  else if (decimal !== undefined) decimalExponent += decimal;
  else if (suffix !== '') {
    const exponent = Number(suffix.slice(1));
    if (!Number.isSafeInteger(exponent) || Math.abs(exponent) > MAX_QUANTITY_EXPONENT) return undefined;
    decimalExponent += exponent;
  }

  return decimalExponent >= 0
    ? { numerator: numerator * 10n ** BigInt(decimalExponent), denominator: 1n }
    : { numerator, denominator: 10n ** BigInt(-decimalExponent) };
}

/** -1, 0 or 1 as a < b, a = b, a > b. */
export function compareQuantities(a: Quantity, b: Quantity): -1 | 0 | 1 {
  const left = a.numerator * b.denominator;
  const right = b.numerator * a.denominator;
  return left < right ? -1 : left > right ? 1 : 0;
}

/** Why `value` is not a usable resource quantity, or undefined when it is. */
export function quantityProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' && typeof value !== 'number') return 'must be a quantity such as "250m", "1.5" or "128Mi"';
  const quantity = parseQuantity(value);
  if (quantity === undefined) return `${describeValue(String(value))} is not a quantity (examples: "250m", "1.5", "128Mi", "1G")`;
  if (quantity.numerator < 0n) return `${describeValue(String(value))} must not be negative`;
  return undefined;
}

function numberToText(value: number): string {
  return Number.isFinite(value) ? String(value) : 'NaN';
}
