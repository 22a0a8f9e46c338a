/**
 * Where CNI mode's check connects (docs/design.md §11, CNI mode): for each IP
 * family the Pod has, a destination the rules redirect, read from the Pod's
 * routes, its own addresses and the capture's exclusions. Pure: the check
 * reads the files. Addresses are bigints, so one path serves both families.
 */

export type IpFamily = 4 | 6;

export interface ProbeTarget {
  readonly family: IpFamily;
  readonly address: string;
  readonly port: number;
}

export interface ProbeInput {
  /** The text of /proc/net/route. */
  readonly routes: string;
  /** The text of /proc/net/ipv6_route ('' when the kernel has no IPv6). */
  readonly ipv6Routes: string;
  /** The Pod's own addresses, either family: routed through loopback, so never redirected. */
  readonly ownAddresses: readonly string[];
  readonly excludedCidrs: readonly string[];
  /** Ports the rules let out unredirected (the proxy's own, the excluded ones). */
  readonly excludedPorts: readonly number[];
}

interface Route {
  readonly network: bigint;
  readonly prefix: number;
}

interface Family {
  readonly family: IpFamily;
  readonly bits: number;
  /** Where a connection goes when the Pod has a default route: a documentation address, never a real peer. */
  readonly documentation: bigint;
}

/** TEST-NET-1's 192.0.2.1 (RFC 5737). */
const IPV4: Family = { family: 4, bits: 32, documentation: 0xc0000201n };
/** 2001:db8::1, of the documentation prefix 2001:db8::/32 (RFC 3849). */
const IPV6: Family = { family: 6, bits: 128, documentation: 0x20010db8000000000000000000000001n };
const FIRST_PORT = 9;

/**
 * One destination per family the Pod has a route of (besides loopback,
 * link-local and multicast): IPv4, IPv6, or both for a dual-stack Pod, each
 * of which the rules must redirect. A family whose every destination the
 * exclusions cover has none. Empty: nothing a redirected connection could take.
 */
export function probeTargets(input: ProbeInput): ProbeTarget[] {
  let port = FIRST_PORT;
  while (input.excludedPorts.includes(port)) port += 1;
  const targets: ProbeTarget[] = [];
  for (const [family, routes] of [[IPV4, parseIpv4Routes(input.routes)], [IPV6, parseIpv6Routes(input.ipv6Routes)]] as const) {
    const address = familyTarget(family, routes, input);
    if (address !== undefined) targets.push({ family: family.family, address: formatAddress(family, address), port });
  }
  return targets;
}

/** The default route's documentation address, else the last address but one of the first connected subnet. */
function familyTarget(family: Family, routes: readonly Route[], input: ProbeInput): bigint | undefined {
  const excluded = input.excludedCidrs.map((cidr) => parseCidr(family, cidr)).filter((cidr): cidr is Route => cidr !== undefined);
  const own = new Set(input.ownAddresses.map((text) => parseAddress(family, text)).filter((value) => value !== undefined));
  const candidates = [...routes].sort((a, b) => a.prefix - b.prefix).map((route) => (route.prefix === 0 ? family.documentation : (route.network | hostBits(family, route.prefix)) - 1n));
  return candidates.find((candidate) => !own.has(candidate) && !excluded.some((cidr) => within(family, candidate, cidr)));
}

/** /proc/net/route: routes of interfaces other than loopback, host routes (/32) left out. */
function parseIpv4Routes(text: string): Route[] {
  const routes: Route[] = [];
  for (const line of text.split('\n').slice(1)) {
    const [iface, destination, , , , , , mask] = line.trim().split(/\s+/);
    if (iface === undefined || iface === 'lo' || destination === undefined || mask === undefined) continue;
    if (!/^[0-9A-Fa-f]{8}$/.test(destination) || !/^[0-9A-Fa-f]{8}$/.test(mask)) continue;
    const prefix = prefixOfMask(hexLittleEndian(mask));
    if (prefix === undefined || prefix === 32) continue;
    routes.push({ network: hexLittleEndian(destination), prefix });
  }
  return routes;
}

/** The kernel's "reject" flag: an unreachable or prohibit route carries nothing. */
const RTF_REJECT = 0x200;
/** fe80::/10 and ff00::/8: every interface with IPv6 has them, in an IPv4-only Pod too. */
const LINK_SCOPED: readonly Route[] = [
  { network: 0xfe80n << 112n, prefix: 10 },
  { network: 0xffn << 120n, prefix: 8 },
];

