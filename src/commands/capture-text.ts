import { Interception, TCP_PROBE_PATH_PREFIX, type CaptureDecision, type CaptureMode, type ProxyProtocolPlan, type TcpProbePlan } from '../injection/index.js';

/** What explain's JSON says of a Pod's traffic capture. */
export interface CaptureExplanation {
  readonly captured: boolean;
  readonly reason: string;
  readonly message: string;
  /** When captured: envoy-init in the Pod, or the node's CNI plugin with a check in the Pod. */
  readonly mode?: CaptureMode;
  /** When captured: how inbound connections reach the proxy (REDIRECT, or TPROXY: the app sees its clients). */
  readonly interception?: Interception;
  /** When captured: what the rules get (docs/design.md §11). */
  readonly rules?: {
    readonly proxyUid: number;
    readonly outboundPort: number;
    readonly inboundPort: number;
    readonly proxyPorts: readonly number[];
    readonly excludeOutboundCidrs: string;
    readonly excludeOutboundPorts: string;
    readonly excludeInboundPorts: string;
    readonly includeInboundPorts: string;
  };
  /** What the app sees as the peer of an inbound connection (docs/capture.md). */
  readonly clientAddress: string;
  /** When captured and the Pod asks for it: the ports whose connections start with a PROXY protocol v1 header naming the client. */
  readonly inboundProxyProtocol?: { readonly ports: readonly number[]; readonly clientAddress: string };
  /** When captured: its tcpSocket probes, rewritten to the proxy's probe listener or left as written, and why. */
  readonly tcpProbes?: {
    readonly rewritten: readonly { readonly container: string; readonly probe: string; readonly port: number; readonly httpGet: string }[];
    readonly kept: readonly { readonly container: string; readonly probe: string; readonly why: string }[];
  };
}

/** What the app sees of its clients, captured or not (docs/capture.md, "What the app sees"). */
export const CLIENT_ADDRESS = {
  captured:
    "the Pod's own address: the proxy's connection to the app starts in the Pod, so the client's address is gone at L4; an inbound listener that speaks HTTP (use_remote_address) adds it in X-Forwarded-For, the chart's is a TCP proxy and adds nothing",
  direct: "each client's own address: inbound connections reach the app directly",
  tproxy:
    "each client's own address: TPROXY keeps it, and the proxy's transparent listener connects to the app from it (Envoy's original_src); the proxy runs as root with NET_ADMIN (envoy-injector.io/capture-interception)",
  proxyProtocol:
    "the Pod's own address as its peer, and the client's own address and port in the PROXY protocol v1 header the proxy sends first (envoy-injector.io/inbound-proxy-protocol): the app must read it",
} as const;

export function explainCapture(capture: CaptureDecision, probes: TcpProbePlan | undefined, proxyProtocol?: ProxyProtocolPlan): CaptureExplanation {
  if (!capture.capture) return { captured: false, reason: capture.reason, message: capture.message, clientAddress: CLIENT_ADDRESS.direct };
  const { settings, exclusions } = capture;
  const probePort = settings.tcpProbes?.port;
  const rewritten = (probes?.rewrites ?? []).map(({ container, probe, port }) => ({ container, probe, port, httpGet: `:${probePort ?? ''}${TCP_PROBE_PATH_PREFIX}${port}` }));
  const kept = probes?.kept ?? [];
  const tproxy = capture.interception === Interception.tproxy;
  return {
    captured: true,
    reason: capture.reason,
    message: capture.message,
    mode: capture.mode,
    interception: capture.interception,
    rules: { proxyUid: settings.proxyUid, outboundPort: settings.outboundPort, inboundPort: tproxy ? (settings.tproxyPort ?? settings.inboundPort) : settings.inboundPort, proxyPorts: settings.proxyPorts, ...exclusions },
    clientAddress: tproxy ? CLIENT_ADDRESS.tproxy : CLIENT_ADDRESS.captured,
    ...((proxyProtocol?.ports.length ?? 0) === 0 ? {} : { inboundProxyProtocol: { ports: proxyProtocol?.ports ?? [], clientAddress: CLIENT_ADDRESS.proxyProtocol } }),
    ...(rewritten.length + kept.length === 0 ? {} : { tcpProbes: { rewritten, kept } }),
  };
}

/** The decision in one line, then (when captured) the effective rules, one per line. */
export function captureLines(capture: CaptureExplanation): string[] {
  const how = capture.mode === undefined ? '' : ` in ${capture.mode} mode`;
  const head = `traffic capture ${capture.captured ? 'ON' : 'off'}${how}: ${capture.message} [reason ${capture.reason}]`;
  const { rules } = capture;
  const sees = `the app sees as its client: ${capture.clientAddress}`;
  const header = capture.inboundProxyProtocol;
  const seesHeader = header === undefined ? [] : [`the app sees as its client on port${header.ports.length > 1 ? 's' : ''} ${header.ports.join(',')}: ${header.clientAddress}`];
  if (rules === undefined) return [head, sees];
  const probes = capture.tcpProbes;
  const probeLines = [
    ...(probes?.rewritten ?? []).map(({ container, probe, port, httpGet }) => `tcpSocket probe ${container}.${probe} (port ${port}) -> httpGet ${httpGet}: the proxy answers 200 while 127.0.0.1:${port} accepts, else 503`),
    ...(probes?.kept ?? []).map(({ container, probe, why }) => `tcpSocket probe ${container}.${probe} left as written: ${why}`),
  ];
  const none = (list: string, empty = 'none'): string => (list === '' ? empty : list);
  const proxyPorts = rules.proxyPorts.join(',');
  return [
    head,
    `outbound TCP -> port ${rules.outboundPort}, except uid ${rules.proxyUid}${capture.interception === Interception.tproxy ? ` and gid ${rules.proxyUid}` : ''}, loopback, CIDRs ${none(rules.excludeOutboundCidrs)}, ports ${none([proxyPorts, rules.excludeOutboundPorts].filter((list) => list !== '').join(','))}`,
    `inbound TCP -> port ${rules.inboundPort}${capture.interception === Interception.tproxy ? ' by TPROXY (transparent listener)' : ''}, ports ${none(rules.includeInboundPorts, 'all')}, except ${none([proxyPorts, rules.excludeInboundPorts].filter((list) => list !== '').join(','))}`,
    sees,
    ...seesHeader,
    ...probeLines,
  ];
}
