import type { CaptureSettings, LifecycleSettings } from '../../src/injection/index.js';

/**
 * The project's bootstrap check: an Envoy bootstrap (as the chart's default
 * template gives it inline) against the container that runs it and the
 * template's capture settings. Fields are checked against the Envoy v3 API
 * messages this chart uses (as of the pinned Envoy, v1.39: listener.proto,
 * cluster.proto, tcp_proxy.proto, original_dst.proto), so a misspelt field,
 * which Envoy would refuse at start, fails here; ports, listeners and
 * clusters must agree with each other, with the probe and with the rules.
 */

type Obj = Record<string, unknown>;
const isObj = (value: unknown): value is Obj => value !== null && typeof value === 'object' && !Array.isArray(value);
const list = (value: unknown): Obj[] => (Array.isArray(value) ? value.filter(isObj) : []);

const FIELDS: Readonly<Record<string, readonly string[]>> = {
  bootstrap: ['admin', 'static_resources'],
  admin: ['address'],
  static_resources: ['listeners', 'clusters'],
  listener: ['name', 'address', 'additional_addresses', 'traffic_direction', 'use_original_dst', 'bind_to_port', 'transparent', 'listener_filters', 'filter_chains'],
  additional_address: ['address'],
  address: ['socket_address'],
  socket_address: ['address', 'port_value', 'ipv4_compat'],
  filter_chain: ['filter_chain_match', 'filters'],
  filter_chain_match: ['destination_port'],
  filter: ['name', 'typed_config'],
  tcp_proxy: ['@type', 'stat_prefix', 'cluster'],
  cluster: ['name', 'type', 'lb_policy', 'connect_timeout', 'load_assignment', 'health_checks', 'transport_socket'],
  // The PROXY protocol's cluster (src/injection/traffic/proxy-protocol.ts): base.proto's TransportSocket, upstream_proxy_protocol.proto, proxy_protocol.proto.
  transport_socket: ['name', 'typed_config'],
  upstream_proxy_protocol: ['@type', 'config', 'transport_socket'],
  proxy_protocol_config: ['version'],
  raw_buffer: ['@type'],
  // The tcpSocket probes' bootstrap (src/injection/traffic/tcp-probes.ts): health_check.proto, the HealthCheck HTTP filter.
  health_check: ['timeout', 'interval', 'no_traffic_interval', 'unhealthy_threshold', 'healthy_threshold', 'tcp_health_check'],
  tcp_health_check: [],
  // TPROXY's transparent listener (src/injection/traffic/interception.ts): original_src.proto.
  original_src: ['@type', 'bind_port', 'mark'],
  health_check_filter: ['@type', 'pass_through_mode', 'headers', 'cluster_min_healthy_percentages'],
};

/** The extension names and the type URLs of their typed_config. */
const TYPE_URLS: Readonly<Record<string, string>> = {
  'envoy.filters.network.http_connection_manager': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
  'envoy.filters.network.tcp_proxy': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
  'envoy.filters.listener.original_dst': 'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst',
  'envoy.filters.listener.original_src': 'type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc',
  'envoy.filters.http.router': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
  'envoy.filters.http.health_check': 'type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck',
  'envoy.transport_sockets.upstream_proxy_protocol': 'type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport',
  'envoy.transport_sockets.raw_buffer': 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer',
};

/**
 * Envoy's merge of `--config-yaml` over the bootstrap of `--config-path`
 * (protobuf MergeFrom): repeated fields are concatenated, so the listeners
 * and clusters of both are served.
 */
export function mergeBootstraps(fromPath: Obj, fromYaml: Obj): Obj {
  const resources = (bootstrap: Obj): Obj => (isObj(bootstrap['static_resources']) ? bootstrap['static_resources'] : {});
  const [a, b] = [resources(fromPath), resources(fromYaml)];
  return {
    ...fromPath,
    ...fromYaml,
    static_resources: { listeners: [...list(a['listeners']), ...list(b['listeners'])], clusters: [...list(a['clusters']), ...list(b['clusters'])] },
  };
}

