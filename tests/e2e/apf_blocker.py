#!/usr/bin/env python3
"""Keep one request executing in an API Priority and Fairness priority level.

A Limited priority level with nominalConcurrencyShares 0 (and nothing lent or
borrowed) has a concurrency limit of 0, yet APF still dispatches a request when
nothing at all executes at that level (a request wider than the limit would
otherwise never run). So a level of 0 rejects with 429 only while some request
is executing there. This holds one: a dry-run POST whose body is sent a byte a
second, which keeps the handler (and so the seat) busy. Two threads take turns so
that one is always holding, or trying again at once.

usage: apf_blocker.py SERVER CA_FILE TOKEN NAMESPACE
"""
import select
import socket
import ssl
import sys
import threading
import time
import urllib.parse

server, ca, token, ns = sys.argv[1:5]
u = urllib.parse.urlparse(server)
ctx = ssl.create_default_context(cafile=ca)
HOLD_S = 30  # under the 34 s a create handler allows itself
TAIL = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"apf-blocker-"}}'


def hold_once():
    s = ctx.wrap_socket(socket.create_connection((u.hostname, u.port), timeout=10),
                        server_hostname=u.hostname)
    try:
        s.sendall(("POST /api/v1/namespaces/%s/configmaps?dryRun=All HTTP/1.1\r\n"
                   "Host: %s\r\nAuthorization: Bearer %s\r\n"
                   "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                   % (ns, u.netloc, token, HOLD_S + len(TAIL))).encode())
        for _ in range(HOLD_S):
            # An early answer is a 429: someone else holds the level; try again.
            # (Readable may be only a TLS 1.3 session ticket: read without blocking.)
            if select.select([s], [], [], 1.0)[0]:
                s.setblocking(False)
                try:
                    head = s.recv(200)
                    if head:
                        return head.split(b"\r\n", 1)[0].decode()
                except ssl.SSLWantReadError:
                    pass
                s.setblocking(True)
                s.settimeout(10)
            s.sendall(b" ")
        s.sendall(TAIL)
        s.settimeout(60)
        return s.recv(200).split(b"\r\n", 1)[0].decode()
    finally:
        s.close()


def loop(delay):
    time.sleep(delay)
    while True:
        try:
            status = hold_once()
            print(time.strftime("%T"), status, flush=True)
            if "429" in status:
                time.sleep(0.2)
        except (OSError, ssl.SSLError) as e:
            print(time.strftime("%T"), "blocker:", e, flush=True)
            time.sleep(0.5)


for d in (0, HOLD_S / 2):
    threading.Thread(target=loop, args=(d,), daemon=True).start()
while True:
    time.sleep(3600)
