/**
 * The grammar of the capture exclusions (docs/design.md §11): comma-separated
 * lists, no spaces, empty for none. One regular expression per kind, which
 * JavaScript and RE2 (CEL, policy mode) read alike, so the webhook and the
 * policy accept exactly the same values. The rule script checks them again.
 */

/** 1-65535, no leading zero. */
const PORT = '(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})';
const OCTET = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
const IPV4_CIDR = `${OCTET}(?:\\.${OCTET}){3}/(?:3[0-2]|[12]?[0-9])`;
const H16 = '[0-9a-fA-F]{1,4}';
/** The eight forms of RFC 4291 text (no embedded IPv4), `::` standing for one or more zero groups. */
const IPV6 = [
  `(?:${H16}:){7}${H16}`,
  `(?:${H16}:){1,7}:`,
  `(?:${H16}:){1,6}:${H16}`,
  `(?:${H16}:){1,5}(?::${H16}){1,2}`,
  `(?:${H16}:){1,4}(?::${H16}){1,3}`,
  `(?:${H16}:){1,3}(?::${H16}){1,4}`,
  `(?:${H16}:){1,2}(?::${H16}){1,5}`,
  `${H16}:(?::${H16}){1,6}`,
  `:(?:(?::${H16}){1,7}|:)`,
].join('|');
const IPV6_CIDR = `(?:${IPV6})/(?:12[0-8]|1[01][0-9]|[1-9]?[0-9])`;
const CIDR = `(?:${IPV4_CIDR}|${IPV6_CIDR})`;

const listOf = (item: string): string => `^(?:${item}(?:,${item})*)?$`;

export const PORT_LIST_PATTERN = listOf(PORT);
export const CIDR_LIST_PATTERN = listOf(CIDR);
/** Bounds the text a list may be (and the regular expression's work). */
export const MAX_CAPTURE_LIST_LENGTH = 2048;

const PORT_LIST = new RegExp(PORT_LIST_PATTERN);
const CIDR_LIST = new RegExp(CIDR_LIST_PATTERN);

export type CaptureListKind = 'ports' | 'cidrs';

/** Why `value` is not a list of its kind, or undefined when it is. */
export function captureListProblem(kind: CaptureListKind, value: unknown): string | undefined {
  const example = kind === 'ports' ? '"5432,6379"' : '"10.0.0.0/8,fd00::/8"';
  if (typeof value !== 'string') return `must be a string of comma-separated ${kind} (example: ${example})`;
  if (value.length > MAX_CAPTURE_LIST_LENGTH) return `longer than ${MAX_CAPTURE_LIST_LENGTH} characters`;
  const pattern = kind === 'ports' ? PORT_LIST : CIDR_LIST;
  if (!pattern.test(value)) {
    const what = kind === 'ports' ? 'ports (1-65535)' : 'CIDRs (IPv4 or IPv6 address/prefix)';
    return `${JSON.stringify(value.length > 64 ? value.slice(0, 61) + '...' : value)} is not a comma-separated list of ${what}, without spaces (example: ${example})`;
  }
  return undefined;
}

/** The items of a valid list. */
export function listItems(value: string): string[] {
  return value === '' ? [] : value.split(',');
}