export interface BootstrapSubject {
  readonly bootstrap: Obj;
  /** The container that runs Envoy (its probe, ports and user). */
  readonly container: Obj;
  readonly capture: CaptureSettings | undefined;
  /** The template's proxyLifecycle: its hooks reach the admin port, its startupProbe the health listener. */
  readonly lifecycle?: LifecycleSettings | undefined;
}

export function bootstrapProblems({ bootstrap, container, capture, lifecycle }: BootstrapSubject): string[] {
  const problems: string[] = [];
  const fields = (what: string, value: unknown, path: string): void => {
    if (!isObj(value)) return void problems.push(`${path}: must be a mapping`);
    for (const key of Object.keys(value)) if (!(FIELDS[what] ?? []).includes(key)) problems.push(`${path}.${key}: not a field of ${what}`);
  };
  const portOf = (address: unknown, path: string): number | undefined => {
    fields('address', address, path);
    const socket = isObj(address) ? address['socket_address'] : undefined;
    fields('socket_address', socket, `${path}.socket_address`);
    const port = isObj(socket) ? socket['port_value'] : undefined;
    return typeof port === 'number' ? port : undefined;
  };

  fields('bootstrap', bootstrap, 'bootstrap');
  const adminPort = portOf((bootstrap['admin'] as Obj | undefined)?.['address'], 'admin.address');
  const resources = bootstrap['static_resources'];
  fields('static_resources', resources, 'static_resources');
  const listeners = list(isObj(resources) ? resources['listeners'] : undefined);
  const clusters = list(isObj(resources) ? resources['clusters'] : undefined);
  const clusterNames = clusters.map((cluster) => cluster['name']);
  const referenced = new Set<unknown>();
  const portsOf = new Map<string, number[]>();
  for (const [index, listener] of listeners.entries()) {
    const path = `listeners[${index}]`;
    fields('listener', listener, path);
    const ports = [portOf(listener['address'], `${path}.address`)];
    for (const [n, extra] of list(listener['additional_addresses']).entries()) {
      fields('additional_address', extra, `${path}.additional_addresses[${n}]`);
      ports.push(portOf(extra['address'], `${path}.additional_addresses[${n}].address`));
    }
    if (new Set(ports).size !== 1 || ports[0] === undefined) problems.push(`${path}: its addresses must share one port`);
    portsOf.set(String(listener['name']), ports.filter((port) => port !== undefined));
    for (const filter of list(listener['listener_filters'])) {
      checkTyped(filter, `${path}.listener_filters`, problems);
      if (filter['name'] === 'envoy.filters.listener.original_src') fields('original_src', filter['typed_config'], `${path}.listener_filters.original_src`);
    }
    for (const [n, chain] of list(listener['filter_chains']).entries()) {
      fields('filter_chain', chain, `${path}.filter_chains[${n}]`);
      if (chain['filter_chain_match'] !== undefined) fields('filter_chain_match', chain['filter_chain_match'], `${path}.filter_chains[${n}].filter_chain_match`);
      for (const filter of list(chain['filters'])) {
        fields('filter', filter, `${path}.filter_chains[${n}].filters`);
        checkTyped(filter, `${path}.filter_chains[${n}]`, problems);
        for (const cluster of clustersReferencedBy(filter, `${path}.filter_chains[${n}]`, fields)) referenced.add(cluster);
      }
    }
  }
  const allPorts = [...portsOf.values()].map((ports) => ports[0]);
  if (new Set([...allPorts, adminPort]).size !== allPorts.length + 1) problems.push(`listener and admin ports collide: ${[...allPorts, adminPort].join(', ')}`);
  for (const [index, cluster] of clusters.entries()) {
    fields('cluster', cluster, `clusters[${index}]`);
    for (const [n, check] of list(cluster['health_checks']).entries()) {
      fields('health_check', check, `clusters[${index}].health_checks[${n}]`);
      if (check['tcp_health_check'] !== undefined) fields('tcp_health_check', check['tcp_health_check'], `clusters[${index}].health_checks[${n}].tcp_health_check`);
    }
    if (cluster['transport_socket'] !== undefined) problems.push(...transportSocketProblems(cluster['transport_socket'], `clusters[${index}].transport_socket`, fields));
    if (cluster['type'] === 'ORIGINAL_DST' && (cluster['lb_policy'] !== 'CLUSTER_PROVIDED' || cluster['load_assignment'] !== undefined)) {
      problems.push(`clusters[${index}]: an ORIGINAL_DST cluster needs lb_policy CLUSTER_PROVIDED and no load_assignment`);
    }
    if (!referenced.has(cluster['name'])) problems.push(`clusters[${index}] "${String(cluster['name'])}": no listener uses it`);
  }
  for (const name of referenced) if (!clusterNames.includes(name)) problems.push(`cluster "${String(name)}" is used but not defined`);

  // The probe and the container's port are the health listener's.
  const health = portsOf.get('health')?.[0];
  const probe = ((container['readinessProbe'] as Obj | undefined)?.['httpGet'] as Obj | undefined)?.['port'];
  if (health === undefined || probe !== health) problems.push(`the readiness probe's port ${String(probe)} is not the health listener's ${String(health)}`);
  problems.push(...captureProblems(listeners, portsOf, adminPort, container, capture));
  problems.push(...tcpProbeProblems(listeners, clusters, capture, fields));
  problems.push(...proxyProtocolProblems(listeners, clusters, capture));
  problems.push(...tproxyProblems(listeners, clusters, container, capture));
  if (lifecycle !== undefined) problems.push(...lifecycleProblems(listeners, health, adminPort, container, lifecycle));
  return problems;
}

