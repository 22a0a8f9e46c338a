import { CaptureMode, type CaptureDecision } from './capture.js';
import type { TcpProbeSettings } from '../template/index.js';
import { Annotations, arrayAt, describeValue, entryName, isJsonObject, jsonPointer, objectAt, own, type JsonObject } from '../basics/index.js';

/**
 * tcpSocket probes under capture (issue 41, docs/design.md §11). The rules
 * send the kubelet's connection to the inbound listener, whose handshake
 * succeeds while the proxy lives: a tcpSocket probe of a closed port would
 * pass. Each such probe becomes an httpGet of the proxy's probe listener
 * (`capture.tcpProbes`), path `/tcp/<port>`, which the proxy answers from
 * active TCP health checks of 127.0.0.1:<port>: 200 while the port accepts,
 * 503 when it does not. The proxy learns the ports from the per-Pod
 * bootstrap (proxy-config.ts), merged under the template's own.
 */

export const PROBE_KINDS = ['startupProbe', 'readinessProbe', 'livenessProbe'] as const;
export type ProbeKind = (typeof PROBE_KINDS)[number];

/** One probe rewritten: where it is in the Pod as received, and the app's port it checks. */
export interface TcpProbeRewrite {
  readonly list: 'containers' | 'initContainers';
  readonly index: number;
  readonly container: string;
  readonly probe: ProbeKind;
  readonly port: number;
  /** The probe as the Pod has it. */
  readonly original: JsonObject;
}

/** A tcpSocket probe left as written, and why (explain prints it). */
export interface TcpProbeKept {
  readonly container: string;
  readonly probe: ProbeKind;
  readonly why: string;
}

export interface TcpProbePlan {
  readonly rewrites: readonly TcpProbeRewrite[];
  readonly kept: readonly TcpProbeKept[];
  readonly warnings: readonly string[];
}

/** The path a rewritten probe asks for: the app's port after it. */
export const TCP_PROBE_PATH_PREFIX = '/tcp/';

const NONE: TcpProbePlan = { rewrites: [], kept: [], warnings: [] };

/**
 * Which tcpSocket probes of a captured Pod are rewritten: every probe of
 * the app's containers and native sidecars, its named port resolved, except
 * one with a `host` (it does not probe the Pod), of a port the rules do not
 * redirect (the kubelet reaches the app itself), or of a native sidecar that
 * must pass before a classic proxy runs (`beforeClassicProxy`). None when the
 * Pod is not captured, the template has no probe listener, or the Pod says "false".
 */
export function planTcpProbes(pod: JsonObject, capture: CaptureDecision | undefined, nativeSidecar: boolean): TcpProbePlan {
  if (capture === undefined || !capture.capture) return NONE;
  const warnings: string[] = [];
  const asked = own(objectAt(objectAt(pod, 'metadata'), 'annotations') ?? {}, Annotations.rewriteTcpProbes);
  if (asked !== undefined && asked !== 'true' && asked !== 'false') warnings.push(`${Annotations.rewriteTcpProbes}: ${describeValue(asked)} is not "true" or "false"; ignored`);
  // Not rewritten: said per probe (explain), and warned when the template cannot, since such a probe passes while the proxy lives.
  const off =
    asked === 'false' ? `the Pod is annotated ${Annotations.rewriteTcpProbes}: "false"` : capture.settings.tcpProbes === undefined ? 'the template has no probe listener (capture.tcpProbes)' : undefined;
  const redirected = inboundRedirected(capture);
  const spec = objectAt(pod, 'spec');
  const rewrites: TcpProbeRewrite[] = [];
  const kept: TcpProbeKept[] = [];
  for (const list of ['initContainers', 'containers'] as const) {
    (arrayAt(spec, list) ?? []).forEach((entry, index) => {
      if (!isJsonObject(entry)) return;
      // Only native sidecars among init containers have probes.
      if (list === 'initContainers' && own(entry, 'restartPolicy') !== 'Always') return;
      const container = entryName(entry) ?? '';
      for (const probe of PROBE_KINDS) {
        const original = objectAt(entry, probe);
        const tcp = objectAt(original, 'tcpSocket');
        if (original === undefined || tcp === undefined) continue;
        const keep = (why: string): void => void kept.push({ container, probe, why });
        const host = own(tcp, 'host');
        if (typeof host === 'string' && host !== '') {
          keep(`it probes host ${host}, not the Pod`);
          continue;
        }
        const port = resolvePort(entry, own(tcp, 'port'));
        if (port === undefined) {
          keep(`its port ${describeValue(own(tcp, 'port') ?? null)} is not a port of the container`);
          warnings.push(`${list}[${index}] ("${container}").${probe}.tcpSocket.port: ${describeValue(own(tcp, 'port') ?? null)} names no port of the container; the probe is left as written`);
          continue;
        }
        if (!redirected(port)) {
          keep(`port ${port} is not captured: the kubelet reaches the app itself`);
          continue;
        }
        const early = list === 'initContainers' && !nativeSidecar ? beforeClassicProxy(capture.mode, probe, port) : undefined;
        if (early?.warning !== undefined) warnings.push(`${list}[${index}] ("${container}").${probe}: ${early.warning}`);
        if (early !== undefined) keep(early.why);
        else if (off !== undefined) keep(`${off}: it passes while the proxy runs, whether or not the app listens on port ${port}`);
        else rewrites.push({ list, index, container, probe, port, original });
      }
    });
  }
  if (off !== undefined && capture.settings.tcpProbes === undefined && kept.some((entry) => entry.why.startsWith(off))) {
    const which = kept.filter((entry) => entry.why.startsWith(off)).map((entry) => `${entry.container}.${entry.probe}`);
    warnings.push(`tcpSocket probes of captured ports (${which.join(', ')}) pass while the proxy runs, whether or not the app listens: ${off}; use httpGet, grpc or exec probes, or a template that has one`);
  }
  return { rewrites, kept, warnings };
}

