import { captureListProblem, type CaptureListKind } from './capture-grammar.js';
import { findTypeProblems } from './check-field-types.js';
import { checkEnum, isNonNegativeInteger, ProblemList } from './entry-checks.js';
import { arrayAt, describeValue, imageProblem, isJsonObject, objectAt, own, stringAt, type JsonObject, type JsonValue } from '../basics/index.js';
import { checkResources } from './validate-resources.js';

/** The init container's name, and its volume's: the Pod's own of that name wins, as for every template entry. */
export const CAPTURE_INIT_NAME = 'envoy-init';
export const CAPTURE_LOCK_VOLUME = 'envoy-init-xtables-lock';
/** CNI mode's unprivileged init container, which checks that the node installed the rules (capture-check.ts). */
export const CAPTURE_CHECK_NAME = 'envoy-capture-check';

/**
 * How the rules get into a Pod (docs/design.md §11, CNI mode): envoy-init in
 * the Pod (NET_ADMIN), the node's CNI plugin, or envoy-init except where the
 * namespace's Pod Security level forbids it.
 */
export const CaptureModeSetting = { initContainer: 'initContainer', cni: 'cni', auto: 'auto' } as const;
export type CaptureModeSetting = (typeof CaptureModeSetting)[keyof typeof CaptureModeSetting];

/**
 * How inbound connections reach the proxy (docs/design.md §11, TPROXY): the
 * nat table's REDIRECT (the app sees its own Pod as every client), or the
 * mangle table's TPROXY to a transparent listener, whose connection to the
 * app leaves from the client's own address (the proxy then needs NET_ADMIN).
 */
export const Interception = { redirect: 'redirect', tproxy: 'tproxy' } as const;
export type Interception = (typeof Interception)[keyof typeof Interception];

/** The exclusions of one Pod's capture, each in the annotations' text form (comma-separated, "" for none). */
export interface CaptureExclusions {
  readonly excludeOutboundCidrs: string;
  readonly excludeOutboundPorts: string;
  readonly excludeInboundPorts: string;
  /** "" redirects every inbound port not excluded. */
  readonly includeInboundPorts: string;
}

export type CaptureExclusionName = keyof CaptureExclusions;

/** Each exclusion's kind of list, in the order the rule script takes them. */
export const CAPTURE_EXCLUSION_KINDS: Readonly<Record<CaptureExclusionName, CaptureListKind>> = {
  excludeOutboundCidrs: 'cidrs',
  excludeOutboundPorts: 'ports',
  excludeInboundPorts: 'ports',
  includeInboundPorts: 'ports',
};

/**
 * A template's `capture` section: how its proxy takes over a Pod's traffic.
 * The ports are the ones its Envoy's listeners use (the chart renders both
 * from one value), so the rules and the listeners cannot disagree.
 */
export interface CaptureSettings {
  /** The envoy-init image (init/Dockerfile). */
  readonly image: string;
  readonly mode: CaptureModeSetting;
  /** CNI mode's check container image (the injector's own); required unless the mode is initContainer. */
  readonly checkImage: string | undefined;
  readonly imagePullPolicy: string | undefined;
  /** The proxy's user: its connections are never redirected (no loop). */
  readonly proxyUid: number;
  readonly outboundPort: number;
  readonly inboundPort: number;
  /** The proxy's own listeners (health, admin): never redirected, in either direction. */
  readonly proxyPorts: readonly number[];
  /** Capture for Pods that do not say (`envoy-injector.io/capture`). */
  readonly enabled: boolean;
  /** The exclusions of Pods without exclusion annotations. */
  readonly defaults: CaptureExclusions;
  /** The init container's own requests and limits. */
  readonly resources: JsonObject;
  /** Where the proxy answers rewritten tcpSocket probes (tcp-probes.ts); undefined: the template does not rewrite them. */
  readonly tcpProbes: TcpProbeSettings | undefined;
  /**
   * The template's inbound listener hands each connection off to the listener
   * of its original destination (Envoy's use_original_dst), and the proxy
   * takes a per-Pod bootstrap (`--config-path`): what the PROXY protocol's
   * per-port listeners need (proxy-protocol.ts).
   */
  readonly inboundHandoff: boolean;
  /** The interception of Pods that do not say (`envoy-injector.io/capture-interception`). */
  readonly interception: Interception;
  /** The port of the per-Pod transparent listener TPROXY sends inbound connections to; undefined: the template cannot do TPROXY. */
  readonly tproxyPort: number | undefined;
  /** Its Pods may ask for TPROXY by annotation in every namespace (else only where the namespace's label allows it). */
  readonly allowTproxy: boolean;
}