/** The hooks call the admin API, the startupProbe asks the health listener's ready path, the drain lasts what Envoy is told. */
function lifecycleProblems(listeners: Obj[], health: number | undefined, adminPort: number | undefined, container: Obj, lifecycle: LifecycleSettings): string[] {
  const problems: string[] = [];
  if (lifecycle.adminPort !== adminPort) problems.push(`proxyLifecycle.adminPort ${lifecycle.adminPort} is not the admin port ${String(adminPort)}`);
  if (lifecycle.readyPort !== health) problems.push(`proxyLifecycle.readyPort ${lifecycle.readyPort} is not the health listener's ${String(health)}`);
  const listener = listeners.find((candidate) => candidate['name'] === 'health');
  const manager = list(list(listener?.['filter_chains'])[0]?.['filters'])[0]?.['typed_config'] as Obj | undefined;
  const routes = list((manager?.['route_config'] as Obj | undefined)?.['virtual_hosts']).flatMap((host) => list(host['routes']));
  const ready = routes.find((route) => (route['match'] as Obj | undefined)?.['path'] === lifecycle.readyPath);
  if ((ready?.['route'] as Obj | undefined)?.['cluster'] !== 'admin') problems.push(`the health listener does not route ${lifecycle.readyPath} to the admin cluster`);
  const args = Array.isArray(container['args']) ? container['args'].map(String) : [];
  const drain = args[args.indexOf('--drain-time-s') + 1];
  if (drain !== String(lifecycle.drainSeconds)) problems.push(`--drain-time-s ${String(drain)} is not proxyLifecycle.drainSeconds ${lifecycle.drainSeconds}`);
  return problems;
}

function checkTyped(filter: Obj, path: string, problems: string[]): void {
  const name = String(filter['name']);
  const typed = filter['typed_config'];
  const expected = TYPE_URLS[name];
  if (expected === undefined) problems.push(`${path}: unknown extension ${name}`);
  else if (!isObj(typed) || typed['@type'] !== expected) problems.push(`${path}: ${name} needs typed_config @type ${expected}`);
}

