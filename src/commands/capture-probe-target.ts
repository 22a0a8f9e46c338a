/**
 * Where CNI mode's check connects (docs/design.md §11, CNI mode): an IPv4
 * destination the rules redirect, read from the Pod's routes, its own
 * addresses and the capture's exclusions. Pure: the check reads the files.
 */

/** TEST-NET-1 (RFC 5737): never a real peer, redirected when the Pod has a default route. */
const TEST_NET_1 = 0xc0000201;
const FIRST_PORT = 9;

export interface ProbeTarget {
  readonly address: string;
  readonly port: number;
}

export interface ProbeInput {
  /** The text of /proc/net/route. */
  readonly routes: string;
  /** The Pod's own IPv4 addresses: routed through loopback, so never redirected. */
  readonly ownAddresses: readonly string[];
  readonly excludedCidrs: readonly string[];
  /** Ports the rules let out unredirected (the proxy's own, the excluded ones). */
  readonly excludedPorts: readonly number[];
}

interface Route {
  readonly network: number;
  readonly mask: number;
}

/** The destination, or undefined when the Pod has no IPv4 route a redirected connection could take. */
export function probeTarget(input: ProbeInput): ProbeTarget | undefined {
  const routes = parseRoutes(input.routes);
  const excluded = input.excludedCidrs.map(parseCidr).filter((cidr): cidr is Route => cidr !== undefined);
  const own = new Set(input.ownAddresses.map(parseAddress));
  const candidates = routes.map((route) => (route.mask === 0 ? TEST_NET_1 : ((route.network | ~route.mask) - 1) >>> 0));
  const address = candidates.find((candidate) => !own.has(candidate) && !excluded.some((cidr) => within(candidate, cidr)));
  if (address === undefined) return undefined;
  let port = FIRST_PORT;
  while (input.excludedPorts.includes(port)) port += 1;
  return { address: formatAddress(address), port };
}

/** Routes of interfaces other than loopback, default route first, host routes (/32) left out. */
function parseRoutes(text: string): Route[] {
  const routes: Route[] = [];
  for (const line of text.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    const [iface, destination, , , , , , mask] = fields;
    if (iface === undefined || iface === 'lo' || destination === undefined || mask === undefined) continue;
    const route = { network: hexLittleEndian(destination), mask: hexLittleEndian(mask) };
    if (Number.isNaN(route.network) || Number.isNaN(route.mask) || route.mask === 0xffffffff) continue;
    routes.push(route);
  }
  return routes.sort((a, b) => a.mask - b.mask);
}

/** /proc/net/route writes addresses as the host's 32-bit words: little-endian on the machines Kubernetes runs on. */
function hexLittleEndian(hex: string): number {
  if (!/^[0-9A-Fa-f]{8}$/.test(hex)) return Number.NaN;
  const value = Number.parseInt(hex, 16);
  return (((value & 0xff) << 24) | ((value & 0xff00) << 8) | ((value >>> 8) & 0xff00) | (value >>> 24)) >>> 0;
}

function parseAddress(text: string): number {
  const octets = text.split('.').map(Number);
  if (octets.length !== 4 || octets.some((octet) => !Number.isInteger(octet) || octet < 0 || octet > 255)) return Number.NaN;
  return octets.reduce((value, octet) => value * 256 + octet, 0);
}

function parseCidr(text: string): Route | undefined {
  const [address, prefix] = text.split('/');
  const bits = Number(prefix);
  if (address === undefined || address.includes(':') || !Number.isInteger(bits)) return undefined;
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return { network: (parseAddress(address) & mask) >>> 0, mask };
}

function within(address: number, cidr: Route): boolean {
  return ((address & cidr.mask) >>> 0) === cidr.network;
}

function formatAddress(value: number): string {
  return [24, 16, 8, 0].map((shift) => (value >>> shift) & 0xff).join('.');
}
