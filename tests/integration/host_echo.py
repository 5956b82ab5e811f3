#!/usr/bin/env python3
"""A plain-HTTP server that answers every GET with the Host header it received.

    host_echo.py ADDRESS PORT_FILE

Listens on ADDRESS (a non-loopback address: the API server refuses to proxy to
loopback) on a free port, writes the port to PORT_FILE once it accepts connections.
The client's tests put it behind the API server's pod proxy
(/api/v1/namespaces/NS/pods/http:NAME:PORT/proxy/), which forwards the Host header
the API server received from the client: so the answer says what Host the client
sent to the API server. SIGTERM exits.
"""
import http.server
import os
import signal
import sys
import threading
import time


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("Host: %s\n" % self.headers.get("Host", "")).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def watch_parent():
    """Exits when the test that started us is gone (a failed check exits at once)."""
    parent = os.getppid()

    def loop():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=loop, daemon=True).start()


def main():
    address, port_file = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    watch_parent()
    srv = http.server.ThreadingHTTPServer((address, 0), Handler)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