function clustersReferencedBy(filter: Obj, path: string, fields: (what: string, value: unknown, path: string) => void): unknown[] {
  const typed = filter['typed_config'];
  if (!isObj(typed)) return [];
  if (filter['name'] === 'envoy.filters.network.tcp_proxy') {
    fields('tcp_proxy', typed, `${path}.tcp_proxy`);
    return [typed['cluster']];
  }
  const checks = list(typed['http_filters']).filter((http) => http['name'] === 'envoy.filters.http.health_check').map((http) => http['typed_config']);
  const checked = checks.flatMap((check) => (isObj(check) && isObj(check['cluster_min_healthy_percentages']) ? Object.keys(check['cluster_min_healthy_percentages']) : []));
  const hosts = list((typed['route_config'] as Obj | undefined)?.['virtual_hosts']);
  return [...checked, ...hosts.flatMap((host) => list(host['routes']).map((route) => (route['route'] as Obj | undefined)?.['cluster']))].filter((cluster) => cluster !== undefined);
}

/** With capture: the rules' ports are the listeners', the proxy's ports are excluded, the rules spare the proxy's user. */
function captureProblems(listeners: Obj[], portsOf: Map<string, number[]>, adminPort: number | undefined, container: Obj, capture: CaptureSettings | undefined): string[] {
  const problems: string[] = [];
  // Inbound hands connections off by original destination (the PROXY protocol's listeners take them); outbound must not.
  const outbound = listeners.find((listener) => listener['transparent'] !== true && list(listener['listener_filters']).some((filter) => filter['name'] === 'envoy.filters.listener.original_dst'));
  const inbound = listeners.find((listener) => listener['use_original_dst'] === true);
  if (outbound?.['use_original_dst'] === true) problems.push("the outbound listener must not hand off (use_original_dst): the app's own connections to a PROXY protocol port elsewhere would get the header");
  if (capture === undefined) {
    if (outbound !== undefined || inbound !== undefined) problems.push('capture listeners without capture settings');
    return problems;
  }
  const port = (listener: Obj | undefined): number | undefined => (listener === undefined ? undefined : portsOf.get(String(listener['name']))?.[0]);
  if (port(outbound) !== capture.outboundPort) problems.push(`capture.outboundPort ${capture.outboundPort} is not the original_dst listener's port ${String(port(outbound))}`);
  if (port(inbound) !== capture.inboundPort) problems.push(`capture.inboundPort ${capture.inboundPort} is not the use_original_dst listener's port ${String(port(inbound))}`);
  if (!capture.inboundHandoff) problems.push('capture.inboundHandoff must be true: the inbound listener hands off by original destination');
  for (const listener of [outbound, inbound]) {
    if (listener === undefined) continue;
    const chains = list(listener['filter_chains']);
    const guard = chains.find((chain) => (chain['filter_chain_match'] as Obj | undefined)?.['destination_port'] === port(listener));
    if (guard === undefined) problems.push(`listener ${String(listener['name'])}: a connection to its own port must not be proxied back to it`);
  }
  // An inbound listener that speaks HTTP gives the app the client's address in X-Forwarded-For only with use_remote_address (docs/capture.md).
  const inboundManager = list(list(inbound?.['filter_chains']).at(-1)?.['filters']).find((filter) => filter['name'] === 'envoy.filters.network.http_connection_manager');
  if (inboundManager !== undefined && (inboundManager['typed_config'] as Obj | undefined)?.['use_remote_address'] !== true) {
    problems.push("the inbound listener speaks HTTP without use_remote_address: the app would not get the client's address in X-Forwarded-For");
  }
  // The listeners that bind nothing (the PROXY protocol's, on the app's ports) are not the proxy's own, nor is TPROXY's (tproxyProblems).
  const unbound = new Set(listeners.filter((listener) => listener['bind_to_port'] === false || listener['transparent'] === true).map((listener) => String(listener['name'])));
  const proxyOwn = [adminPort, ...[...portsOf.entries()].filter(([name]) => name !== String(outbound?.['name']) && name !== String(inbound?.['name']) && !unbound.has(name)).map(([, ports]) => ports[0])];
  for (const own of proxyOwn) if (own !== undefined && !capture.proxyPorts.includes(own)) problems.push(`capture.proxyPorts lacks the proxy's port ${own}`);
  const context = (container['securityContext'] ?? {}) as Obj;
  // TPROXY's proxy runs as root in the proxy's uid as its group (tproxyProblems); the rules let it out by either.
  const transparent = listeners.some((listener) => listener['transparent'] === true);
  const [what, id] = transparent ? ['runAsGroup', context['runAsGroup']] : ['runAsUser', context['runAsUser']];
  if (id !== capture.proxyUid) problems.push(`capture.proxyUid ${capture.proxyUid} is not the proxy container's ${what} ${String(id)}`);
  return problems;
}

