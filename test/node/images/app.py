"""The node tier's app: an HTTP server on the given ports that says who it is and who
called, and that calls out on request, recording all of it (record.py).

  app.py [--port N]... [--proxy-protocol-port N]... [--on-term-call HOST:PORT] [--exit-after SECONDS]

  GET /           200 "app POD <local addr> <local port> from <peer>"; kubelet probes use it
  GET /call?target=HOST:PORT
                  connects to HOST:PORT, sends "GET / HTTP/1.1", answers with the first
                  line of the reply body (or 502 and the error), and records the call
  GET /open?port=N   starts listening on port N too; GET /close?port=N stops listening there
                  (the process lives on: a hung app, as a tcpSocket probe sees it); both recorded
--proxy-protocol-port  listens on N too, where each connection must start with a PROXY protocol
                  v1 line (as nginx's "listen ... proxy_protocol"): "from <peer>" is then the line's
                  client address (a connection without one: 400, recorded as "no-proxy-header")
--on-term-call    on SIGTERM: one such call (recorded), then exit 0 if it answered, else 3
--exit-after      exit 0 after that many seconds (a Job's work)
"""

import signal
import socket
import sys
import threading
import time

from record import exit_now, record


def call(target):
    host, _, port = target.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=5) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise OSError("answered %r" % head.split(b"\r\n")[0])
    return body.decode().strip()


def traced_call(target, why):
    try:
        reply = call(target)
        record("app", "call", target=target, ok=True, reply=reply, why=why)
        return True, reply
    except (OSError, ValueError) as error:
        record("app", "call", target=target, ok=False, error=str(error), why=why)
        return False, str(error)


PROXY_PORTS = set()


def proxy_header(conn, head):
    """Reads a PROXY protocol v1 line from the connection's start: (client address, the rest read), or (None, what was read)."""
    while b"\r\n" not in head and len(head) < 108:
        chunk = conn.recv(4096)
        if not chunk:
            break
        head += chunk
    line, _, rest = head.partition(b"\r\n")
    words = line.decode(errors="replace").split(" ")
    if len(words) != 6 or words[0] != "PROXY" or words[1] not in ("TCP4", "TCP6"):
        return None, head
    record("app", "proxy-header", line=line.decode(), client=words[2], port=conn.getsockname()[1])
    return words[2], rest


def handle(conn, peer):
    with conn:
        conn.settimeout(10)
        try:
            head = b""
            if conn.getsockname()[1] in PROXY_PORTS:
                client, head = proxy_header(conn, head)
                if client is None:
                    record("app", "no-proxy-header", port=conn.getsockname()[1], peer=peer[0], start=head[:64].decode(errors="replace"))
                    conn.sendall(b"HTTP/1.1 400 X\r\ncontent-length: 16\r\nconnection: close\r\n\r\nno PROXY header\n")
                    return
                peer = (client, 0)
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            target = head.split(b"\r\n")[0].decode().split(" ")[1]
            local = conn.getsockname()
            status = 200
            if target.startswith("/call?target="):
                ok, body = traced_call(target.split("=", 1)[1], "request")
                status = 200 if ok else 502
            elif target.startswith("/open?port=") or target.startswith("/close?port="):
                action, port = target[1:].split("?port=")
                listen(int(port)) if action == "open" else unlisten(int(port))
                record("app", action, port=int(port))
                body = "%s %s" % (action, port)
            else:
                body = "app %s %s %d from %s" % (socket.gethostname(), local[0], local[1], peer[0])
                record("app", "served", path=target, port=local[1], peer=peer[0])
            payload = (body + "\n").encode()
            conn.sendall(b"HTTP/1.1 %d X\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s" % (status, len(payload), payload))
        except (OSError, ValueError, IndexError):
            return


LISTENING = {}


def listen(port):
    if port in LISTENING:
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", port))
    sock.listen(64)
    LISTENING[port] = sock

    def loop():
        while True:
            try:
                conn, peer = sock.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn, peer), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def unlisten(port):
    sock = LISTENING.pop(port, None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


def main(args):
    ports, on_term, exit_after = [], None, None
    while args:
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--port":
            ports.append(int(value))
        elif flag == "--proxy-protocol-port":
            ports.append(int(value))
            PROXY_PORTS.add(int(value))
        elif flag == "--on-term-call":
            on_term = value
        elif flag == "--exit-after":
            exit_after = float(value)
        else:
            sys.exit("unknown argument " + flag)

    def terminate(*_):
        record("app", "sigterm")
        ok = traced_call(on_term, "shutdown")[0] if on_term else True
        record("app", "exit", code=0 if ok else 3)
        exit_now(0 if ok else 3)
    signal.signal(signal.SIGTERM, terminate)
    for port in ports:
        listen(port)
    record("app", "started", ports=ports)
    if exit_after is not None:
        time.sleep(exit_after)
        record("app", "exit", code=0)
        exit_now(0)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])
