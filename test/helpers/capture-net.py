"""Stand-ins for test/capture-rules.test.ts, run inside its network namespaces.

Node cannot read SO_ORIGINAL_DST (a getsockopt Node does not expose), Python can:

  capture-net.py [--uid N] server NAME PORT...   answers "NAME <local addr> <local port>"
  capture-net.py [--uid N] proxy PORT...         reads each connection's original destination,
                                                 connects there itself (as Envoy's pass-through
                                                 cluster does) and answers
                                                 "proxy <its port> original <addr> <port> | <reply>"
  capture-net.py [--uid N] client HOST PORT      prints the first line it is sent

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


def original_destination(conn):
    if conn.family == socket.AF_INET:
        raw = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        port, packed = struct.unpack_from("!2xH4s", raw)
        return socket.inet_ntop(socket.AF_INET, packed), port
    raw = conn.getsockopt(socket.IPPROTO_IPV6, SO_ORIGINAL_DST, 28)
    port, packed = struct.unpack_from("!2xH4x16s", raw)
    return socket.inet_ntop(socket.AF_INET6, packed), port


def listen_all(ports):
    sockets = []
    for port in ports:
        for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address, port))
            sock.listen(64)
            sockets.append(sock)
    return sockets


def first_line(host, port):
    with socket.create_connection((host, port), timeout=10) as conn:
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
    elif mode == "client":
        print(first_line(args[1], int(args[2])), flush=True)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main(sys.argv[1:])