/**
 * The proxy's listener for rewritten tcpSocket probes: an Envoy that takes a
 * second bootstrap from `--config-path` (merged under its `--config-yaml`).
 */
export interface TcpProbeSettings {
  /** The listener's port: one of proxyPorts, so the rules never redirect it. */
  readonly port: number;
  /** Its address: "0.0.0.0", or "::" (with ipv4_compat) for a dual-stack Pod. */
  readonly address: string;
}

/** Small, and given: a namespace with a ResourceQuota or LimitRange refuses a container without them. */
export const DEFAULT_CAPTURE_RESOURCES: JsonObject = {
  requests: { cpu: '10m', memory: '16Mi' },
  limits: { cpu: '100m', memory: '64Mi' },
};

const CAPTURE_FIELDS = [
  'image',
  'mode',
  'checkImage',
  'imagePullPolicy',
  'proxyUid',
  'outboundPort',
  'inboundPort',
  'proxyPorts',
  'enabled',
  'excludeOutboundCidrs',
  'excludeOutboundPorts',
  'excludeInboundPorts',
  'includeInboundPorts',
  'resources',
  'tcpProbes',
  'inboundHandoff',
  'interception',
  'tproxyPort',
  'allowTproxy',
];

const MAX_ID = 2147483647;

/**
 * Reads a template's `capture` section (undefined when it has none). The
 * proxy's uid defaults to its container's `securityContext.runAsUser`.
 * Problems are `capture.field: problem`.
 */