/**
 * A native sidecar's probe that must pass before a classic proxy runs (issue
 * 50): the proxy is in `containers`, which the kubelet starts once every init
 * container has started, so a probe sent to its listener fails until then.
 * The startup probe holds the proxy itself (rewritten: both wait for ever);
 * the liveness probe would restart the sidecar while later init containers
 * run. With envoy-init, which goes after every other init container, both
 * reach the sidecar as written until its rules are in; the readiness probe
 * only holds the Pod's Ready, which waits for the proxy anyway: rewritten. In
 * CNI mode the rules are there from the Pod's start: no probe of a captured
 * port passes before the proxy, so only the startup probe is kept, and warned
 * about. Undefined: rewrite it.
 */
function beforeClassicProxy(mode: CaptureMode, probe: ProbeKind, port: number): { why: string; warning?: string } | undefined {
  if (mode === CaptureMode.cni) {
    if (probe !== 'startupProbe') return undefined;
    return {
      why: `a native sidecar starts before a classic proxy, which the kubelet starts only once this probe passes, and in CNI mode the rules send port ${port} to the proxy from the Pod's start: it cannot pass, as written or rewritten`,
      warning: `with a classic proxy in CNI mode, a native sidecar's startup probe of captured port ${port} never passes (the rules are in place before the sidecar starts, the proxy starts only once it passed); exclude the port (${Annotations.captureExcludeInboundPorts}) or use a native proxy (${Annotations.nativeSidecar}: "true")`,
    };
  }
  if (probe === 'startupProbe') {
    return { why: "a native sidecar starts before a classic proxy and envoy-init's rules, which the kubelet starts only once this probe passes: as written it reaches the sidecar itself (rewritten, it would wait on the proxy for ever)" };
  }
  if (probe === 'livenessProbe') {
    return {
      why: `a native sidecar runs before a classic proxy, which starts after every init container: as written it reaches the sidecar until envoy-init's rules are in (rewritten, it would fail and restart the sidecar until the proxy runs), then passes while the proxy runs, whether or not the sidecar listens on port ${port}`,
    };
  }
  return undefined;
}

/** Whether the rules send inbound TCP to PORT to the proxy (init/capture-rules.sh's inbound chain). */
export function inboundRedirected(capture: Extract<CaptureDecision, { capture: true }>): (port: number) => boolean {
  const ports = (text: string): number[] => (text === '' ? [] : text.split(',').map(Number));
  const { exclusions, settings } = capture;
  const excluded = new Set([...settings.proxyPorts, ...ports(exclusions.excludeInboundPorts)]);
  const included = ports(exclusions.includeInboundPorts);
  return (port) => !excluded.has(port) && (included.length === 0 || included.includes(port));
}

