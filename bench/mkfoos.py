#!/usr/bin/env python3
"""Create Foos fast, for benchmarks: COUNT Foos spread evenly over NNS namespaces
PREFIX1 ... PREFIXn (created first), POSTed by THREADS threads through a kubectl proxy
(`kubectl create -f` does about 17 objects a second on this machine; this does
hundreds).

  mkfoos.py PROXY_URL PREFIX NNS COUNT [THREADS [NAME [FIRST]]]

NNS "-": every Foo in the existing namespace PREFIX. Each Foo: name NAME<j> (NAME
defaults to "foo-"; j counts from FIRST, default 1, in each namespace), spec
{deploymentName: NAME<j>, replicas: 1}. An object that
already exists (409) counts as made. Exits 1, naming the first failure, if any POST
failed otherwise; prints how many were made and how long it took.
"""
import http.client
import json
import queue
import sys
import threading
import time
import urllib.parse

FOOS = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/%s/foos"


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    url = urllib.parse.urlparse(sys.argv[1])
    prefix, count = sys.argv[2], int(sys.argv[4])
    literal = sys.argv[3] == "-"
    nns = 1 if literal else int(sys.argv[3])
    threads = int(sys.argv[5]) if len(sys.argv) > 5 else 16
    name = sys.argv[6] if len(sys.argv) > 6 else "foo-"
    first = int(sys.argv[7]) if len(sys.argv) > 7 else 1

    def ns_name(i):
        return prefix if literal else "%s%d" % (prefix, i)
    work = queue.Queue()
    for i in range(1, nns + 1):
        if not literal:
            work.put(("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": ns_name(i)}}))
    per = -(-count // nns)
    foos = []
    for i in range(1, nns + 1):
        for j in range(first, first + per):
            if len(foos) == count:
                break
            ns = ns_name(i)
            foos.append((FOOS % ns, {
                "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                "metadata": {"name": "%s%d" % (name, j), "namespace": ns},
                "spec": {"deploymentName": "%s%d" % (name, j), "replicas": 1}}))
    errors, made, lock = [], [0], threading.Lock()

    def worker():
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        while True:
            try:
                path, body = work.get_nowait()
            except queue.Empty:
                return
            try:
                conn.request("POST", path, json.dumps(body),
                             {"Content-Type": "application/json"})
                resp = conn.getresponse()
                text = resp.read()
                ok = resp.status in (200, 201, 409)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
                ok, text = False, str(e).encode()
                resp = None
            with lock:
                if ok:
                    made[0] += 1
                else:
                    errors.append("POST %s: %s %s" % (path, resp.status if resp else "-",
                                                       text[:200].decode(errors="replace")))

    def run(n):
        ts = [threading.Thread(target=worker) for _ in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    t0 = time.time()
    run(min(threads, nns))  # the namespaces first: a Foo needs its namespace
    for f in foos:
        work.put(f)
    run(threads)
    print("made %d objects (%d namespaces, %d Foos) in %.1f s" % (
        made[0], 0 if literal else nns, len(foos), time.time() - t0))
    if errors:
        print("%d failed; first: %s" % (len(errors), errors[0]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
