import type { CaptureDecision } from './capture.js';
import { captureListProblem, Interception, listItems } from '../template/index.js';
import { everyAddress, tcpProxyFilter } from './envoy-listener.js';
import { Annotations, objectAt, own, type JsonObject } from '../basics/index.js';
import { inboundRedirected } from './tcp-probes.js';

/**
 * The PROXY protocol on the proxy's hop to the app (issue 41, docs/design.md
 * §11). Under capture the app's inbound connections come from the proxy, in
 * the Pod: the client's address is gone at L4. For the ports a Pod lists in
 * `envoy-injector.io/inbound-proxy-protocol`, the proxy sends a PROXY
 * protocol v1 header first, naming the client's address and port and the
 * original destination, which apps such as nginx, HAProxy and RabbitMQ read.
 *
 * How: the template's inbound listener hands each connection off to the
 * listener of its original destination (use_original_dst,
 * `capture.inboundHandoff`); the per-Pod bootstrap adds, per port, a listener
 * `0.0.0.0:<port>` (and `[::]:<port>`) that binds nothing (the app owns the
 * port) and only takes those handoffs, a TCP proxy to the cluster
 * `inbound_proxy_protocol`: ORIGINAL_DST, its transport socket Envoy's
 * upstream_proxy_protocol (v1) over the raw buffer socket.
 */

export interface ProxyProtocolPlan {
  /** The ports whose inbound connections get the header, ascending; none when the Pod asks for none or asks wrongly. */
  readonly ports: readonly number[];
  readonly warnings: readonly string[];
}

export const PROXY_PROTOCOL_CLUSTER = 'inbound_proxy_protocol';
export const proxyProtocolListener = (port: number): string => `inbound_proxy_protocol_${port}`;

const NONE: ProxyProtocolPlan = { ports: [], warnings: [] };

/**
 * The ports of the Pod's annotation, when each is one the rules send to the
 * proxy and the template can hand off. Anything wrong leaves the Pod without
 * the header on every port, with a warning saying why: a half-applied list
 * would give an app that expects the header on a port none.
 */
export function planProxyProtocol(pod: JsonObject, capture: CaptureDecision | undefined): ProxyProtocolPlan {
  const given = own(objectAt(objectAt(pod, 'metadata'), 'annotations') ?? {}, Annotations.inboundProxyProtocol);
  if (given === undefined || capture === undefined) return NONE;
  const ignored = (why: string): ProxyProtocolPlan => ({ ports: [], warnings: [`${Annotations.inboundProxyProtocol}: ${why}; ignored, the app gets no PROXY header`] });
  const problem = captureListProblem('ports', given);
  if (problem !== undefined) return ignored(problem);
  if (!capture.capture) return given === '' ? NONE : ignored(`the Pod's traffic is not captured (${capture.message}): inbound connections reach the app directly, with the client's own address`);
  if (capture.interception === Interception.tproxy) return ignored('the Pod is captured by TPROXY, where the app sees the client\'s own address already (the transparent listener does not hand off)');
  if (!capture.settings.inboundHandoff) return ignored("the template's inbound listener does not hand connections off by original destination (capture.inboundHandoff)");
  const ports = [...new Set(listItems(typeof given === 'string' ? given : '').map(Number))].sort((a, b) => a - b);
  const redirected = inboundRedirected(capture);
  const uncaptured = ports.filter((port) => !redirected(port));
  if (uncaptured.length > 0) return ignored(`${uncaptured.length > 1 ? 'ports' : 'port'} ${uncaptured.join(',')} ${uncaptured.length > 1 ? 'are' : 'is'} not captured (the proxy's own ports or the Pod's inbound exclusions)`);
  return { ports, warnings: [] };
}

const UPSTREAM_PROXY_PROTOCOL = 'type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport';
const RAW_BUFFER = 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer';

/** The per-Pod bootstrap's pieces for PORTS (Envoy v3): one handoff listener per port, one cluster. */
export function proxyProtocolResources(ports: readonly number[]): { listeners: JsonObject[]; clusters: JsonObject[] } {
  if (ports.length === 0) return { listeners: [], clusters: [] };
  const listeners = ports.map((port) => ({
    name: proxyProtocolListener(port),
    ...everyAddress(port),
    bind_to_port: false,
    traffic_direction: 'INBOUND',
    filter_chains: [{ filters: [tcpProxyFilter(proxyProtocolListener(port), PROXY_PROTOCOL_CLUSTER)] }],
  }));
  const cluster = {
    name: PROXY_PROTOCOL_CLUSTER,
    type: 'ORIGINAL_DST',
    lb_policy: 'CLUSTER_PROVIDED',
    connect_timeout: '10s',
    transport_socket: {
      name: 'envoy.transport_sockets.upstream_proxy_protocol',
      typed_config: {
        '@type': UPSTREAM_PROXY_PROTOCOL,
        config: { version: 'V1' },
        transport_socket: { name: 'envoy.transport_sockets.raw_buffer', typed_config: { '@type': RAW_BUFFER } },
      },
    },
  };
  return { listeners, clusters: [cluster] };
}