/**
 * /proc/net/ipv6_route (addresses in network order, 32 hex digits; the
 * prefix length in hex; the flags; the interface last): routes of interfaces
 * other than loopback, neither host routes (/128, the Pod's own addresses
 * among them), link-local, multicast nor reject routes.
 */
function parseIpv6Routes(text: string): Route[] {
  const routes: Route[] = [];
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    const [destination, prefixHex] = fields;
    const flags = fields[8];
    const iface = fields[9];
    if (destination === undefined || prefixHex === undefined || flags === undefined || iface === undefined || iface === 'lo') continue;
    if (!/^[0-9a-fA-F]{32}$/.test(destination) || !/^[0-9a-fA-F]{2}$/.test(prefixHex) || !/^[0-9a-fA-F]{8}$/.test(flags)) continue;
    const route = { network: BigInt(`0x${destination}`), prefix: Number.parseInt(prefixHex, 16) };
    if (route.prefix >= 128 || (Number.parseInt(flags, 16) & RTF_REJECT) !== 0) continue;
    if (LINK_SCOPED.some((scope) => route.prefix >= scope.prefix && within(IPV6, route.network, scope))) continue;
    routes.push(route);
  }
  return routes;
}

/** /proc/net/route writes IPv4 addresses as the host's 32-bit words: little-endian on the machines Kubernetes runs on. */
function hexLittleEndian(hex: string): bigint {
  const value = Number.parseInt(hex, 16);
  return BigInt((((value & 0xff) << 24) | ((value & 0xff00) << 8) | ((value >>> 8) & 0xff00) | (value >>> 24)) >>> 0);
}

function prefixOfMask(mask: bigint): number | undefined {
  for (let prefix = 0; prefix <= 32; prefix += 1) if (mask === ((1n << 32n) - 1n) - hostBits(IPV4, prefix)) return prefix;
  return undefined;
}

function hostBits(family: Family, prefix: number): bigint {
  return (1n << BigInt(family.bits - prefix)) - 1n;
}

function within(family: Family, address: bigint, cidr: Route): boolean {
  return address >> BigInt(family.bits - cidr.prefix) === cidr.network >> BigInt(family.bits - cidr.prefix);
}

function parseCidr(family: Family, text: string): Route | undefined {
  const [address, prefix] = text.split('/');
  const bits = Number(prefix);
  const network = address === undefined ? undefined : parseAddress(family, address);
  if (network === undefined || !Number.isInteger(bits) || bits < 0 || bits > family.bits) return undefined;
  return { network, prefix: bits };
}

/** An address of the family in text, or undefined (another family's, or not an address). */
function parseAddress(family: Family, text: string): bigint | undefined {
  return family.family === 4 ? parseIpv4(text) : parseIpv6(text);
}

function parseIpv4(text: string): bigint | undefined {
  const octets = text.split('.');
  if (octets.length !== 4 || octets.some((octet) => !/^[0-9]{1,3}$/.test(octet) || Number(octet) > 255)) return undefined;
  return octets.reduce((value, octet) => value * 256n + BigInt(octet), 0n);
}

/** RFC 4291's text forms without an embedded IPv4 address (as the exclusions' grammar and os.networkInterfaces write them). */
function parseIpv6(text: string): bigint | undefined {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = halves.map((half) => (half === '' ? [] : half.split(':')));
  const [head = [], tail = []] = groups;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array<string>(halves.length === 1 ? 0 : missing).fill('0'), ...tail];
  if (all.some((group) => !/^[0-9a-fA-F]{1,4}$/.test(group))) return undefined;
  return all.reduce((value, group) => (value << 16n) | BigInt(`0x${group}`), 0n);
}

/** Dotted quads; IPv6 as RFC 5952 writes it (lowercase, the longest run of two or more zero groups as `::`). */
function formatAddress(family: Family, value: bigint): string {
  if (family.family === 4) return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((shift) => ((value >> shift) & 0xffffn).toString(16));
  let best = { start: -1, length: 1 };
  for (let start = 0; start < 8; start += 1) {
    let length = 0;
    while (start + length < 8 && groups[start + length] === '0') length += 1;
    if (length > best.length) best = { start, length };
  }
  if (best.start < 0) return groups.join(':');
  return `${groups.slice(0, best.start).join(':')}::${groups.slice(best.start + best.length).join(':')}`;
}
