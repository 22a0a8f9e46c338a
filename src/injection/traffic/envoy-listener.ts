import type { JsonObject } from '../basics/index.js';

/**
 * Envoy v3 pieces the per-Pod bootstrap's inbound listeners share (the
 * PROXY protocol's, proxy-protocol.ts; TPROXY's, interception.ts).
 */

const TCP_PROXY = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';

/** PORT on every IPv4 and every IPv6 address: a listener's `address` and `additional_addresses`. */
export function everyAddress(port: number): { address: JsonObject; additional_addresses: JsonObject[] } {
  return {
    address: { socket_address: { address: '0.0.0.0', port_value: port } },
    additional_addresses: [{ address: { socket_address: { address: '::', port_value: port } } }],
  };
}

/** A tcp_proxy network filter: every connection to CLUSTER, its statistics under STATPREFIX. */
export function tcpProxyFilter(statPrefix: string, cluster: string): JsonObject {
  return { name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP_PROXY, stat_prefix: statPrefix, cluster } };
}
