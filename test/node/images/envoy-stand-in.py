"""A stand-in for Envoy, installed as /usr/local/bin/envoy in an image tagged as the
chart's Envoy image, so that the chart's default template runs unchanged on the node
tier's kubelet. CONTRIBUTING.md ("The node tier") lists what of Envoy it reproduces and
what it cannot.

It takes Envoy's command line (unknown flags: "PARSE ERROR", exit 1, as Envoy), reads
the bootstrap it is given (--config-path, then --config-yaml merged over it as Envoy's
MergeFrom does: listeners and clusters concatenated) and serves from it:
  - the admin API on the bootstrap's admin address: GET /ready (503 until the delay the
    recorder's /config gives, then 200 LIVE), POST /drain_listeners[?graceful], POST
    /healthcheck/fail, POST /quitquitquit; HTTP/1.0 gets 426 as from Envoy;
  - each listener with an http_connection_manager: its envoy.filters.http.health_check
    filters first (not pass-through: a request whose :path is the filter's exact header
    is answered 200 when each cluster of cluster_min_healthy_percentages has that share
    of healthy hosts, else 503), then its routes (a route to the cluster whose endpoint
    is the admin address is answered by the admin API, a direct_response with its
    status);
  - each cluster with health_checks: a connect-only tcp_health_check of its endpoints,
    every no_traffic_interval (no cluster here takes traffic; Envoy's default 60 s when
    unset), a host unhealthy until unhealthy_threshold/healthy_threshold say otherwise
    (both default to 1 here), starting unhealthy as Envoy's do before their first check;
  - each listener with a tcp_proxy: the filter chain matching the destination port (the
    original destination's with use_original_dst or the original_dst listener filter);
    an ORIGINAL_DST cluster connects to the connection's SO_ORIGINAL_DST and relays
    bytes both ways, a cluster without endpoints closes the connection;
  - use_original_dst's handoff: a listener with bind_to_port false binds nothing and takes
    the connections whose original destination is its address (exactly, else 0.0.0.0 or
    :: with that port); its cluster's upstream_proxy_protocol transport socket (V1 only)
    sends "PROXY TCP4|TCP6 <client> <original destination> <ports>" first;
  - a transparent listener (TPROXY): its sockets IP_TRANSPARENT, the original destination
    its connection's local address; with the envoy.filters.listener.original_src filter the
    upstream socket is IP_TRANSPARENT, bound to the client's address (port 0 unless
    bind_port) and marked (SO_MARK) with the filter's mark, as Envoy's original_src does.
    Both need NET_ADMIN: without it the listener fails to bind, as Envoy's does.
Draining (POST /drain_listeners?graceful): the listeners keep accepting for
--drain-time-s, then close; the admin API stays. SIGTERM: exit 0 at once, as Envoy.
Every request to the admin API and every relayed connection is recorded (record.py).
"""

import socket
import struct
import sys
import threading
import time
import signal
import traceback

import yaml

from record import config, exit_now, record

SO_ORIGINAL_DST = 80
# Linux's numbers, which Python's socket module does not all name.
IP_TRANSPARENT = 19
IPV6_TRANSPARENT = 75
SO_MARK = 36
LOG_LEVELS = {"trace", "debug", "info", "warning", "warn", "error", "critical", "off"}
VALUED = {"--config-yaml", "-c", "--config-path", "--concurrency", "-l", "--log-level", "--drain-time-s",
          "--drain-strategy", "--parent-shutdown-time-s", "--service-cluster", "--service-node",
          "--service-zone", "--base-id", "--component-log-level", "--log-format", "--mode"}
FLAGS = {"--disable-hot-restart", "--allow-unknown-static-fields", "--reject-unknown-dynamic-fields",
         "--ignore-unknown-dynamic-fields", "--log-format-escaped", "--enable-fine-grain-logging"}


