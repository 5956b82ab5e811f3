#!/usr/bin/env python3
"""A TLS fault proxy for e2e tests: the daemon talks to it as to the API server.

    tlsproxy.py UPSTREAM_HOST:PORT CERT KEY STATE_DIR [--alpn h2,http/1.1]

Terminates TLS with its own certificate (CERT/KEY, which the test kubeconfig
trusts), offers the ALPN protocols given (default h2 and http/1.1), and for each
client opens a TLS connection to UPSTREAM offering the protocol the client chose;
bytes are then copied both ways. Credentials are bearer tokens in the requests,
so they pass through untouched. HTTP/2 traffic is read frame by frame (not
decoded further), which is enough to count requests (HEADERS frames from the
client; request lines for HTTP/1.1) and to put a GOAWAY between two frames.

STATE_DIR/port receives the listening port once it accepts connections;
STATE_DIR/ctl.sock is a UNIX socket taking one command per connection, answered
with one line:
    latency MS       delay every chunk from the server by MS milliseconds
    stall            stop copying in both directions; nothing is closed
    reset BYTES      every connection, open or new, is reset (RST) after BYTES
                     more bytes from the server (0: the open ones now, new ones
                     after their first bytes) -- mid-body when a list flows
    truncate BYTES   the same, closed cleanly instead: a body cut short
    goaway           HTTP/2: send GOAWAY (NO_ERROR, last stream = the last one the
                     client opened) on every open connection at the next frame
                     boundary, close it 2 s later (HTTP/1.1: close)
    refuse           stop listening: new connections are refused
    clear            end every fault (listen again, copy again)
    stats            "connections=N requests=N bytes_down=N open=N"
SIGTERM exits.
"""
import asyncio
import os
import signal
import socket
import ssl
import struct
import sys
import time

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Conn:
    def __init__(self, proxy, cr, cw):
        self.p = proxy
        self.cr, self.cw = cr, cw
        self.ur = self.uw = None
        self.h2 = False
        self.last_stream = 0
        self.budget = None  # bytes from the server before the reset/truncate fault fires
        self.budget_kind = None
        self.goaway_sent = False
        self.goaway_pending = False
        self.head = b""  # HTTP/2 frame header bytes from the server so far
        self.left = 0    # payload bytes of the current server frame still to come
        self.closed = False

    def close(self, rst=False):
        if self.closed:
            return
        self.closed = True
        for w in (self.cw, self.uw):
            if w is None:
                continue
            if rst:
                sock = w.get_extra_info("socket")
                if sock is not None:
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    except OSError:
                        pass
                w.transport.abort()
            else:
                w.close()
        self.p.conns.discard(self)

    async def wait_flowing(self):
        while self.p.stalled and not self.closed:
            await asyncio.sleep(0.05)

    async def up(self):
        """Client to server: counts requests."""
        buf = b""
        preface_done = False
        try:
            while not self.closed:
                data = await self.cr.read(65536)
                if not data:
                    break
                await self.wait_flowing()
                if self.closed:
                    break
                if self.h2:
                    buf += data
                    if not preface_done:
                        if len(buf) < len(H2_PREFACE):
                            self.uw.write(data)
                            continue
                        buf = buf[len(H2_PREFACE):]
                        preface_done = True
                    while len(buf) >= 9:
                        n = int.from_bytes(buf[0:3], "big")
                        if len(buf) < 9 + n:
                            break
                        ftype = buf[3]
                        sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                        if ftype == 0x1:  # HEADERS opens a stream: one request
                            self.p.requests += 1
                            self.last_stream = max(self.last_stream, sid)
                        buf = buf[9 + n:]
                else:
                    for line in data.split(b"\r\n"):
                        if line[:4] in (b"GET ", b"POST", b"PUT ", b"PATC", b"DELE", b"HEAD"):
                            self.p.requests += 1
                self.uw.write(data)
                await self.uw.drain()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        self.close()

    def frames(self, data):
        """HTTP/2 from the server: returns how many bytes of data end on a frame
        boundary (the longest such prefix), tracking frames across chunks."""
        at = 0
        cut = 0
        while at < len(data):
            if self.left > 0:
                k = min(self.left, len(data) - at)
                self.left -= k
                at += k
            else:
                need = 9 - len(self.head)
                self.head += data[at: at + need]
                at += min(need, len(data) - at)
                if len(self.head) == 9:
                    self.left = int.from_bytes(self.head[0:3], "big")
                    self.head = b""
            if self.left == 0 and not self.head:
                cut = at
        return cut

    def at_boundary(self):
        return self.left == 0 and not self.head

    def send_goaway(self):
        self.goaway_sent = True
        self.cw.write(self.goaway_frame())
        asyncio.get_running_loop().call_later(2.0, self.close)

    async def down(self):
        """Server to client: latency, byte budgets, GOAWAY at a frame boundary."""
        try:
            while not self.closed:
                data = await self.ur.read(65536)
                if not data:
                    break
                await self.wait_flowing()
                if self.p.latency_ms:
                    await asyncio.sleep(self.p.latency_ms / 1000.0)
                if self.closed:
                    break
                if self.budget is not None and len(data) >= self.budget:
                    self.cw.write(data[: self.budget])
                    await self.cw.drain()
                    self.close(rst=self.budget_kind == "reset")
                    break
                if self.budget is not None:
                    self.budget -= len(data)
                if self.goaway_sent:
                    continue  # the client was told to go away: nothing more for it
                cut = self.frames(data) if self.h2 else len(data)
                if self.goaway_pending and self.h2 and cut > 0:
                    self.cw.write(data[:cut])
                    self.send_goaway()
                    continue
                self.p.bytes_down += len(data)
                self.cw.write(data)
                await self.cw.drain()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        self.close()

    def goaway_frame(self):
        payload = struct.pack(">II", self.last_stream & 0x7FFFFFFF, 0)
        return len(payload).to_bytes(3, "big") + bytes([0x7, 0]) + (0).to_bytes(4, "big") + payload