export function parseCaptureSettings(value: JsonValue | undefined, proxy: JsonObject | undefined): CaptureSettings | undefined | string[] {
  if (value === undefined || value === null) return undefined;
  const problems = new ProblemList();
  if (!isJsonObject(value)) return ['capture: must be a mapping (image, proxyUid, outboundPort, inboundPort, ...)'];
  for (const key of Object.keys(value)) {
    if (!CAPTURE_FIELDS.includes(key)) problems.add(`capture.${key}`, `unknown field (capture may hold ${CAPTURE_FIELDS.join(', ')})`);
  }
  const image = own(value, 'image');
  const imageText = typeof image === 'string' ? image : '';
  if (typeof image !== 'string' || image === '') problems.add('capture.image', 'required (the envoy-init image)');
  else {
    const problem = imageProblem(image);
    if (problem !== undefined) problems.add('capture.image', problem);
  }
  checkEnum(value, 'imagePullPolicy', ['Always', 'IfNotPresent', 'Never'], 'capture', problems);
  const { mode, checkImage } = parseMode(value, problems);
  const proxyContext = objectAt(proxy, 'securityContext');
  const proxyUid = own(value, 'proxyUid') ?? (proxyContext === undefined ? undefined : own(proxyContext, 'runAsUser'));
  const uid = isNonNegativeInteger(proxyUid) && typeof proxyUid === 'number' && proxyUid <= MAX_ID ? proxyUid : undefined;
  if (proxyUid === undefined) problems.add('capture.proxyUid', "required when the proxy container sets no securityContext.runAsUser (the rules must know the proxy's user)");
  else if (uid === undefined) problems.add('capture.proxyUid', `${describeValue(proxyUid)} is not a user id`);
  const outboundPort = port(value, 'outboundPort', problems);
  const inboundPort = port(value, 'inboundPort', problems);
  if (outboundPort !== undefined && outboundPort === inboundPort) problems.add('capture.inboundPort', 'must differ from outboundPort');
  const proxyPorts = own(value, 'proxyPorts') ?? [];
  if (!Array.isArray(proxyPorts)) problems.add('capture.proxyPorts', 'must be a list of ports');
  else proxyPorts.forEach((entry, index) => void (isPort(entry) || problems.add(`capture.proxyPorts[${index}]`, `${describeValue(entry)} is not a port (1-65535)`)));
  const enabled = own(value, 'enabled') ?? false;
  if (typeof enabled !== 'boolean') problems.add('capture.enabled', 'must be true or false');
  const exclusion = (name: CaptureExclusionName): string => {
    const given = own(value, name) ?? '';
    const problem = captureListProblem(CAPTURE_EXCLUSION_KINDS[name], given);
    if (problem !== undefined) problems.add(`capture.${name}`, problem);
    return typeof given === 'string' ? given : '';
  };
  const defaults: CaptureExclusions = {
    excludeOutboundCidrs: exclusion('excludeOutboundCidrs'),
    excludeOutboundPorts: exclusion('excludeOutboundPorts'),
    excludeInboundPorts: exclusion('excludeInboundPorts'),
    includeInboundPorts: exclusion('includeInboundPorts'),
  };
  const resources = own(value, 'resources') ?? DEFAULT_CAPTURE_RESOURCES;
  problems.addAll(findTypeProblems({ name: 'envoy-init', image: imageText, resources }, 'Container', 'capture').filter((problem) => problem.startsWith('capture.resources')));
  checkResources(resources, 'capture.resources', problems);
  const tcpProbes = parseTcpProbes(own(value, 'tcpProbes'), Array.isArray(proxyPorts) ? proxyPorts : [], [outboundPort, inboundPort], problems);
  if (tcpProbes !== undefined && proxyTakesConfigPath(proxy)) problems.add('capture.tcpProbes', "the proxy's command line sets --config-path already: the probes' bootstrap is given through it");
  const inboundHandoff = own(value, 'inboundHandoff') ?? false;
  if (typeof inboundHandoff !== 'boolean') problems.add('capture.inboundHandoff', 'must be true or false');
  else if (inboundHandoff && proxyTakesConfigPath(proxy)) problems.add('capture.inboundHandoff', "the proxy's command line sets --config-path already: the PROXY protocol's listeners are given through it");
  const { interception, tproxyPort, allowTproxy } = parseInterception(value, mode, [outboundPort, inboundPort, ...(Array.isArray(proxyPorts) ? proxyPorts : [])], proxyTakesConfigPath(proxy), problems);
  if (!problems.isEmpty() || !isJsonObject(resources) || uid === undefined || outboundPort === undefined || inboundPort === undefined || !Array.isArray(proxyPorts)) {
    return problems.list();
  }
  return {
    image: imageText,
    mode,
    checkImage,
    imagePullPolicy: stringAt(value, 'imagePullPolicy'),
    proxyUid: uid,
    outboundPort,
    inboundPort,
    proxyPorts: proxyPorts.filter(isPort),
    enabled: enabled === true,
    defaults,
    resources,
    tcpProbes,
    inboundHandoff: inboundHandoff === true,
    interception,
    tproxyPort,
    allowTproxy,
  };
}

/**
 * `interception` (default redirect), `tproxyPort` and `allowTproxy` (default
 * false): TPROXY needs the port of its transparent listener, which the
 * per-Pod bootstrap gives the proxy (`--config-path`), and is never CNI
 * mode's (the node plugin installs the nat rules only, and the proxy would
 * need NET_ADMIN where Pod Security forbids it).
 */
function parseInterception(
  section: JsonObject,
  mode: CaptureModeSetting,
  taken: readonly (JsonValue | undefined)[],
  configPathTaken: boolean,
  problems: ProblemList,
): { interception: Interception; tproxyPort: number | undefined; allowTproxy: boolean } {
  const kinds = Object.values(Interception);
  const given = own(section, 'interception') ?? Interception.redirect;
  const interception = kinds.find((kind) => kind === given);
  if (interception === undefined) problems.add('capture.interception', `${describeValue(given)} is not one of ${kinds.join(', ')}`);
  const portValue = own(section, 'tproxyPort');
  const tproxyPort = portValue === undefined ? undefined : port(section, 'tproxyPort', problems);
  if (tproxyPort !== undefined && taken.includes(tproxyPort)) problems.add('capture.tproxyPort', `${tproxyPort} is taken by another of the proxy's listeners (outboundPort, inboundPort, proxyPorts)`);
  if (tproxyPort !== undefined && configPathTaken) problems.add('capture.tproxyPort', "the proxy's command line sets --config-path already: the transparent listener is given through it");
  const tproxyLimits = (field: string, what: string): void => {
    if (portValue === undefined) problems.add(`capture.${field}`, `${what} needs capture.tproxyPort (the port of the transparent listener)`);
    if (mode === CaptureModeSetting.cni) problems.add(`capture.${field}`, `${what} cannot be CNI mode's: the node plugin installs the REDIRECT rules only, and the proxy's NET_ADMIN is what Pod Security forbids`);
  };
  if (interception === Interception.tproxy) tproxyLimits('interception', 'tproxy');
  const allowTproxy = own(section, 'allowTproxy') ?? false;
  if (typeof allowTproxy !== 'boolean') problems.add('capture.allowTproxy', 'must be true or false');
  else if (allowTproxy) tproxyLimits('allowTproxy', 'TPROXY');
  return { interception: interception ?? Interception.redirect, tproxyPort, allowTproxy: allowTproxy === true };
}

