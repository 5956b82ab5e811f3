#!/usr/bin/env python3
"""Wait until COUNT Foos in a namespace are ready, by list + watch (no repeated full
lists), and print how long it took since a given start time.

  wait_ready.py NAMESPACE COUNT START_EPOCH TIMEOUT_SECONDS [--condition | --owned]

NAMESPACE "-" is every namespace.

"Ready" is measured two ways, both printed as seconds since START_EPOCH:
  avail=S  status.availableReplicas == spec.replicas on COUNT Foos. Both the C daemon
           and the Go original maintain availableReplicas, so this is the fair figure.
  cond=S   condition Ready=True on COUNT Foos (only with --condition: the Go original
           sets no conditions).
  owned=S  (--owned, instead of avail) COUNT Deployments whose controller is a Foo: for
           a control plane without a deployment controller (envtest), where nothing
           becomes available, "every Foo has been acted on".
Exit status 0 when all figures were reached, 1 on timeout (the counts reached so far
are printed instead). Progress goes to stderr every 15 s.

The API is reached through `kubectl get --raw` (so the kubeconfig's credentials are
used as they are): a paged list for the current state, then a watch from the list's
resourceVersion, one JSON event per line. `kubectl get -w` is not used because it
prints a paged list (over 500 objects) as whole pages, not object by object. When a
watch ends it is resumed from the last resourceVersion seen; on 410 Gone, relisted.
"""
import json
import subprocess
import sys
import threading
import time

FOO_PATH = "/apis/samplecontroller.k8s.io/v1alpha1"
DEPLOY_PATH = "/apis/apps/v1"


def base_path(ns, owned):
    group, res = (DEPLOY_PATH, "deployments") if owned else (FOO_PATH, "foos")
    return "%s/%s" % (group, res) if ns == "-" else "%s/namespaces/%s/%s" % (group, ns, res)


class State:
    def __init__(self, count, start, want_cond, owned):
        self.count, self.start, self.want_cond, self.owned = count, start, want_cond, owned
        self.avail_ok, self.cond_ok = set(), set()
        self.t_avail = self.t_cond = None
        self.last_progress = time.time()

    def done(self):
        return self.t_avail is not None and (self.t_cond is not None or not self.want_cond)

    def reset(self):
        self.avail_ok.clear()
        self.cond_ok.clear()

    def update(self, obj, deleted=False):
        meta = obj.get("metadata", {})
        name = (meta.get("namespace", ""), meta.get("name", ""))
        if self.owned:
            by_foo = any(o.get("kind") == "Foo" and o.get("controller")
                         for o in meta.get("ownerReferences") or [])
            if not deleted and by_foo:
                self.avail_ok.add(name)
            else:
                self.avail_ok.discard(name)
            return
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        replicas = spec.get("replicas")
        avail = status.get("availableReplicas")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        if not deleted and replicas is not None and avail == replicas:
            self.avail_ok.add(name)
        else:
            self.avail_ok.discard(name)
        if not deleted and ready:
            self.cond_ok.add(name)
        else:
            self.cond_ok.discard(name)

    def check(self):
        now = time.time()
        if self.t_avail is None and len(self.avail_ok) >= self.count:
            self.t_avail = now - self.start
        if self.want_cond and self.t_cond is None and len(self.cond_ok) >= self.count:
            self.t_cond = now - self.start
        if now - self.last_progress >= 15:
            self.last_progress = now
            print("    ... %.0fs: %d/%d %s%s" % (
                now - self.start, len(self.avail_ok), self.count,
                "owned" if self.owned else "available",
                (", %d Ready=True" % len(self.cond_ok)) if self.want_cond else ""),
                file=sys.stderr, flush=True)


def raw_get(path):
    out = subprocess.run(["kubectl", "get", "--raw", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return json.loads(out.stdout)


def relist(base, st):
    st.reset()
    cont = ""
    while True:
        page = raw_get(base + "?limit=500" + ("&continue=" + cont if cont else ""))
        for item in page.get("items") or []:
            st.update(item)
        cont = page.get("metadata", {}).get("continue", "")
        if not cont:
            st.check()
            return page["metadata"]["resourceVersion"]


def watch(base, rv, st, deadline):
    """Returns the last resourceVersion seen, or None when the watch must relist."""
    secs = max(1, min(300, int(deadline - time.time()) + 1))
    proc = subprocess.Popen(
        ["kubectl", "get", "--raw",
         "%s?watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d" % (base, rv, secs)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    # A quiet watch blocks the read below: end it at the deadline.
    timer = threading.Timer(max(0.0, deadline - time.time()), proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind, obj = ev.get("type"), ev.get("object") or {}
            if kind == "ERROR":
                return None  # 410 Gone (or another error): start over from a list
            new_rv = obj.get("metadata", {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                st.update(obj, deleted=(kind == "DELETED"))
                st.check()
            if new_rv:
                rv = new_rv
            if st.done():
                break
        return rv
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    ns, count, start, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    owned = "--owned" in sys.argv[5:]
    st = State(count, start, "--condition" in sys.argv[5:], owned)
    deadline = start + timeout
    base = base_path(ns, owned)
    rv = None
    while not st.done() and time.time() < deadline:
        try:
            if rv is None:
                rv = relist(base, st)
            if not st.done():
                rv = watch(base, rv, st, deadline)
        except (RuntimeError, ValueError, KeyError) as e:
            print("    ... list/watch failed, retrying: %s" % e, file=sys.stderr, flush=True)
            rv = None
            time.sleep(1)

    what = "owned" if owned else "avail"
    out = ["%s=%.1f" % (what, st.t_avail) if st.t_avail is not None
           else "%s=timeout(%d/%d)" % (what, len(st.avail_ok), count)]
    if st.want_cond:
        out.append("cond=%.1f" % st.t_cond if st.t_cond is not None
                   else "cond=timeout(%d/%d)" % (len(st.cond_ok), count))
    print(" ".join(out))
    return 0 if st.done() else 1


if __name__ == "__main__":
    sys.exit(main())
