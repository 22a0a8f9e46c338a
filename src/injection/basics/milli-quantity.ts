import { BINARY_POWER, DECIMAL_POWER, parseQuantity } from './quantity.js';

/**
 * Quantities as whole thousandths (milli-units), the arithmetic both modes
 * pad Pod-level resources with (docs/design.md §14): the webhook here, the
 * policy in CEL over int64 (policy/compile-resources.ts), step for step, so
 * that both pad the same Pods to the same values and skip the same others.
 * Every amount is rounded up to 1m, as the API server's defaulting
 * (`SetDefaults_ResourceList`) rounds every resource of every list.
 *
 * The forms taken: unsigned, at most 18 digits (whole and decimals), a
 * decimal suffix (`m` .. `E`), a binary one (`Ki` .. `Ei`, at most three
 * decimals before it: `1.5Gi`, not `1.0001Gi`) or an exponent of at most two
 * digits (`129e6`, `1e-3`); and a value below 10^15 (`1P`, 888 TiB), so that
 * the thousandths stay below 10^18 and every sum fits an int64. What the API
 * server presents to admission is canonical (`0.5` arrives as `500m`,
 * `1.5Gi` as `1536Mi`), always of these forms below the bound.
 */

/** The forms taken, as a regular expression JavaScript and RE2 (CEL) read alike; the digit count is checked apart. */
export const MILLI_PATTERN = '^[0-9]*(\\.[0-9]*)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]{1,2})?$';
const PATTERN = new RegExp(MILLI_PATTERN);
/** At most this many digits, whole and decimals together: int64 holds them. */
export const MAX_MILLI_DIGITS = 18;
/** The largest amount, sum or padded value in thousandths (a value below 10^15). */
export const MAX_MILLI = 10n ** 18n - 1n;
/** The decimal suffixes' powers of ten (none: 0), and the binary ones' factors: the tables CEL looks them up in. */
export const DECIMAL_POWERS: Readonly<Record<string, number>> = { '': 0, ...DECIMAL_POWER };
export const BINARY_FACTORS: Readonly<Record<string, bigint>> = Object.fromEntries(Object.entries(BINARY_POWER).map(([suffix, bits]) => [suffix, 1n << BigInt(bits)]));
/** The binary suffixes by power of 1024 (0: none). */
export const BINARY_SUFFIXES = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'] as const;

const pow10 = (power: number): bigint => 10n ** BigInt(power);

/**
 * TEXT in thousandths, rounded up to 1m; undefined outside the forms taken
 * (see above). A grammar check over parseQuantity, the one parser of
 * quantities: the CEL of compile-resources.ts computes the same value and
 * refuses the same texts.
 */
export function toMilli(text: string | number): bigint | undefined {
  const source = typeof text === 'number' ? String(text) : text;
  if (!PATTERN.test(source)) return undefined;
  const [, whole = '', decimals = '', suffix = ''] = /^([0-9]*)(?:\.([0-9]*))?(.*)$/.exec(source) ?? [];
  const digits = whole.length + decimals.length;
  if (digits === 0 || digits > MAX_MILLI_DIGITS) return undefined;
  // A binary value with more decimals than thousandths absorb would need more than int64 in CEL.
  if (BINARY_POWER[suffix] !== undefined && decimals.length > 3) return undefined;
  const value = parseQuantity(source);
  if (value === undefined) return undefined;
  const milli = (value.numerator * 1000n + value.denominator - 1n) / value.denominator;
  return milli <= MAX_MILLI ? milli : undefined;
}

export type MilliFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

/** The format TEXT's suffix gives (as the API server reads it): Ki..Ei binary, e<n> an exponent, else DecimalSI. */
export function milliFormat(text: string): MilliFormat {
  if (/(Ki|Mi|Gi|Ti|Pi|Ei)$/.test(text)) return 'BinarySI';
  return /[eE][+-]?[0-9]+$/.test(text) ? 'DecimalExponent' : 'DecimalSI';
}

const DECIMAL_SUFFIXES = ['m', '', 'k', 'M', 'G', 'T'] as const;

/**
 * VALUE (thousandths, 0 <= VALUE <= MAX_MILLI) as the canonical text the
 * API server writes for it in FORMAT (`Quantity.String()`), so that it
 * stores what it is sent: a binary value of 1024 or more that is whole goes
 * by the largest power of 1024 dividing it, anything else by the largest
 * power of 1000 (a suffix, or `e<3k>`).
 */
export function renderMilli(value: bigint, format: MilliFormat): string {
  if (value === 0n) return '0';
  if (format === 'BinarySI' && value % 1000n === 0n && value >= 1024000n) {
    const units = value / 1000n;
    const power = [5, 4, 3, 2, 1].find((candidate) => units % 1024n ** BigInt(candidate) === 0n) ?? 0;
    return `${units / 1024n ** BigInt(power)}${BINARY_SUFFIXES[power]}`;
  }
  const step = [5, 4, 3, 2, 1].find((candidate) => value % pow10(3 * candidate) === 0n) ?? 0;
  const mantissa = value / pow10(3 * step);
  if (format === 'DecimalExponent') return step === 1 ? `${mantissa}` : `${mantissa}e${3 * step - 3}`;
  return `${mantissa}${DECIMAL_SUFFIXES[step]}`;
}