/**
 * TPROXY's transparent listener, as the node tier's stand-in emulates it: on
 * capture.tproxyPort (IPv4 and IPv6), original_dst then original_src with the
 * rules' mark 1337 (0x539), a guard chain for its own port, then one TCP
 * proxy to an ORIGINAL_DST cluster; and a proxy that can open transparent
 * sockets: root with NET_ADMIN added, and nothing else (issue 50).
 */
function tproxyProblems(listeners: Obj[], clusters: Obj[], container: Obj, capture: CaptureSettings | undefined): string[] {
  const problems: string[] = [];
  for (const listener of listeners.filter((candidate) => candidate['transparent'] === true)) {
    const name = String(listener['name']);
    const port = ((listener['address'] as Obj | undefined)?.['socket_address'] as Obj | undefined)?.['port_value'];
    if (capture?.tproxyPort === undefined || port !== capture.tproxyPort) problems.push(`listener ${name}: port ${String(port)} is not capture.tproxyPort ${String(capture?.tproxyPort)}`);
    const filters = list(listener['listener_filters']);
    const names = filters.map((filter) => filter['name']);
    if (names.join() !== 'envoy.filters.listener.original_dst,envoy.filters.listener.original_src') problems.push(`listener ${name}: needs the listener filters original_dst then original_src, not ${names.join(', ')}`);
    const mark = (filters[1]?.['typed_config'] as Obj | undefined)?.['mark'];
    if (mark !== 1337) problems.push(`listener ${name}: original_src's mark ${String(mark)} is not the rules' 0x539 (1337)`);
    const chains = list(listener['filter_chains']);
    if ((chains[0]?.['filter_chain_match'] as Obj | undefined)?.['destination_port'] !== port) problems.push(`listener ${name}: a connection to its own port must not be proxied back to it`);
    const last = list(chains.at(-1)?.['filters'])[0];
    const cluster = clusters.find((candidate) => candidate['name'] === (last?.['typed_config'] as Obj | undefined)?.['cluster']);
    if (last?.['name'] !== 'envoy.filters.network.tcp_proxy' || cluster?.['type'] !== 'ORIGINAL_DST') problems.push(`listener ${name}: its last chain must be one TCP proxy to an ORIGINAL_DST cluster`);
    const context = (container['securityContext'] ?? {}) as Obj;
    const added = ((context['capabilities'] as Obj | undefined)?.['add'] ?? []) as unknown[];
    if (context['runAsUser'] !== 0 || !added.includes('NET_ADMIN')) problems.push(`listener ${name}: a transparent socket needs the proxy to run as root with NET_ADMIN (capabilities lost at exec otherwise)`);
    const dropped = ((context['capabilities'] as Obj | undefined)?.['drop'] ?? []) as unknown[];
    if (added.some((capability) => capability !== 'NET_ADMIN') || !dropped.includes('ALL') || context['allowPrivilegeEscalation'] !== false || context['privileged'] === true) {
      problems.push(`listener ${name}: the proxy runs as root, so it must drop ALL, add NET_ADMIN only, and allow no privilege escalation`);
    }
  }
  return problems;
}

