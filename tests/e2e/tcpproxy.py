#!/usr/bin/env python3
"""A TCP proxy for e2e tests that can simulate a network partition.

    tcpproxy.py UPSTREAM_HOST:PORT PORT_FILE

Listens on 127.0.0.1 on a free port, writes the port to PORT_FILE once it accepts
connections, and forwards bytes both ways between each client and UPSTREAM.

SIGUSR1 cuts the network: nothing is forwarded any more in either direction, and
new connections are accepted but never connected upstream. Nothing is closed, so
the client sees what a partition looks like (silence until its own timeouts fire),
not a refused or reset connection. SIGUSR2 heals the cut. SIGTERM exits.
"""
import os
import selectors
import signal
import socket
import sys

BUF = 65536


class Proxy:
    def __init__(self, upstream):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.sel = selectors.DefaultSelector()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.lsock.setblocking(False)
        self.cut = False
        self.quit = False
        self.peer = {}  # socket -> the socket its bytes go to
        self.pending = {}  # socket -> bytes read but not yet written to its peer
        self.held = []  # accepted while cut: never served
        self.sel.register(self.lsock, selectors.EVENT_READ)

    def port(self):
        return self.lsock.getsockname()[1]

    def close_pair(self, s):
        for x in (s, self.peer.get(s)):
            if x is None or x not in self.peer:
                continue
            try:
                self.sel.unregister(x)
            except (KeyError, ValueError):
                pass
            self.peer.pop(x, None)
            self.pending.pop(x, None)
            x.close()

    def accept(self):
        try:
            c, _ = self.lsock.accept()
        except BlockingIOError:
            return
        if self.cut:
            self.held.append(c)
            return
        try:
            u = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            c.close()
            return
        for x in (c, u):
            x.setblocking(False)
            x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.peer[c], self.peer[u] = u, c
        self.pending[c], self.pending[u] = b"", b""
        self.sel.register(c, selectors.EVENT_READ)
        self.sel.register(u, selectors.EVENT_READ)

    def update_interest(self):
        # While cut, no socket is read or written: bytes stay in the kernel buffers.
        for s in list(self.peer):
            ev = 0
            if not self.cut:
                ev = selectors.EVENT_READ if not self.pending[s] else 0
                if self.pending[self.peer[s]]:
                    ev |= selectors.EVENT_WRITE
            try:
                if ev:
                    self.sel.modify(s, ev)
                else:
                    self.sel.unregister(s)
            except KeyError:
                if ev:
                    self.sel.register(s, ev)

    def pump(self, s, mask):
        if s not in self.peer:
            return
        if mask & selectors.EVENT_READ:
            try:
                data = s.recv(BUF)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                data = b""
            if data == b"":
                # EOF: hand the peer what is still buffered for it, then close both.
                dst = self.peer[s]
                if self.pending[s]:
                    try:
                        dst.setblocking(True)
                        dst.settimeout(5)
                        dst.sendall(self.pending[s])
                    except OSError:
                        pass
                self.close_pair(s)
                return
            if data:
                self.pending[s] += data
        if mask & selectors.EVENT_WRITE:
            src = self.peer[s]
            try:
                n = s.send(self.pending[src])
                self.pending[src] = self.pending[src][n:]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.close_pair(s)
                return
        # Try to write what was just read without waiting for another round.
        dst = self.peer.get(s)
        if dst is not None and self.pending.get(s):
            try:
                n = dst.send(self.pending[s])
                self.pending[s] = self.pending[s][n:]
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self.close_pair(s)

    def run(self):
        while not self.quit:
            self.update_interest()
            try:
                events = self.sel.select(timeout=0.2)
            except InterruptedError:
                continue
            for key, mask in events:
                if key.fileobj is self.lsock:
                    self.accept()
                elif not self.cut:
                    self.pump(key.fileobj, mask)


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: tcpproxy.py UPSTREAM_HOST:PORT PORT_FILE\n")
        return 2
    p = Proxy(sys.argv[1])

    def on_cut(signum, frame):
        p.cut = True

    def on_heal(signum, frame):
        p.cut = False

    def on_term(signum, frame):
        p.quit = True

    signal.signal(signal.SIGUSR1, on_cut)
    signal.signal(signal.SIGUSR2, on_heal)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    # Written only now: a reader of the file can connect at once.
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % p.port())
    os.rename(tmp, sys.argv[2])
    p.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