class Proxy:
    def __init__(self, upstream, cert, key, state, alpn):
        host, port = upstream.rsplit(":", 1)
        self.uhost, self.uport = host, int(port)
        self.state = state
        self.alpn = alpn
        self.sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.sctx.load_cert_chain(cert, key)
        self.sctx.set_alpn_protocols(alpn)
        self.conns = set()
        self.latency_ms = 0
        self.stalled = False
        self.connections = self.requests = self.bytes_down = 0
        self.server = None
        self.port = 0
        self.budget_new = None  # (kind, bytes) for connections made during the fault

    def upstream_ctx(self, proto):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # loopback to the local API server only
        if proto:
            ctx.set_alpn_protocols([proto])
        return ctx

    async def serve(self, cr, cw):
        c = Conn(self, cr, cw)
        self.connections += 1
        sslobj = cw.get_extra_info("ssl_object")
        proto = sslobj.selected_alpn_protocol() if sslobj else None
        c.h2 = proto == "h2"
        try:
            c.ur, c.uw = await asyncio.open_connection(
                self.uhost, self.uport, ssl=self.upstream_ctx(proto), server_hostname="localhost")
        except (ConnectionError, ssl.SSLError, OSError):
            cw.close()
            return
        if self.budget_new is not None:
            c.budget_kind, c.budget = self.budget_new[0], max(1, self.budget_new[1])
        self.conns.add(c)
        await asyncio.gather(c.up(), c.down())

    async def listen(self):
        self.server = await asyncio.start_server(
            self.serve, "127.0.0.1", self.port, ssl=self.sctx, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    async def command(self, r, w):
        line = (await r.readline()).decode().strip().split()
        ans = "ok"
        cmd, arg = (line + ["", ""])[0], (line + ["", ""])[1]
        if cmd == "latency":
            self.latency_ms = int(arg)
        elif cmd == "stall":
            self.stalled = True
        elif cmd in ("reset", "truncate"):
            self.budget_new = (cmd, int(arg))
            for c in list(self.conns):
                if int(arg) == 0:
                    c.close(rst=cmd == "reset")
                else:
                    c.budget, c.budget_kind = int(arg), cmd
        elif cmd == "goaway":
            for c in list(self.conns):
                if not c.h2:
                    c.close()  # HTTP/1.1 has no GOAWAY: the server closes
                elif c.at_boundary():
                    c.send_goaway()
                else:
                    c.goaway_pending = True
        elif cmd == "refuse":
            if self.server is not None:
                self.server.close()
                self.server = None
        elif cmd == "clear":
            self.latency_ms, self.stalled = 0, False
            self.budget_new = None
            for c in self.conns:
                c.budget = None
            if self.server is None:
                await self.listen()
        elif cmd == "stats":
            ans = "connections=%d requests=%d bytes_down=%d open=%d" % (
                self.connections, self.requests, self.bytes_down, len(self.conns))
        else:
            ans = "unknown command: %r" % " ".join(line)
        w.write((ans + "\n").encode())
        await w.drain()
        w.close()

    async def main(self):
        await self.listen()
        sock = os.path.join(self.state, "ctl.sock")
        if os.path.exists(sock):
            os.unlink(sock)
        await asyncio.start_unix_server(self.command, sock)
        tmp = os.path.join(self.state, "port.tmp")
        with open(tmp, "w") as f:
            f.write("%d\n" % self.port)
        os.rename(tmp, os.path.join(self.state, "port"))
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()


def main():
    args = sys.argv[1:]
    alpn = ["h2", "http/1.1"]
    if "--alpn" in args:
        i = args.index("--alpn")
        alpn = args[i + 1].split(",")
        del args[i: i + 2]
    if len(args) != 4:
        sys.exit(__doc__)
    asyncio.run(Proxy(args[0], args[1], args[2], args[3], alpn).main())


if __name__ == "__main__":
    main()