def parse_args(argv):
    options = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if name in VALUED:
            if eq:
                options[name] = inline
            elif i + 1 < len(argv):
                options[name] = argv[i + 1]
                i += 1
            else:
                fail("Missing a value for the argument: %s" % name)
        elif arg in FLAGS:
            options[arg] = True
        else:
            fail("Argument: %s" % arg)
        i += 1
    level = options.get("--log-level", options.get("-l", "info"))
    if level not in LOG_LEVELS:
        fail("Value '%s' does not meet constraint: %s" % (level, "|".join(sorted(LOG_LEVELS))))
    if options.get("--drain-strategy", "gradual") not in ("gradual", "immediate"):
        fail("unknown drain strategy %s" % options["--drain-strategy"])
    return options


def fail(message):
    print("PARSE ERROR: %s" % message, file=sys.stderr, flush=True)
    sys.exit(1)


def socket_address(address):
    inner = (address or {}).get("socket_address", {})
    return inner.get("address", "0.0.0.0"), int(inner.get("port_value", 0)), bool(inner.get("ipv4_compat", False))


def guarded(handler, conn, peer):
    """Runs a connection's handler; a failure of the stand-in itself is recorded, never silent."""
    try:
        handler(conn, peer)
    except Exception:  # noqa: BLE001 -- recorded whole for the test's error message
        record("stand-in", "error", traceback=traceback.format_exc())
        conn.close()


def plain(address):
    """An IPv4 address as itself, not as the IPv4-mapped IPv6 address a dual-stack socket reports."""
    return address[7:] if address.startswith("::ffff:") else address


def merge(base, over):
    """Envoy's merge of --config-yaml over the --config-path bootstrap, for the fields the stand-in reads."""
    merged = dict(base)
    merged.update({key: value for key, value in over.items() if key != "static_resources"})
    resources = {}
    for key in ("listeners", "clusters"):
        resources[key] = base.get("static_resources", {}).get(key, []) + over.get("static_resources", {}).get(key, [])
    merged["static_resources"] = resources
    return merged


def proxy_protocol_header(cluster, source, source_port, destination, destination_port):
    """The PROXY protocol v1 line a cluster's upstream_proxy_protocol transport socket sends first; None without one."""
    socket_config = cluster.get("transport_socket") or {}
    if socket_config.get("name") != "envoy.transport_sockets.upstream_proxy_protocol":
        return None
    version = socket_config.get("typed_config", {}).get("config", {}).get("version", "V1")
    if version != "V1":
        raise ValueError("the stand-in sends PROXY protocol V1 only, not " + str(version))
    family = "TCP6" if ":" in source else "TCP4"
    return ("PROXY %s %s %s %d %d\r\n" % (family, source, destination, source_port, destination_port)).encode()


def seconds(duration):
    """A protobuf Duration as YAML gives it ("1s", "0.5s")."""
    return float(str(duration).rstrip("s"))


def set_transparent(sock):
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_TRANSPARENT, 1)
    else:
        sock.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)


def connect_from(destination, peer, source):
    """Envoy's original_src: the upstream connection leaves from the client's own address, marked."""
    family = socket.AF_INET6 if ":" in destination[0] else socket.AF_INET
    upstream = socket.socket(family, socket.SOCK_STREAM)
    try:
        set_transparent(upstream)
        mark = int(source.get("mark", 0))
        if mark:
            upstream.setsockopt(socket.SOL_SOCKET, SO_MARK, mark)
        upstream.bind((peer[0], peer[1] if source.get("bind_port", False) else 0))
        upstream.settimeout(10)
        upstream.connect(destination[:2])
        return upstream
    except OSError:
        upstream.close()
        raise


def original_destination(conn):
    if conn.family == socket.AF_INET:
        port, packed = struct.unpack_from("!2xH4s", conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16))
        return socket.inet_ntop(socket.AF_INET, packed), port
    port, packed = struct.unpack_from("!2xH4x16s", conn.getsockopt(socket.IPPROTO_IPV6, SO_ORIGINAL_DST, 28))
    return socket.inet_ntop(socket.AF_INET6, packed), port