/**
 * The tcpSocket probes' listener, as the node tier's stand-in emulates it
 * (test/node/images/envoy-stand-in.py): on capture.tcpProbes.port, one
 * health_check filter per app port, not pass-through, matching the exact
 * path /tcp/<port>, answering from a cluster of 127.0.0.1:<port> alone that
 * is checked by a bare TCP connect (no send, no receive), with a
 * no_traffic_interval (the clusters take no traffic: Envoy would check them
 * every 60 s), then the router. Nothing without such a listener.
 */
function tcpProbeProblems(listeners: Obj[], clusters: Obj[], capture: CaptureSettings | undefined, fields: (what: string, value: unknown, path: string) => void): string[] {
  const listener = listeners.find((candidate) => candidate['name'] === 'tcp_probes');
  if (listener === undefined) return [];
  const problems: string[] = [];
  const port = ((listener['address'] as Obj | undefined)?.['socket_address'] as Obj | undefined)?.['port_value'];
  if (capture?.tcpProbes === undefined || port !== capture.tcpProbes.port) problems.push(`the tcp_probes listener's port ${String(port)} is not capture.tcpProbes.port ${String(capture?.tcpProbes?.port)}`);
  const manager = list(list(listener['filter_chains'])[0]?.['filters'])[0]?.['typed_config'] as Obj | undefined;
  const filters = list(manager?.['http_filters']);
  if (filters.at(-1)?.['name'] !== 'envoy.filters.http.router') problems.push('the tcp_probes listener\'s last HTTP filter must be the router');
  for (const [index, filter] of filters.entries()) {
    checkTyped(filter, `tcp_probes.http_filters[${index}]`, problems);
    if (filter['name'] !== 'envoy.filters.http.health_check') continue;
    const path = `tcp_probes.http_filters[${index}]`;
    const typed = (filter['typed_config'] ?? {}) as Obj;
    fields('health_check_filter', typed, path);
    if (typed['pass_through_mode'] !== false) problems.push(`${path}: pass_through_mode must be false (the filter answers)`);
    const headers = list(typed['headers']);
    const exact = ((headers[0]?.['string_match'] as Obj | undefined)?.['exact']);
    const match = typeof exact === 'string' ? /^\/tcp\/(\d+)$/.exec(exact) : null;
    if (headers.length !== 1 || headers[0]?.['name'] !== ':path' || match === null) {
      problems.push(`${path}: must match the exact :path /tcp/<port> alone`);
      continue;
    }
    const appPort = Number(match[1]);
    const minimum = isObj(typed['cluster_min_healthy_percentages']) ? typed['cluster_min_healthy_percentages'] : {};
    const names = Object.keys(minimum);
    const cluster = clusters.find((candidate) => candidate['name'] === names[0]);
    if (names.length !== 1 || cluster === undefined || (minimum[names[0] ?? ''] as Obj | undefined)?.['value'] !== 100) {
      problems.push(`${path}: must ask 100% of one defined cluster to be healthy`);
      continue;
    }
    const endpoints = list((cluster['load_assignment'] as Obj | undefined)?.['endpoints']).flatMap((group) => list(group['lb_endpoints']));
    const address = (((endpoints[0]?.['endpoint'] as Obj | undefined)?.['address'] as Obj | undefined)?.['socket_address'] ?? {}) as Obj;
    if (cluster['type'] !== 'STATIC' || endpoints.length !== 1 || address['address'] !== '127.0.0.1' || address['port_value'] !== appPort) {
      problems.push(`cluster ${String(cluster['name'])}: must be STATIC with the one endpoint 127.0.0.1:${appPort}`);
    }
    const checks = list(cluster['health_checks']);
    const check = checks[0];
    if (checks.length !== 1 || check === undefined || !isObj(check['tcp_health_check']) || Object.keys(check['tcp_health_check']).length > 0) {
      problems.push(`cluster ${String(cluster['name'])}: needs one connect-only tcp_health_check`);
    } else {
      for (const field of ['timeout', 'interval', 'no_traffic_interval', 'unhealthy_threshold', 'healthy_threshold']) {
        if (check[field] === undefined) problems.push(`cluster ${String(cluster['name'])}: its health check needs ${field}`);
      }
    }
  }
  return problems;
}

