#!/usr/bin/env python3
"""An HTTP CONNECT proxy for the client's integration tests (stdlib only).

    connect_proxy.py PORT_FILE LOG_FILE

Listens on 127.0.0.1 on a free port and writes the port to PORT_FILE once it
accepts connections. Each CONNECT request is logged to LOG_FILE, one line per
request, before it is answered:

    CONNECT <target> <header names sent with it, lowercase, comma-separated>

then the proxy connects to <target> and relays bytes both ways (the tunnel carries
TLS end to end: the proxy never sees the requests inside). Anything other than
CONNECT is answered 405 and logged as "<METHOD> <target>". SIGTERM exits.
"""
import os
import signal
import socket
import sys
import threading
import time


def relay(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def handle(conn, log, lock):
    head = b""
    try:
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(4096)
            if not chunk:
                conn.close()
                return
            head += chunk
            if len(head) > 65536:
                conn.close()
                return
        head, rest = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        method, target = lines[0].split(" ")[:2]
        names = ",".join(sorted(l.split(":", 1)[0].strip().lower() for l in lines[1:] if ":" in l))
        with lock:
            log.write("%s %s %s\n" % (method, target, names))
            log.flush()
        if method != "CONNECT":
            conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        host, port = target.rsplit(":", 1)
        try:
            up = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
            up.settimeout(None)
        except OSError as e:
            msg = ("cannot connect to %s: %s" % (target, e)).encode()
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(msg), msg))
            conn.close()
            return
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if rest:
            up.sendall(rest)
        threading.Thread(target=relay, args=(up, conn), daemon=True).start()
        relay(conn, up)
    except (OSError, ValueError):
        conn.close()


def watch_parent():
    """Exits when the test that started us is gone (a failed check exits at once)."""
    parent = os.getppid()

    def loop():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=loop, daemon=True).start()


def main():
    port_file, log_file = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    watch_parent()
    log = open(log_file, "a")
    lock = threading.Lock()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(tmp, port_file)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=handle, args=(conn, log, lock), daemon=True).start()


if __name__ == "__main__":
    main()