/** `mode` (default initContainer) and, for the modes that may use CNI, the check container's image. */
function parseMode(section: JsonObject, problems: ProblemList): { mode: CaptureModeSetting; checkImage: string | undefined } {
  const modes = Object.values(CaptureModeSetting);
  const given = own(section, 'mode') ?? CaptureModeSetting.initContainer;
  const mode = modes.find((entry) => entry === given);
  if (mode === undefined) problems.add('capture.mode', `${describeValue(given)} is not one of ${modes.join(', ')}`);
  const checkImage = own(section, 'checkImage');
  if (checkImage !== undefined && (typeof checkImage !== 'string' || checkImage === '')) problems.add('capture.checkImage', 'must be an image name');
  else if (typeof checkImage === 'string') {
    const problem = imageProblem(checkImage);
    if (problem !== undefined) problems.add('capture.checkImage', problem);
  } else if (mode !== undefined && mode !== CaptureModeSetting.initContainer) {
    problems.add('capture.checkImage', `required when mode is ${mode} (the image of ${CAPTURE_CHECK_NAME}: the injector's own)`);
  }
  return { mode: mode ?? CaptureModeSetting.initContainer, checkImage: typeof checkImage === 'string' ? checkImage : undefined };
}

function proxyTakesConfigPath(proxy: JsonObject | undefined): boolean {
  const words = [...(arrayAt(proxy, 'command') ?? []), ...(arrayAt(proxy, 'args') ?? [])];
  return words.some((word) => typeof word === 'string' && (word === '-c' || word === '--config-path' || word.startsWith('--config-path=')));
}

/** `capture.tcpProbes`: {port, address}; its port must be one of proxyPorts (never redirected) and none of the capture listeners'. */
function parseTcpProbes(value: JsonValue | undefined, proxyPorts: readonly JsonValue[], listeners: readonly (number | undefined)[], problems: ProblemList): TcpProbeSettings | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isJsonObject(value)) {
    problems.add('capture.tcpProbes', 'must be a mapping (port, address)');
    return undefined;
  }
  for (const key of Object.keys(value)) if (key !== 'port' && key !== 'address') problems.add(`capture.tcpProbes.${key}`, 'unknown field (tcpProbes may hold port, address)');
  const probePort = own(value, 'port');
  if (!isPort(probePort)) problems.add('capture.tcpProbes.port', `${describeValue(probePort ?? null)} is not a port (1-65535)`);
  else if (!proxyPorts.includes(probePort)) problems.add('capture.tcpProbes.port', `${probePort} must be one of capture.proxyPorts (the rules must never redirect the kubelet's probes of it)`);
  else if (listeners.includes(probePort)) problems.add('capture.tcpProbes.port', `${probePort} is a capture listener's port`);
  const address = own(value, 'address') ?? '0.0.0.0';
  if (address !== '0.0.0.0' && address !== '::') problems.add('capture.tcpProbes.address', `${describeValue(address)} must be "0.0.0.0" or "::"`);
  return isPort(probePort) && typeof address === 'string' ? { port: probePort, address } : undefined;
}

function isPort(value: JsonValue | undefined): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65535;
}

function port(section: JsonObject, field: string, problems: ProblemList): number | undefined {
  const value = own(section, field);
  if (value === undefined) problems.add(`capture.${field}`, "required (the port of the proxy's listener)");
  else if (!isPort(value)) problems.add(`capture.${field}`, `${describeValue(value)} is not a port (1-65535)`);
  return isPort(value) ? value : undefined;
}