class Proxy:
    def __init__(self, options):
        text = options.get("--config-yaml")
        path = options.get("--config-path", options.get("-c"))
        if text is None and path is None:
            fail("At least one of --config-path or --config-yaml or Options::configProto() should be non-empty")
        self.bootstrap = {}
        if path is not None:
            with open(path) as f:
                self.bootstrap = yaml.safe_load(f.read()) or {}
        if text is not None:
            self.bootstrap = merge(self.bootstrap, yaml.safe_load(text) or {})
        self.drain_seconds = float(options.get("--drain-time-s", 600))
        self.started = time.time()
        self.ready_delay = float(config().get("readyDelaySeconds", 0))
        self.draining_since = None
        self.health_failed = False
        self.listening = []
        resources = self.bootstrap.get("static_resources", {})
        self.clusters = {cluster["name"]: cluster for cluster in resources.get("clusters", [])}
        self.admin = socket_address(self.bootstrap.get("admin", {}).get("address"))
        self.listeners = resources.get("listeners", [])
        self.healthy = {}
        # use_original_dst's handoff: the listeners that bind nothing, by each of their addresses.
        self.handoff = {}
        for listener in self.listeners:
            if listener.get("bind_to_port", True) is False:
                for address in self.addresses_of(listener):
                    host, port, _ = socket_address(address)
                    self.handoff[(host, port)] = listener

    # ---- listening -------------------------------------------------------------

    def bind(self, host, port, ipv4_compat, transparent=False):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if transparent:
            set_transparent(sock)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if ipv4_compat else 1)
        sock.bind((host, port))
        sock.listen(128)
        return sock

    def serve(self, sock, handler, drains):
        if drains:
            self.listening.append(sock)

        def loop():
            while True:
                try:
                    conn, peer = sock.accept()
                except OSError:
                    return
                threading.Thread(target=guarded, args=(handler, conn, peer), daemon=True).start()
        threading.Thread(target=loop, daemon=True).start()

    def start(self):
        host, port, compat = self.admin
        self.serve(self.bind(host, port, compat), lambda conn, peer: self.http(conn, peer, self.admin_api, "admin"), False)
        for listener in self.listeners:
            if listener.get("bind_to_port", True) is False:
                continue
            handler = self.handler_of(listener)
            for address in self.addresses_of(listener):
                self.serve(self.bind(*socket_address(address), transparent=bool(listener.get("transparent", False))), handler, True)
        for cluster in self.clusters.values():
            for check in cluster.get("health_checks", [])[:1]:
                threading.Thread(target=self.health_check, args=(cluster, check), daemon=True).start()
        record("stand-in", "started", listeners=[listener.get("name") for listener in self.listeners],
               drainSeconds=self.drain_seconds, readyDelaySeconds=self.ready_delay)

    @staticmethod
    def addresses_of(listener):
        return [listener.get("address")] + [extra.get("address") for extra in listener.get("additional_addresses", [])]

    def handler_of(self, listener):
        chains = listener.get("filter_chains", [])
        first = chains[0]["filters"][0] if chains and chains[0].get("filters") else {}
        if first.get("name") == "envoy.filters.network.http_connection_manager":
            routes = first["typed_config"]["route_config"]["virtual_hosts"][0]["routes"]
            checks = [f["typed_config"] for f in first["typed_config"].get("http_filters", [])
                      if f.get("name") == "envoy.filters.http.health_check"]
            return lambda conn, peer: self.http(
                conn, peer, lambda method, path: self.check(checks, path) or self.route(routes, method, path), listener.get("name"))
        handoff = listener.get("use_original_dst", False)
        filters = {f.get("name"): f.get("typed_config", {}) for f in listener.get("listener_filters", [])}
        # A transparent socket's local address is the original destination already (TPROXY keeps it).
        original = (handoff or "envoy.filters.listener.original_dst" in filters) and not listener.get("transparent", False)
        source = filters.get("envoy.filters.listener.original_src")
        return lambda conn, peer: self.relay(listener.get("name"), chains, original, handoff, conn, peer, source)

    # ---- HTTP: the admin API and the http_connection_manager listeners ----------

    def http(self, conn, peer, answer, listener):
        with conn:
            conn.settimeout(5)
            try:
                head = b""
                while b"\r\n\r\n" not in head and b"\n\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                method, target, version = head.split(b"\r\n")[0].decode().split(" ")
                if version != "HTTP/1.1":
                    status, body = 426, "Upgrade Required"
                else:
                    status, body = answer(method, target)
                reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 426: "Upgrade Required", 503: "Service Unavailable"}.get(status, "Status")
                payload = body.encode()
                conn.sendall(b"HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                             % (status, reason.encode(), len(payload), payload))
                record("stand-in", "http", listener=listener, method=method, path=target, status=status, peer=plain(peer[0]))
            except (OSError, ValueError):
                return

    def ready(self):
        if self.health_failed:
            return 503, "DRAINING\n"
        if time.time() - self.started < self.ready_delay:
            return 503, "PRE_INITIALIZING\n"
        return 200, "LIVE\n"

    def admin_api(self, method, target):
        path, _, query = target.partition("?")
        if path == "/ready":
            return self.ready()
        if path in ("/drain_listeners", "/healthcheck/fail", "/quitquitquit"):
            if method != "POST":
                return 405, "Method Not Allowed: POST required\n"
            if path == "/drain_listeners":
                self.drain("graceful" in query.split("&"))
            elif path == "/healthcheck/fail":
                self.health_failed = True
            else:
                threading.Timer(0.1, lambda: self.exit("quitquitquit")).start()
            return 200, "OK\n"
        return 404, "invalid path. admin commands are:\n  /ready\n  /drain_listeners\n  /healthcheck/fail\n  /quitquitquit\n"

    def route(self, routes, method, target):
        path = target.partition("?")[0]
        for route in routes:
            match = route.get("match", {})
            if "path" in match and match["path"] != path:
                continue
            if "prefix" in match and not path.startswith(match["prefix"]):
                continue
            methods = [h["string_match"]["exact"] for h in match.get("headers", []) if h.get("name") == ":method"]
            if methods and method not in methods:
                continue
            if "direct_response" in route:
                return int(route["direct_response"]["status"]), ""
            if self.is_admin_cluster(route.get("route", {}).get("cluster")):
                return self.admin_api(method, target)
            return 503, "no healthy upstream"
        return 404, ""

    def check(self, checks, target):
        """The health_check filters: the first whose exact :path matches answers; None lets the request on."""
        path = target.partition("?")[0]
        for check in checks:
            paths = [h.get("string_match", {}).get("exact") for h in check.get("headers", []) if h.get("name") == ":path"]
            if check.get("pass_through_mode", True) or path not in paths:
                continue
            if self.health_failed:
                return 503, ""
            for name, minimum in check.get("cluster_min_healthy_percentages", {}).items():
                hosts = self.healthy.get(name, {})
                share = 100.0 * sum(1 for up in hosts.values() if up) / len(hosts) if hosts else 0.0
                if share < float(minimum.get("value", 0)):
                    return 503, ""
            return 200, ""
        return None

    def health_check(self, cluster, check):
        """Envoy's active health checking of a cluster that takes no traffic: a connect-only TCP check."""
        name = cluster["name"]
        hosts = [socket_address(endpoint["endpoint"]["address"])[:2]
                 for group in cluster.get("load_assignment", {}).get("endpoints", [])
                 for endpoint in group.get("lb_endpoints", [])]
        state = {host: False for host in hosts}
        streak = {host: 0 for host in hosts}
        self.healthy[name] = dict(state)
        if "tcp_health_check" not in check or check["tcp_health_check"]:
            record("stand-in", "error", traceback="cluster %s: only a connect-only tcp_health_check is emulated" % name)
            return
        timeout = seconds(check.get("timeout", "1s"))
        interval = seconds(check.get("no_traffic_interval", "60s"))
        thresholds = {True: int(check.get("healthy_threshold", 1)), False: int(check.get("unhealthy_threshold", 1))}
        while True:
            for host in hosts:
                try:
                    socket.create_connection(host, timeout=timeout).close()
                    up = True
                except OSError:
                    up = False
                streak[host] = streak[host] + 1 if up != state[host] else 0
                if up != state[host] and streak[host] >= thresholds[up]:
                    state[host], streak[host] = up, 0
                    record("stand-in", "health", cluster=name, host="%s:%d" % host, healthy=up)
            self.healthy[name] = dict(state)
            time.sleep(interval)

    def is_admin_cluster(self, name):
        cluster = self.clusters.get(name, {})
        for group in cluster.get("load_assignment", {}).get("endpoints", []):
            for endpoint in group.get("lb_endpoints", []):
                host, port, _ = socket_address(endpoint["endpoint"]["address"])
                if (host, port) == self.admin[:2]:
                    return True
        return False

    # ---- TCP: tcp_proxy listeners ---------------------------------------------

    def relay(self, listener, chains, original, handoff, conn, peer, source=None):
        local = conn.getsockname()
        destination = original_destination(conn) if original else (local[0], local[1])
        if handoff:
            wildcard = "::" if ":" in plain(destination[0]) else "0.0.0.0"
            taker = self.handoff.get((plain(destination[0]), destination[1])) or self.handoff.get((wildcard, destination[1]))
            if taker is not None:
                listener, chains = taker.get("name"), taker.get("filter_chains", [])
        chain = next((c for c in chains if c.get("filter_chain_match", {}).get("destination_port") == destination[1]), None)
        if chain is None:
            chain = next((c for c in chains if "destination_port" not in c.get("filter_chain_match", {})), None)
        cluster = self.clusters.get(chain["filters"][0]["typed_config"]["cluster"], {}) if chain else {}
        fields = dict(listener=listener, port=local[1], peer=plain(peer[0]), original=[plain(destination[0]), destination[1]],
                      draining=self.draining_since is not None)
        if cluster.get("type") != "ORIGINAL_DST":
            record("stand-in", "closed", cluster=cluster.get("name"), **fields)
            conn.close()
            return
        if source is not None:
            fields["upstreamSource"] = [plain(peer[0]), peer[1] if source.get("bind_port", False) else 0]
            fields["mark"] = int(source.get("mark", 0))
        try:
            upstream = connect_from(destination, peer, source) if source is not None else socket.create_connection(destination, timeout=10)
        except OSError as error:
            record("stand-in", "upstream-failed", error=str(error), **fields)
            conn.close()
            return
        header = proxy_protocol_header(cluster, plain(peer[0]), peer[1], plain(destination[0]), destination[1])
        if header is not None:
            fields["proxyProtocol"] = header.decode().strip()
            upstream.sendall(header)
        record("stand-in", "relayed", **fields)
        upstream.settimeout(None)
        conn.settimeout(None)

        def pump(source, sink):
            try:
                while True:
                    data = source.recv(65536)
                    if not data:
                        break
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    sink.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
        back.start()
        pump(conn, upstream)
        back.join()
        conn.close()
        upstream.close()

    # ---- the proxy's life ------------------------------------------------------

    def drain(self, graceful):
        if self.draining_since is not None:
            return
        self.draining_since = time.time()
        record("stand-in", "drain", graceful=graceful, drainSeconds=self.drain_seconds)
        threading.Timer(self.drain_seconds if graceful else 0, self.close_listeners).start()

    def close_listeners(self):
        for sock in self.listening:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        record("stand-in", "listeners-closed")

    def exit(self, why):
        record("stand-in", "exit", why=why, draining=self.draining_since is not None)
        exit_now(0)


def main():
    options = parse_args(sys.argv[1:])
    proxy = Proxy(options)
    signal.signal(signal.SIGTERM, lambda *_: proxy.exit("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: proxy.exit("SIGINT"))
    proxy.start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
