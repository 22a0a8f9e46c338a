"""Stand-ins for test/capture-rules.test.ts, run inside its network namespaces.

Node cannot read SO_ORIGINAL_DST (a getsockopt Node does not expose), Python can:

  capture-net.py [--uid N] server NAME PORT...   answers "NAME <local addr> <local port>"
  capture-net.py [--uid N] proxy PORT...         reads each connection's original destination,
                                                 connects there itself (as Envoy's pass-through
                                                 cluster does) and answers
                                                 "proxy <its port> original <addr> <port> | <reply>"
  capture-net.py [--uid N] client HOST PORT      prints the first line it is sent
  capture-net.py peers NAME PORT...              answers "NAME <local addr> <local port> from <peer addr>"
  capture-net.py tproxy PORT                     TPROXY's proxy (root: transparent sockets need
                                                 CAP_NET_ADMIN): each connection's local address is
                                                 its original destination; connects there from the
                                                 client's own address with the mark, as Envoy's
                                                 original_src does, and answers
                                                 "tproxy <its port> original <addr> <port> from <client> | <reply>"

Servers listen on 0.0.0.0 and :: of every PORT, print "ready" once listening, and run
until killed. --uid switches to that user first (the proxy runs as Envoy's uid).
"""

import encodings.idna  # noqa: F401 -- loaded before --uid: the new user may not read the interpreter's files
import os
import selectors
import socket
import struct
import sys

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h; IP6T_SO_ORIGINAL_DST has the same number
IP_TRANSPARENT = 19  # linux/in.h
IPV6_TRANSPARENT = 75  # linux/in6.h
SO_MARK = 36  # asm-generic/socket.h
TPROXY_MARK = 0x539  # init/capture-rules.sh's


def original_destination(conn):
    if conn.family == socket.AF_INET:
        raw = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        port, packed = struct.unpack_from("!2xH4s", raw)
        return socket.inet_ntop(socket.AF_INET, packed), port
    raw = conn.getsockopt(socket.IPPROTO_IPV6, SO_ORIGINAL_DST, 28)
    port, packed = struct.unpack_from("!2xH4x16s", raw)
    return socket.inet_ntop(socket.AF_INET6, packed), port


def transparent(sock):
    if sock.family == socket.AF_INET:
        sock.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)
    else:
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_TRANSPARENT, 1)


def listen_all(ports, is_transparent=False):
    sockets = []
    for port in ports:
        for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if is_transparent:
                transparent(sock)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address, port))
            sock.listen(64)
            sockets.append(sock)
    return sockets


def first_line(host, port, source=None):
    if source is None:
        conn = socket.create_connection((host, port), timeout=10)
    else:
        conn = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        transparent(conn)
        conn.setsockopt(socket.SOL_SOCKET, SO_MARK, TPROXY_MARK)
        conn.settimeout(10)
        conn.bind((source, 0))
        conn.connect((host, port))
    with conn:
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        return data.decode().strip()


def serve(sockets, answer):
    selector = selectors.DefaultSelector()
    for sock in sockets:
        selector.register(sock, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            conn, _ = key.fileobj.accept()
            with conn:
                conn.settimeout(10)
                try:
                    conn.sendall((answer(conn) + "\n").encode())
                except OSError as error:
                    conn.sendall(("error " + str(error) + "\n").encode())


def main(args):
    if args[:1] == ["--uid"]:
        uid = int(args[1])
        os.setgid(uid)
        os.setuid(uid)
        args = args[2:]
    mode = args[0]
    if mode == "server":
        name = args[1]
        serve(listen_all([int(p) for p in args[2:]]), lambda conn: "%s %s %d" % ((name,) + conn.getsockname()[:2]))
    elif mode == "proxy":
        def relay(conn):
            host, port = original_destination(conn)
            return "proxy %d original %s %d | %s" % (conn.getsockname()[1], host, port, first_line(host, port))
        serve(listen_all([int(p) for p in args[1:]]), relay)
    elif mode == "peers":
        name = args[1]
        serve(listen_all([int(p) for p in args[2:]]), lambda conn: "%s %s %d from %s" % ((name,) + conn.getsockname()[:2] + (conn.getpeername()[0],)))
    elif mode == "tproxy":
        port = int(args[1])

        def relay_transparent(conn):
            host, original = conn.getsockname()[:2]
            peer = conn.getpeername()[0]
            return "tproxy %d original %s %d from %s | %s" % (port, host, original, peer, first_line(host, original, peer))
        serve(listen_all([port], True), relay_transparent)
    elif mode == "client":
        print(first_line(args[1], int(args[2])), flush=True)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main(sys.argv[1:])