/** A cluster's transport socket: the PROXY protocol (v1 or v2) over the raw buffer socket, or the raw buffer socket itself. */
function transportSocketProblems(socket: unknown, path: string, fields: (what: string, value: unknown, path: string) => void): string[] {
  const problems: string[] = [];
  fields('transport_socket', socket, path);
  if (!isObj(socket)) return problems;
  checkTyped(socket, path, problems);
  const typed = socket['typed_config'];
  if (!isObj(typed)) return problems;
  if (socket['name'] === 'envoy.transport_sockets.raw_buffer') {
    fields('raw_buffer', typed, `${path}.typed_config`);
    return problems;
  }
  fields('upstream_proxy_protocol', typed, `${path}.typed_config`);
  fields('proxy_protocol_config', typed['config'] ?? {}, `${path}.typed_config.config`);
  const version = isObj(typed['config']) ? typed['config']['version'] : undefined;
  if (version !== undefined && version !== 'V1' && version !== 'V2') problems.push(`${path}.typed_config.config.version: ${String(version)} is not V1 or V2`);
  if (typed['transport_socket'] === undefined) problems.push(`${path}.typed_config.transport_socket: required (the socket it wraps)`);
  else problems.push(...transportSocketProblems(typed['transport_socket'], `${path}.typed_config.transport_socket`, fields));
  return problems;
}

/**
 * The PROXY protocol's listeners, as the node tier's stand-in emulates them:
 * each binds nothing (bind_to_port false: the app owns the port) on a port the
 * rules send to the inbound listener, which hands off by original destination
 * (use_original_dst), and is one TCP proxy to an ORIGINAL_DST cluster whose
 * transport socket is the upstream PROXY protocol.
 */
function proxyProtocolProblems(listeners: Obj[], clusters: Obj[], capture: CaptureSettings | undefined): string[] {
  const problems: string[] = [];
  for (const listener of listeners.filter((candidate) => candidate['bind_to_port'] === false)) {
    const name = String(listener['name']);
    const port = ((listener['address'] as Obj | undefined)?.['socket_address'] as Obj | undefined)?.['port_value'];
    if (capture === undefined || !capture.inboundHandoff) problems.push(`listener ${name}: nothing hands connections off to it (capture.inboundHandoff)`);
    else if (typeof port !== 'number' || capture.proxyPorts.includes(port) || port === capture.inboundPort || port === capture.outboundPort) problems.push(`listener ${name}: port ${String(port)} is not one the rules send to the inbound listener`);
    if (listener['use_original_dst'] !== undefined || listener['listener_filters'] !== undefined) problems.push(`listener ${name}: a listener that takes handoffs needs no original destination of its own`);
    const chains = list(listener['filter_chains']);
    const filters = list(chains[0]?.['filters']);
    const typed = filters[0]?.['typed_config'] as Obj | undefined;
    const cluster = clusters.find((candidate) => candidate['name'] === typed?.['cluster']);
    const socket = cluster?.['transport_socket'] as Obj | undefined;
    if (chains.length !== 1 || filters.length !== 1 || filters[0]?.['name'] !== 'envoy.filters.network.tcp_proxy' || cluster?.['type'] !== 'ORIGINAL_DST' || socket?.['name'] !== 'envoy.transport_sockets.upstream_proxy_protocol') {
      problems.push(`listener ${name}: must be one TCP proxy to an ORIGINAL_DST cluster with the upstream_proxy_protocol transport socket`);
    }
  }
  return problems;
}