/** A number, or the name of one of the container's ports (as the kubelet resolves it). */
function resolvePort(container: JsonObject, port: unknown): number | undefined {
  if (typeof port === 'number') return Number.isInteger(port) && port >= 1 && port <= 65535 ? port : undefined;
  if (typeof port !== 'string') return undefined;
  const named = (arrayAt(container, 'ports') ?? []).find((entry) => isJsonObject(entry) && own(entry, 'name') === port);
  const number = isJsonObject(named) ? own(named, 'containerPort') : undefined;
  return typeof number === 'number' ? number : undefined;
}

/** The probe the kubelet runs instead: the original's timing and thresholds, an httpGet of the proxy's probe listener. */
export function rewrittenProbe(rewrite: TcpProbeRewrite, settings: TcpProbeSettings): JsonObject {
  const { tcpSocket: _dropped, ...rest } = rewrite.original;
  return { ...rest, httpGet: { path: `${TCP_PROBE_PATH_PREFIX}${rewrite.port}`, port: settings.port } };
}

/** The record the patch writes (`envoy-injector.io/tcp-probes`): what was rewritten, in the order found. */
export function tcpProbesRecord(plan: TcpProbePlan): string {
  return JSON.stringify(plan.rewrites.map(({ container, probe, port }) => ({ container, probe, port })));
}

/**
 * What the patch adds for a plan with rewrites: the probes replaced (paths of
 * the Pod as received: these operations come first), the record, and the
 * per-Pod bootstrap's listener and clusters (proxy-config.ts gives them to
 * the proxy).
 */
export interface TcpProbeInjection {
  readonly operations: readonly { readonly op: 'add'; readonly path: string; readonly value: JsonObject }[];
  readonly annotations: Readonly<Record<string, string>>;
  readonly listeners: readonly JsonObject[];
  readonly clusters: readonly JsonObject[];
}

export function tcpProbeInjection(plan: TcpProbePlan, settings: TcpProbeSettings): TcpProbeInjection | undefined {
  if (plan.rewrites.length === 0) return undefined;
  const operations = plan.rewrites.map((rewrite) => ({ op: 'add' as const, path: jsonPointer('spec', rewrite.list, rewrite.index, rewrite.probe), value: rewrittenProbe(rewrite, settings) }));
  const ports = [...new Set(plan.rewrites.map((rewrite) => rewrite.port))].sort((a, b) => a - b);
  return { operations, annotations: { [Annotations.tcpProbes]: tcpProbesRecord(plan) }, ...tcpProbeResources(settings, ports) };
}

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const HEALTH_CHECK = 'type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck';
const ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';

export const tcpProbeCluster = (port: number): string => `tcp_probe_${port}`;

/**
 * The probes' part of the per-Pod bootstrap (Envoy v3): a listener on the probe port whose
 * health_check filters answer `GET /tcp/<port>` with 200 while the cluster
 * of 127.0.0.1:<port> is healthy, else 503 (anything else: 404); per port a
 * STATIC cluster actively checked by a TCP connect every second. The
 * clusters take no traffic, so `no_traffic_interval` (60 s by default) is
 * the interval that applies; one failure or success flips the host.
 */
export function tcpProbeResources(settings: TcpProbeSettings, ports: readonly number[]): { listeners: JsonObject[]; clusters: JsonObject[] } {
  const dualStack = settings.address === '::';
  return {
      listeners: [
        {
          name: 'tcp_probes',
          address: { socket_address: { address: settings.address, port_value: settings.port, ...(dualStack ? { ipv4_compat: true } : {}) } },
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type': HCM,
                    stat_prefix: 'tcp_probes',
                    route_config: { virtual_hosts: [{ name: 'tcp_probes', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 404 } }] }] },
                    http_filters: [
                      ...ports.map((port) => ({
                        name: 'envoy.filters.http.health_check',
                        typed_config: {
                          '@type': HEALTH_CHECK,
                          pass_through_mode: false,
                          headers: [{ name: ':path', string_match: { exact: `${TCP_PROBE_PATH_PREFIX}${port}` } }],
                          cluster_min_healthy_percentages: { [tcpProbeCluster(port)]: { value: 100 } },
                        },
                      })),
                      { name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER } },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters: ports.map((port) => ({
        name: tcpProbeCluster(port),
        type: 'STATIC',
        connect_timeout: '1s',
        load_assignment: { cluster_name: tcpProbeCluster(port), endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }] },
        health_checks: [{ timeout: '1s', interval: '1s', no_traffic_interval: '1s', unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {} }],
      })),
  };
}
