#!/usr/bin/env python3
"""Reaction latency of a controller: for each new Foo, the time from its ADDED event
to its Deployment's ADDED event, both seen by this watcher and timestamped locally.

  reaction.py NAMESPACE PREFIX COUNT TIMEOUT_SECONDS

Watches Foos and Deployments in NAMESPACE from the current resourceVersion, prints
"watching" on stdout once both watches are open (the caller creates the Foos after
that), and ends when COUNT Foos named PREFIX* have their Deployment (named as the
Foo, spec.deploymentName) or at the timeout. Then prints one line:

  n=N p50=MS p99=MS max=MS        (milliseconds; missing=K if some never came)

Both streams come through the same path (`kubectl get --raw` on a watch, one JSON
event per line), so the transport's delay is in both timestamps and cancels out;
what remains is the controller's reaction plus one API server write and its watch
fan-out. Each event is stamped when its line is read.
"""
import json
import math
import subprocess
import sys
import threading
import time


def current_rv(path):
    out = subprocess.run(["kubectl", "get", "--raw", path + "?limit=1"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["metadata"]["resourceVersion"]


class Seen:
    def __init__(self, prefix, count):
        self.prefix, self.count = prefix, count
        self.foo, self.dep = {}, {}
        self.lock = threading.Lock()
        self.done = threading.Event()

    def note(self, table, name):
        if not name.startswith(self.prefix):
            return
        with self.lock:
            table.setdefault(name, time.time())
            if sum(1 for n in self.foo if n in self.dep) >= self.count:
                self.done.set()


def watch(path, rv, table, seen, opened, deadline):
    secs = max(1, int(deadline - time.time()) + 1)
    proc = subprocess.Popen(
        ["kubectl", "get", "--raw",
         "%s?watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d" % (path, rv, secs)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    opened.set()
    try:
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("type") == "ADDED":
                seen.note(table, (ev.get("object") or {}).get("metadata", {}).get("name", ""))
            if seen.done.is_set():
                break
    finally:
        proc.kill()
        proc.wait()


def pct(sorted_ms, p):
    # Nearest rank: the smallest value with at least p% of the samples at or below it.
    i = max(0, min(len(sorted_ms) - 1, math.ceil(p / 100.0 * len(sorted_ms)) - 1))
    return sorted_ms[i]


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ns, prefix, count, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    deadline = time.time() + timeout
    seen = Seen(prefix, count)
    paths = ("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/%s/foos" % ns,
             "/apis/apps/v1/namespaces/%s/deployments" % ns)
    threads = []
    for path, table in zip(paths, (seen.foo, seen.dep)):
        opened = threading.Event()
        t = threading.Thread(target=watch, daemon=True,
                             args=(path, current_rv(path), table, seen, opened, deadline))
        t.start()
        opened.wait()
        threads.append(t)
    # kubectl has the request on its way once it runs; give it a moment to be served.
    time.sleep(1.0)
    print("watching", flush=True)
    seen.done.wait(max(0.0, deadline - time.time()))
    with seen.lock:
        ms = sorted((seen.dep[n] - seen.foo[n]) * 1000.0 for n in seen.foo if n in seen.dep)
        missing = count - len(ms)
    if not ms:
        print("n=0 missing=%d" % count, flush=True)
        return 1
    line = "n=%d p50=%.0f p99=%.0f max=%.0f" % (len(ms), pct(ms, 50), pct(ms, 99), ms[-1])
    if missing > 0:
        line += " missing=%d" % missing
    print(line, flush=True)
    return 0 if missing <= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
