import { compareQuantities, MAX_QUANTITY_EXPONENT, type Quantity } from './quantity.js';

/**
 * Quantities as the API server reads and writes them
 * (k8s.io/apimachinery/pkg/api/resource): the whole grammar (`n` and `u`
 * too, which the overrides' grammar leaves out), the format a suffix gives
 * (BinarySI for Ki..Ei, DecimalExponent for e<n>, DecimalSI otherwise), the
 * rounding up to 1n every value gets when parsed, the cap of a BinarySI value
 * at 2^63-1, and the canonical text it serializes (`Quantity.String()`).
 */

export type QuantityFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

export interface KubeQuantity {
  readonly value: Quantity;
  readonly format: QuantityFormat;
}

const GRAMMAR = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;
const BINARY: Readonly<Record<string, bigint>> = { Ki: 1n, Mi: 2n, Gi: 3n, Ti: 4n, Pi: 5n, Ei: 6n };
const DECIMAL: Readonly<Record<string, number>> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const DECIMAL_SUFFIX: Readonly<Record<number, string>> = Object.fromEntries(Object.entries(DECIMAL).map(([suffix, exponent]) => [exponent, suffix]));
const BINARY_SUFFIX = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];
/** math.MaxInt64: the API server caps a BinarySI value there. */
export const MAX_INT64 = 2n ** 63n - 1n;
const NANO = 10n ** 9n;

/** TEXT as the API server parses it (rounded up to 1n), or undefined when it is no quantity. */
export function parseKubeQuantity(text: string | number): KubeQuantity | undefined {
  const source = typeof text === 'number' ? String(text) : text;
  if (source.length > 64) return undefined;
  const match = GRAMMAR.exec(source);
  if (match === null) return undefined;
  const [, sign = '', number = '', suffix = ''] = match;
  const [whole = '', fraction = ''] = number.split('.');
  let numerator = BigInt((whole || '0') + fraction);
  let exponent = -fraction.length;
  let format: QuantityFormat = 'DecimalSI';
  const binary = BINARY[suffix];
  if (binary !== undefined) {
    numerator *= 1024n ** binary;
    format = 'BinarySI';
  } else if (DECIMAL[suffix] !== undefined) exponent += DECIMAL[suffix] ?? 0;
  else {
    const power = Number(suffix.slice(1));
    if (!Number.isSafeInteger(power) || Math.abs(power) > MAX_QUANTITY_EXPONENT) return undefined;
    exponent += power;
    format = 'DecimalExponent';
  }
  if (sign === '-') numerator = -numerator;
  const value = exponent >= 0 ? { numerator: numerator * 10n ** BigInt(exponent), denominator: 1n } : { numerator, denominator: 10n ** BigInt(-exponent) };
  let rounded = roundUp(value, NANO);
  // A BinarySI value below one is written as DecimalSI; above 2^63-1 it is capped.
  if (format === 'BinarySI' && compareQuantities(rounded, { numerator: MAX_INT64, denominator: 1n }) > 0) rounded = { numerator: MAX_INT64, denominator: 1n };
  return { value: rounded, format };
}

/** VALUE rounded away from zero to a multiple of 1/STEP (the API server's inf.RoundUp). */
export function roundUp(value: Quantity, step: bigint): Quantity {
  const scaled = value.numerator * step;
  const quotient = scaled / value.denominator;
  const exact = quotient * value.denominator === scaled;
  const units = exact ? quotient : quotient + (value.numerator < 0n ? -1n : 1n);
  return reduce({ numerator: units, denominator: step });
}

export function addQuantities(a: Quantity, b: Quantity): Quantity {
  return reduce({ numerator: a.numerator * b.denominator + b.numerator * a.denominator, denominator: a.denominator * b.denominator });
}

export function subtractQuantities(a: Quantity, b: Quantity): Quantity {
  return addQuantities(a, { numerator: -b.numerator, denominator: b.denominator });
}

export function maxQuantity(a: Quantity, b: Quantity): Quantity {
  return compareQuantities(a, b) >= 0 ? a : b;
}

export const ZERO: Quantity = { numerator: 0n, denominator: 1n };

function reduce(value: Quantity): Quantity {
  const divisor = gcd(value.numerator < 0n ? -value.numerator : value.numerator, value.denominator);
  return divisor <= 1n ? value : { numerator: value.numerator / divisor, denominator: value.denominator / divisor };
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

/**
 * The canonical text of VALUE in FORMAT, as the API server writes it
 * (Quantity.String: CanonicalizeBytes), so that it stores what it was sent;
 * undefined when it would store something else (not a multiple of 1n, a
 * BinarySI value above 2^63-1, a DecimalSI one beyond the `E` suffix).
 */
export function canonicalQuantity(value: Quantity, format: QuantityFormat): string | undefined {
  const nanos = value.numerator * NANO;
  if (nanos % value.denominator !== 0n) return undefined;
  const units = nanos / value.denominator;
  if (units === 0n) return '0';
  const negative = units < 0n;
  const magnitude = negative ? -units : units;
  const sign = negative ? '-' : '';
  if (format === 'BinarySI' && magnitude < 1024n * NANO) format = 'DecimalSI';
  if (format === 'BinarySI') {
    if (magnitude % NANO !== 0n) format = 'DecimalSI';
    else {
      if (magnitude / NANO > MAX_INT64) return undefined;
      let mantissa = magnitude / NANO;
      let power = 0;
      while (mantissa % 1024n === 0n) {
        mantissa /= 1024n;
        power += 1;
      }
      const suffix = BINARY_SUFFIX[power];
      return suffix === undefined ? undefined : `${sign}${mantissa}${suffix}`;
    }
  }
  // All factors of ten into the exponent, then down to a multiple of three.
  let mantissa = magnitude;
  let exponent = -9;
  while (mantissa % 10n === 0n) {
    mantissa /= 10n;
    exponent += 1;
  }
  while (exponent % 3 !== 0) {
    mantissa *= 10n;
    exponent -= 1;
  }
  if (format === 'DecimalExponent') return `${sign}${mantissa}${exponent === 0 ? '' : `e${exponent}`}`;
  const suffix = DECIMAL_SUFFIX[exponent];
  return suffix === undefined ? undefined : `${sign}${mantissa}${suffix}`;
}
