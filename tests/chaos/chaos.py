#!/usr/bin/env python3
"""make chaos: two daemons with leader election (and an observer), thousands of Foos churning, and
faults at random; then a quiet period and the verdict. Run by tests/chaos/run.sh,
which brings up the local control plane and builds what is needed.

Environment: CHAOS_SECONDS (1200), CHAOS_FOOS (5000), CHAOS_NAMESPACES (10),
CHAOS_QUIET (300: the most seconds allowed to converge after the last fault),
CHAOS_SEED (random), CHAOS_OUT (where logs and the table go), CHAOS_QPS (200: each
daemon's client QPS; burst twice that).

Each daemon talks to the API server through its own TLS fault proxy
(tests/e2e/tlsproxy.py). Faults, one every 15-40 s: API server restart, etcd
compaction, a proxy fault for 5-15 s (latency, stall, reset, truncate, GOAWAY,
refuse), kill -9 of the leader (restarted 2 s later), SIGTERM of the standby (it
must exit 0; restarted). The two use client-go's lease timings (15 s, renew
deadline 10 s, retry 2 s): an API server restart here takes 13.5 s to ready and a
stalled proxy holds a renewal, so a leader often loses its lease, exits 1 by design
and is restarted (counted). Churn, every second: Foos created (up to CHAOS_FOOS), scaled,
deleted; Deployments scaled or deleted behind the controller's back; foreign
Deployments with a Foo claiming them (the oldest claims deleted beyond a cap); a
whole namespace deleted and replaced every few minutes. The population is
re-read from the server every minute, so that writes lost to faults are redone:
after the ramp the number of objects stays level, and growth is growth.

Daemon w, the observer: a third C daemon behind its own fault proxy, a standby
that never leads (its Lease is held by an identity that never lets go), so it runs
its informers, reflectors, consistency checks and metrics through the whole run
and is never killed by the fault loop: the incarnation whose growth is judged
over the longest window. (a and b rarely live 5 min past warm-up: the first
default run of this verdict judged none of their 20 incarnations.) It is checked
for divergence and exits like the others.

CHAOS_IMPL=go runs Kubernetes' Go sample-controller (bench/build_go_controller.sh,
CHAOS_GO_BIN) under the same churn and faults, for comparison, as far as the script
can drive it: it has no leader election (one daemon, one proxy; "kill -9 leader"
kills it, there is no standby to SIGTERM), no metrics and no consistency check
(those rows say n/a), and no Ready condition (a Foo claiming a foreign Deployment
counts as converged on the Deployment's side only), and no observer (its growth
is judged only where an incarnation happens to live long enough).

Verdict (any violation fails): every daemon exit was one we caused; after the last
fault every Foo converges (its Deployment exists, is controlled by it, has its
replicas; its status has the Deployment's availableReplicas) or, when it claims a
foreign Deployment, says ErrResourceExists; no Deployment is left controlled by a
Foo that is gone; each informer's consistency check (--cache-consistency-check-
period) completes a round after the quiet period with zero divergence; Events per
Foo stay bounded; each daemon incarnation that lived CHAOS_JUDGE_MIN (300) s past
warm-up (120 s after its start and after the churn first reached CHAOS_FOOS) is
flat: malloc's bytes in use (process_malloc_inuse_bytes: its per-minute floor,
less what the change in cached objects explains) grow by at most 256 KiB/min, RSS
at the end is within 10% + 4 MiB of its peak over the first half of the window
(glibc keeps freed pages, so RSS is judged as a high-water mark), open fds and
threads do not trend up (a slope over 0.5 fds or 0.2 threads per minute and an
end above the first half's highest, by more than 2 fds or any thread); at least one incarnation (w's) must be judged. Slopes of all of
them are printed.
"""
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECS = int(os.environ.get("CHAOS_SECONDS", "1200"))
FOOS = int(os.environ.get("CHAOS_FOOS", "5000"))
NNS = int(os.environ.get("CHAOS_NAMESPACES", "10"))
QUIET = int(os.environ.get("CHAOS_QUIET", "300"))
SEED = int(os.environ.get("CHAOS_SEED", str(random.randrange(1 << 30))))
OUT = os.environ.get("CHAOS_OUT", os.path.join(ROOT, "build", "chaos"))
BIN = os.environ.get("CHAOS_BIN", os.path.join(ROOT, "bin", "sample-controller"))
IMPL = os.environ.get("CHAOS_IMPL", "c")
# Client-side rate limit of every daemon (QPS, burst = 2 x QPS). The churn asks for
# far more than the daemon's default 20 writes/s: at 20 the leader spent the whole
# run at its limit and 2,832 of 5,132 Foos were still queued 300 s after the last
# fault -- a throughput cap, not a fault. 200/400 as the benchmarks' peers use.
QPS = int(os.environ.get("CHAOS_QPS", "200"))
GO_BIN = os.environ.get("CHAOS_GO_BIN", "")
CHECK_PERIOD_S = 15
EVENTS_PER_FOO_MAX = 30
# Growth verdict (see the docstring).
WARM_S = 120
JUDGE_MIN_S = int(os.environ.get("CHAOS_JUDGE_MIN", "300"))
HEAP_SLOPE_MAX_KIB_MIN = 256.0
RSS_SLOPE_MAX_KIB_MIN = 256.0  # the Go original, which has no heap figure
RSS_END_OVER_PEAK = (1.10, 4096)  # factor, KiB
FD_SLOPE_MAX_MIN = 0.5
THREAD_SLOPE_MAX_MIN = 0.2

rnd = random.Random(SEED)
lock = threading.Lock()
violations = []
faults = {}
# Requests the daemons sent through their proxies while a proxy fault lasted, and
# for how long faults lasted: retry pacing under faults, comparable across IMPLs.
fault_reqs = [0, 0.0]
stop = threading.Event()
churn_stop = threading.Event()


def log(msg):
    print("%s chaos: %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def violation(msg):
    with lock:
        violations.append(msg)
    log("VIOLATION: " + msg)


def count_fault(kind):
    with lock:
        faults[kind] = faults.get(kind, 0) + 1


def kubectl(*args, stdin=None, check=False, timeout=120):
    p = subprocess.run(["kubectl"] + list(args), input=stdin, capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError("kubectl %s: %s" % (" ".join(args), p.stderr.strip()))
    return p


def kget(*args):
    for _ in range(30):
        p = kubectl("get", *args, "-o", "json", timeout=300)
        if p.returncode == 0:
            return json.loads(p.stdout)["items"]
        time.sleep(2)
    raise RuntimeError("kubectl get %s kept failing: %s" % (" ".join(args), p.stderr))


def local_ctl(*args):
    return subprocess.run(["bash", os.path.join(ROOT, "hack", "local-ctl.sh")] + list(args),
                          capture_output=True, text=True, timeout=180)


# ---------------------------------------------------------------- proxies and daemons

class ProxyProc:
    def __init__(self, name, upstream):
        self.dir = os.path.join(OUT, "proxy-" + name)
        os.makedirs(self.dir, exist_ok=True)
        for f in ("port", "ctl.sock"):
            if os.path.exists(os.path.join(self.dir, f)):
                os.unlink(os.path.join(self.dir, f))
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=chaos",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                        os.path.join(self.dir, "key.pem"), "-out",
                        os.path.join(self.dir, "cert.pem")], capture_output=True, check=True)
        self.p = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "e2e", "tlsproxy.py"),
                                   upstream, os.path.join(self.dir, "cert.pem"),
                                   os.path.join(self.dir, "key.pem"), self.dir],
                                  stdout=open(os.path.join(self.dir, "proxy.log"), "w"),
                                  stderr=subprocess.STDOUT)
        for _ in range(100):
            if os.path.exists(os.path.join(self.dir, "port")):
                break
            time.sleep(0.1)
        self.port = int(open(os.path.join(self.dir, "port")).read())

    def ctl(self, cmd):
        import socket
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(os.path.join(self.dir, "ctl.sock"))
        s.sendall((cmd + "\n").encode())
        ans = s.makefile().readline().strip()
        s.close()
        return ans

    def kubeconfig(self, token):
        path = os.path.join(self.dir, "kubeconfig")
        with open(path, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "
                    "\"https://127.0.0.1:%d\", certificate-authority: \"%s\"}\nusers:\n- name: u\n"
                    "  user: {token: \"%s\"}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n"
                    "current-context: c\n" % (self.port, os.path.join(self.dir, "cert.pem"), token))
        return path


def hold_lease(ns):
    """A Lease in ns held for a day by an identity that is no daemon: a daemon electing
    there stays a standby (the observer, w)."""
    kubectl("create", "namespace", ns, check=True)
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    kubectl("apply", "-f", "-", check=True, stdin=(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: sample-controller, "
        "namespace: %s}\nspec: {holderIdentity: chaos-holder, leaseDurationSeconds: 86400, "
        "acquireTime: '%s', renewTime: '%s'}\n" % (ns, now, now)))


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Daemon:
    def __init__(self, name, kubeconfig, le_ns):
        self.name = name
        self.kubeconfig = kubeconfig
        self.le_ns = le_ns
        self.p = None
        self.incarnation = 0
        self.expected_exit = False
        self.samples = {}  # incarnation -> [(t, rss_kib, fds, threads, objects, heap_kib)]
        self.leader_changes = 0
        self.metrics = None

    def start(self):
        self.incarnation += 1
        self.metrics = "127.0.0.1:%d" % free_port()
        self.log_path = os.path.join(OUT, "%s.%d.log" % (self.name, self.incarnation))
        self.expected_exit = False
        if IMPL == "go":
            # The same client limits as the C daemons'.
            argv = [GO_BIN, "-kubeconfig", self.kubeconfig, "-kube-api-qps", str(QPS),
                    "-kube-api-burst", str(2 * QPS), "-v=1"]
        else:
            # client-go's lease timings (the daemon's defaults).
            argv = [BIN, "--kubeconfig", self.kubeconfig, "--leader-elect",
                    "--leader-elect-resource-namespace", self.le_ns,
                    "--cache-consistency-check-period=%ds" % CHECK_PERIOD_S,
                    "--kube-api-qps=%d" % QPS, "--kube-api-burst=%d" % (2 * QPS),
                    "--metrics-secure=false", "--metrics-bind-address", self.metrics,
                    "--health-probe-bind-address=0", "--log-format=json", "-v=1"]
        self.p = subprocess.Popen(argv, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        self.start_t = time.time()
        self.samples[self.incarnation] = []

    def leading(self):
        if IMPL == "go":
            return self.p.poll() is None  # no leader election: the one daemon leads
        try:
            text = open(self.log_path, errors="replace").read()
        except OSError:
            return False
        return '"Started leading"' in text and self.p.poll() is None

    def sample(self):
        if self.p is None or self.p.poll() is not None:
            return
        pid = self.p.pid
        try:
            st = open("/proc/%d/status" % pid).read()
            rss = int(re.search(r"VmRSS:\s+(\d+)", st).group(1))
            thr = int(re.search(r"Threads:\s+(\d+)", st).group(1))
            fds = len(os.listdir("/proc/%d/fd" % pid))
        except (OSError, AttributeError):
            return
        # Objects in its caches with it: RSS that follows them is the cache, not a
        # leak (the second default run failed on slopes while the Foo count was still
        # climbing). -1 where there are no metrics (the Go original).
        objs = heap = -1
        if IMPL != "go":
            o, h = self.prom("informer_objects", "process_malloc_inuse_bytes")
            if not o or not h:
                return  # a scrape that failed (a fault, a restart): no sample
            objs, heap = sum(o.values()), sum(h.values()) / 1024
        self.samples[self.incarnation].append((time.time(), rss, fds, thr, objs, heap))

    def check_exit(self):
        if self.p is not None and self.p.poll() is not None and not self.expected_exit:
            try:
                text = open(self.log_path, errors="replace").read()
            except OSError:
                text = ""
            if self.p.returncode == 1 and '"leader election lost"' in text:
                # By design (as controller-runtime): a leader that cannot renew in
                # time exits 1 and its pod restarts; here we restart it.
                count_fault("leader lost, exited 1 (restarted)")
                self.start()
                return
            violation("%s (incarnation %d) exited by itself with %d; log %s" %
                      (self.name, self.incarnation, self.p.returncode, self.log_path))
            self.start()

    def kill9(self):
        self.expected_exit = True
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def term(self):
        self.expected_exit = True
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            violation("%s did not exit within 60 s of SIGTERM" % self.name)
            self.p.kill()
            self.p.wait()
            return
        if rc != 0:
            violation("%s exited %d after SIGTERM (log %s)" % (self.name, rc, self.log_path))

    def prom(self, *names):
        """{labels: value} of the samples named names[0] (None: no metrics); with more
        names, a tuple of such dicts from one scrape."""
        if IMPL == "go":
            return None if len(names) == 1 else (None,) * len(names)
        try:
            text = urllib.request.urlopen("http://%s/metrics" % self.metrics, timeout=5).read().decode()
        except OSError:
            return None if len(names) == 1 else (None,) * len(names)
        outs = {n: {} for n in names}
        for line in text.splitlines():
            m = re.match(r"^(\w+)(\{[^}]*\})?\s+(\S+)$", line)
            if m and m.group(1) in outs:
                outs[m.group(1)][m.group(2) or ""] = float(m.group(3))
        return outs[names[0]] if len(names) == 1 else tuple(outs[n] for n in names)


# ---------------------------------------------------------------- churn

def foo_doc(ns, name, dep, replicas):
    return ("apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: %s, "
            "namespace: %s}\nspec: {deploymentName: %s, replicas: %d}\n---\n" % (name, ns, dep, replicas))


class Churn:
    def __init__(self, prefix):
        self.prefix = prefix
        self.gen = 0
        self.nss = []
        self.foos = {}  # (ns, name) -> replicas
        self.claims = []  # (ns, claim Foo, foreign Deployment), oldest first
        self.next_id = 0
        self.ops = 0
        self.ramp_done = None  # when the population first reached FOOS
        for _ in range(NNS):
            self.new_ns()

    def new_ns(self):
        self.gen += 1
        ns = "%s-%d" % (self.prefix, self.gen)
        kubectl("create", "namespace", ns)
        self.nss.append(ns)
        return ns

    def apply(self, docs):
        if docs:
            # Server-side: one request per object (client-side apply reads each
            # first), so that the ramp to CHAOS_FOOS takes a minute or two, not most
            # of the run.
            kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                    stdin="".join(docs), timeout=300)
            self.ops += 1

    def resync(self):
        """Takes the population from the server: an apply or a delete cut short by a
        fault has left it different from what was asked."""
        p = kubectl("get", "foos", "-A", "--no-headers", "-o",
                    "custom-columns=NS:.metadata.namespace,N:.metadata.name,"
                    "R:.spec.replicas,DEL:.metadata.deletionTimestamp", timeout=120)
        if p.returncode != 0:
            return
        mine = set(self.nss)
        foos = {}
        for line in p.stdout.splitlines():
            f = line.split()
            if len(f) == 4 and f[0] in mine and f[1].startswith("f") and f[3] == "<none>":
                foos[(f[0], f[1])] = int(f[2]) if f[2].isdigit() else 1
        self.foos = foos

    def create(self, n):
        docs = []
        for _ in range(n):
            if len(self.foos) >= FOOS:
                break
            ns = rnd.choice(self.nss)
            self.next_id += 1
            name = "f%d" % self.next_id
            r = rnd.randint(1, 3)
            self.foos[(ns, name)] = r
            docs.append(foo_doc(ns, name, "d" + name[1:], r))
        self.apply(docs)

    def scale(self, n):
        docs = []
        for (ns, name) in rnd.sample(list(self.foos), min(n, len(self.foos))):
            r = rnd.randint(1, 3)
            self.foos[(ns, name)] = r
            docs.append(foo_doc(ns, name, "d" + name[1:], r))
        self.apply(docs)

    def delete(self, n):
        by_ns = {}
        for (ns, name) in rnd.sample(list(self.foos), min(n, len(self.foos))):
            del self.foos[(ns, name)]
            by_ns.setdefault(ns, []).append(name)
        for ns, names in by_ns.items():
            kubectl("-n", ns, "delete", "foo", "--wait=false", *names)
            self.ops += 1

    def drift(self):
        if not self.foos:
            return
        ns, name = rnd.choice(list(self.foos))
        dep = "d" + name[1:]
        if rnd.random() < 0.5:
            kubectl("-n", ns, "scale", "deploy", dep, "--replicas=%d" % rnd.randint(4, 6))
        else:
            kubectl("-n", ns, "delete", "deploy", dep, "--wait=false")
        self.ops += 1

    def foreign(self):
        ns = rnd.choice(self.nss)
        self.next_id += 1
        dep = "foreign%d" % self.next_id
        kubectl("-n", ns, "create", "deployment", dep, "--image=busybox")
        self.apply([foo_doc(ns, "claim%d" % self.next_id, dep, 1)])
        self.claims.append((ns, "claim%d" % self.next_id, dep))
        # Bounded, as every other part of the population.
        while len(self.claims) > max(10, FOOS // 100):
            ns, claim, dep = self.claims.pop(0)
            kubectl("-n", ns, "delete", "foo", claim, "--wait=false")
            kubectl("-n", ns, "delete", "deployment", dep, "--wait=false")
            self.ops += 2

    def replace_ns(self):
        ns = rnd.choice(self.nss)
        self.nss.remove(ns)
        for k in [k for k in self.foos if k[0] == ns]:
            del self.foos[k]
        self.claims = [c for c in self.claims if c[0] != ns]
        kubectl("delete", "namespace", ns, "--wait=false")
        self.new_ns()
        count_fault("namespace deleted")

    def run(self):
        last_ns = last_resync = time.time()
        while not churn_stop.is_set():
            try:
                if time.time() - last_resync > 60:
                    self.resync()
                    last_resync = time.time()
                if len(self.foos) < FOOS:
                    self.create(min(250, FOOS - len(self.foos)))
                    if len(self.foos) >= FOOS and self.ramp_done is None:
                        self.ramp_done = time.time()
                        log("population reached %d Foos" % FOOS)
                else:
                    k = rnd.random()
                    if k < 0.35:
                        self.scale(20)
                    elif k < 0.6:
                        self.delete(10)
                        self.create(10)
                    elif k < 0.85:
                        self.drift()
                    else:
                        self.foreign()
                    if time.time() - last_ns > 180:
                        self.replace_ns()
                        last_ns = time.time()
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                log("churn: %s" % e)
            churn_stop.wait(1.0)


# ---------------------------------------------------------------- faults

def fault_loop(daemons, proxies):
    kinds = ["apiserver restart", "etcd compaction", "proxy fault", "proxy fault",
             "kill -9 leader", "SIGTERM standby"]
    if IMPL == "go":
        kinds.remove("SIGTERM standby")  # one daemon, no standby
    while not stop.wait(rnd.uniform(15, 40)):
        kind = rnd.choice(kinds)
        try:
            if kind == "apiserver restart":
                r = local_ctl("restart-apiserver")
                if r.returncode != 0:
                    violation("apiserver restart failed: " + r.stderr[-300:])
            elif kind == "etcd compaction":
                local_ctl("compact")
            elif kind == "proxy fault":
                px = rnd.choice(proxies)
                f = rnd.choice(["latency 300", "stall", "reset 4096", "truncate 4096", "goaway",
                                "refuse"])
                kind = "proxy " + f.split()[0]
                r0 = proxy_requests(px)
                t0 = time.time()
                px.ctl(f)
                if f == "refuse":
                    px.ctl("reset 0")
                stop.wait(rnd.uniform(5, 15))
                with lock:
                    fault_reqs[0] += proxy_requests(px) - r0
                    fault_reqs[1] += time.time() - t0
                px.ctl("clear")
            elif kind == "kill -9 leader":
                lead = [d for d in daemons if d.leading()]
                if not lead:
                    continue
                lead[0].kill9()
                time.sleep(2)
                lead[0].start()
            elif kind == "SIGTERM standby":
                sb = [d for d in daemons if not d.leading()]
                if not sb:
                    continue
                sb[0].term()
                sb[0].start()
            count_fault(kind)
            log("fault: " + kind)
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
            log("fault %s: %s" % (kind, e))


def proxy_requests(px):
    m = re.search(r"requests=(\d+)", px.ctl("stats"))
    return int(m.group(1)) if m else 0


def sampler(daemons):
    while not stop.wait(5):
        for d in daemons:
            d.check_exit()
            d.sample()


# ---------------------------------------------------------------- verdict

def state():
    foos = kget("foos", "-A")
    deps = kget("deployments", "-A")
    return foos, deps


def unconverged(foos, deps):
    """Keys of Foos not converged, and Deployments controlled by a Foo that is gone."""
    by_key = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in deps}
    uids = {f["metadata"]["uid"] for f in foos}
    bad = set()
    for f in foos:
        md, spec = f["metadata"], f.get("spec", {})
        if md.get("deletionTimestamp"):
            continue
        key = (md["namespace"], md["name"])
        d = by_key.get((md["namespace"], spec.get("deploymentName", "")))
        conds = {c["type"]: c for c in f.get("status", {}).get("conditions", [])}
        if d is None:
            bad.add(key)
            continue
        owner = [o for o in d["metadata"].get("ownerReferences", []) if o.get("controller")]
        if not owner or owner[0]["uid"] != md["uid"]:
            # The Go original writes no condition: only the Deployment's side counts.
            if IMPL != "go" and conds.get("Ready", {}).get("reason") != "ErrResourceExists":
                bad.add(key)
            continue
        if d["spec"].get("replicas") != spec.get("replicas"):
            bad.add(key)
            continue
        if f.get("status", {}).get("availableReplicas", 0) != d.get("status", {}).get("availableReplicas", 0):
            bad.add(key)
    orphans = []
    for d in deps:
        for o in d["metadata"].get("ownerReferences", []):
            if o.get("kind") == "Foo" and o.get("controller") and o["uid"] not in uids \
                    and not d["metadata"].get("deletionTimestamp"):
                orphans.append("%s/%s" % (d["metadata"]["namespace"], d["metadata"]["name"]))
    return bad, orphans


def slope(points):
    n = len(points)
    if n < 3:
        return 0.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    den = sum((p[0] - mx) ** 2 for p in points)
    return 0.0 if den == 0 else sum((p[0] - mx) * (p[1] - my) for p in points) / den


def judge_growth(daemons, ramp_done):
    """Per incarnation, past warm-up: the figures of growth, and violations for
    those that lived JUDGE_MIN_S past it (see the docstring)."""
    out = []
    for d in daemons:
        for inc, pts in sorted(d.samples.items()):
            if not pts:
                continue
            start = max(pts[0][0] + WARM_S, ramp_done + 60)
            warm = [p for p in pts if p[0] >= start]
            if len(warm) < 6:
                continue
            secs = warm[-1][0] - warm[0][0]
            mins = [((p[0] - start) / 60, p) for p in warm]
            g = {"name": d.name, "inc": inc, "secs": secs, "judged": secs >= JUDGE_MIN_S,
                 "rss_slope": slope([(m, p[1]) for m, p in mins]),
                 "fd_slope": slope([(m, p[2]) for m, p in mins]),
                 "thr_slope": slope([(m, p[3]) for m, p in mins]),
                 "objs": warm[-1][4], "objs_slope": slope([(m, p[4]) for m, p in mins]),
                 "rss_end": warm[-1][1], "heap": None}
            half = [p for m, p in mins if m * 60 <= secs / 2]
            g["rss_peak1"] = max(p[1] for p in half)
            # fds and threads: a trend, and an end above the first half's highest (a
            # reconnect opens a socket for a moment; a leak keeps climbing).
            g["fd_up"] = warm[-1][2] - max(p[2] for p in half)
            g["thr_up"] = warm[-1][3] - max(p[3] for p in half)
            if warm[-1][5] >= 0:
                # The floor of each minute: a relist or a burst of work holds memory
                # for seconds; a leak raises the floor.
                floors = {}
                for m, p in mins:
                    k = int(m)
                    floors[k] = min(floors.get(k, p[5]), p[5])
                objs = {}
                for m, p in mins:
                    objs.setdefault(int(m), []).append(p[4])
                g["heap"] = warm[-1][5]
                g["heap_slope"] = slope([(k + 0.5, v) for k, v in sorted(floors.items())])
                mean_heap = sum(p[5] for p in warm) / len(warm)
                mean_objs = sum(p[4] for p in warm) / len(warm)
                per_obj = mean_heap / mean_objs if mean_objs > 0 else 0.0
                obj_slope = slope([(k + 0.5, sum(v) / len(v)) for k, v in sorted(objs.items())])
                # What the change in cached objects explains, at the mean bytes per
                # object, is not growth.
                g["heap_leak"] = g["heap_slope"] - obj_slope * per_obj
            out.append(g)
            if not g["judged"]:
                continue
            who = "%s.%d" % (d.name, inc)
            if g["heap"] is not None:
                if g["heap_leak"] > HEAP_SLOPE_MAX_KIB_MIN:
                    violation("%s: malloc's bytes in use grow %+.0f KiB/min beyond the cache's share"
                              % (who, g["heap_leak"]))
                limit = g["rss_peak1"] * RSS_END_OVER_PEAK[0] + RSS_END_OVER_PEAK[1]
                if g["rss_end"] > limit:
                    violation("%s: RSS at the end %.1f MiB, over %.1f MiB (its peak over the first "
                              "half of the window, +10%% +4 MiB)" % (who, g["rss_end"] / 1024, limit / 1024))
            elif g["rss_slope"] > RSS_SLOPE_MAX_KIB_MIN:
                violation("%s: RSS grows %+.0f KiB/min" % (who, g["rss_slope"]))
            if (g["fd_slope"] > FD_SLOPE_MAX_MIN and g["fd_up"] > 2) or \
                    (g["thr_slope"] > THREAD_SLOPE_MAX_MIN and g["thr_up"] > 0):
                violation("%s grows after warm-up: fds %+.2f/min, threads %+.2f/min"
                          % (who, g["fd_slope"], g["thr_slope"]))
    # The Go original has one daemon, killed like the leader, and no observer: its
    # growth is printed for comparison, judged only when an incarnation lived long.
    if IMPL != "go" and not any(g["judged"] for g in out):
        violation("no daemon incarnation lived %d s past warm-up: growth was not judged" % JUDGE_MIN_S)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    log("seed %d, %d s, %d Foos in %d namespaces, output in %s" % (SEED, SECS, FOOS, NNS, OUT))
    env = dict(line.strip().split("=", 1) for line in open(os.path.join(ROOT, ".local", "env"))
               if "=" in line)
    token = re.search(r"^\s*token:\s*(\S+)", open(os.path.join(ROOT, ".local", "kubeconfig")).read(),
                      re.M).group(1)
    upstream = "127.0.0.1:%s" % env["API_PORT"]
    suffix = "%04x" % rnd.randrange(1 << 16)
    le_ns = "chaos-le-" + suffix
    kubectl("create", "namespace", le_ns, check=True)
    names = ["a"] if IMPL == "go" else ["a", "b", "w"]
    proxies = [ProxyProc(n, upstream) for n in names]
    lease_nss = [le_ns, le_ns, "chaos-lw-" + suffix]
    if IMPL != "go":
        hold_lease(lease_nss[2])
    daemons = [Daemon(n, px.kubeconfig(token), ns) for n, px, ns in zip(names, proxies, lease_nss)]
    req0 = sum(proxy_requests(px) for px in proxies)
    for d in daemons:
        d.start()
    churn = Churn("chaos-" + suffix)
    t0 = time.time()
    threads = [threading.Thread(target=churn.run, daemon=True),
               threading.Thread(target=fault_loop, args=(daemons[:2], proxies), daemon=True),
               threading.Thread(target=sampler, args=(daemons,), daemon=True)]
    for t in threads:
        t.start()
    while time.time() - t0 < SECS:
        time.sleep(5)
    log("chaos over: stopping faults and churn (%d churn operations)" % churn.ops)
    stop.set()
    churn_stop.set()
    threads[0].join()
    threads[1].join()
    for px in proxies:
        px.ctl("clear")
    t_end = time.time()
    req_chaos = sum(proxy_requests(px) for px in proxies) - req0
    for d in daemons:
        d.check_exit()

    # Convergence after the last fault.
    first_ok = {}
    bad, orphans = set(), []
    while time.time() - t_end < QUIET:
        foos, deps = state()
        bad, orphans = unconverged(foos, deps)
        now = time.time() - t_end
        for f in foos:
            key = (f["metadata"]["namespace"], f["metadata"]["name"])
            if key not in bad and key not in first_ok:
                first_ok[key] = now
        if not bad and not orphans:
            break
        for d in daemons:
            d.check_exit()
            d.sample()
        time.sleep(3)
    if bad:
        violation("%d Foos not converged %d s after the last fault, e.g. %s" %
                  (len(bad), QUIET, sorted(bad)[:5]))
    if orphans:
        violation("%d Deployments controlled by a Foo that is gone, e.g. %s" % (len(orphans), orphans[:5]))
    times = sorted(first_ok.values())
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] if times else float("nan")
    converge_all = max(times) if times else float("nan")

    # A consistency round after the quiet period, on every informer of every daemon.
    div_total = 0
    for d in (daemons if IMPL != "go" else []):
        base = d.prom("informer_consistency_checks_total") or {}
        deadline = time.time() + CHECK_PERIOD_S * 4 + 30
        while time.time() < deadline:
            cur = d.prom("informer_consistency_checks_total") or {}
            if len(cur) >= 2 and all(cur.get(k, 0) > base.get(k, 0) for k in cur):
                break
            time.sleep(2)
        else:
            violation("%s: no consistency check round completed after the quiet period: %s" % (d.name, cur))
        div = d.prom("informer_consistency_divergent_objects") or {}
        if any(v != 0 for v in div.values()):
            violation("%s: the cache diverges from the server after the quiet period: %s" % (d.name, div))
    for d in daemons:
        for inc in range(1, d.incarnation + 1):
            p = os.path.join(OUT, "%s.%d.log" % (d.name, inc))
            try:
                text = open(p, errors="replace").read()
            except OSError:
                continue
            div_total += text.count('"Cache diverges from the server"')
            d.leader_changes += text.count('"Started leading"')

    # Events per Foo.
    evs = kget("events", "-A", "--field-selector", "involvedObject.kind=Foo")
    per = {}
    for e in evs:
        if not e["metadata"]["namespace"].startswith("chaos-" + suffix):
            continue
        k = (e["metadata"]["namespace"], e["involvedObject"]["name"])
        per[k] = per.get(k, 0) + 1
    ev_max = max(per.values()) if per else 0
    if ev_max > EVENTS_PER_FOO_MAX:
        violation("a Foo has %d Event objects (more than %d)" % (ev_max, EVENTS_PER_FOO_MAX))

    # Relists and watch restarts, leader changes, resource slopes.
    relists = restarts = 0
    for d in daemons:
        relists += sum((d.prom("informer_relists_total") or {}).values())
        restarts += sum((d.prom("informer_watch_restarts_total") or {}).values())
    slopes = judge_growth(daemons, churn.ramp_done or float("inf"))
    for d in daemons:
        if d.p.poll() is None:
            d.term()
    for px in proxies:
        px.p.terminate()
        px.p.wait()

    na = IMPL == "go"
    rows = [("controller", "Go sample-controller (one daemon)" if na else
             "this project (two daemons, leader election; observer w)"),
            ("seconds of chaos / Foos at the end", "%d / %d" % (SECS, len(first_ok) + len(bad))),
            ("churn operations (kubectl calls)", "%d" % churn.ops)]
    for k in sorted(faults):
        rows.append(("faults: " + k, "%d" % faults[k]))
    rows += [("requests through the proxies, per second of chaos", "%.2f" % (req_chaos / SECS)),
             ("... per second while a proxy fault lasted", "%.2f (%d in %.0f s)" % (
                 fault_reqs[0] / fault_reqs[1] if fault_reqs[1] else 0.0, fault_reqs[0],
                 fault_reqs[1])),
             ("relists (all daemons, last incarnations)", "n/a" if na else "%d" % relists),
             ("watch restarts (same)", "n/a" if na else "%d" % restarts),
             ("leader changes (Started leading)",
              "n/a" if na else "%d" % sum(d.leader_changes for d in daemons)),
             ("divergences reported during the run", "n/a" if na else "%d" % div_total),
             ("divergent objects at the end", "n/a (no consistency check)" if na else
              "0" if not any("diverges" in v for v in violations) else "see violations"),
             ("Foos converged after the last fault", "%d / %d" % (len(first_ok), len(first_ok) + len(bad))),
             ("p99 / max seconds to converge after the last fault", "%.1f / %.1f" % (p99, converge_all)),
             ("most Event objects for one Foo", "%d" % ev_max)]
    rows.append(("population reached CHAOS_FOOS after (s)",
                 "%.0f" % (churn.ramp_done - t0) if churn.ramp_done else "never"))
    w = max(len(r[0]) for r in rows)
    table = "\n".join("| %-*s | %s |" % (w, r[0], r[1]) for r in rows)
    # Growth past warm-up, one row per daemon incarnation.
    head = ("incarnation", "s past warm-up", "malloc in use MiB", "its floor KiB/min",
            "less the cache's share", "RSS MiB end / 1st-half peak", "RSS KiB/min", "fds/min",
            "threads/min", "cached objects", "objects/min")
    grow = [head, tuple("---" for _ in head)]
    for g in slopes:
        na_heap = g["heap"] is None
        grow.append(("%s.%d%s" % (g["name"], g["inc"], "" if g["judged"] else " (short)"),
                     "%.0f" % g["secs"], "n/a" if na_heap else "%.1f" % (g["heap"] / 1024),
                     "n/a" if na_heap else "%+.0f" % g["heap_slope"],
                     "n/a" if na_heap else "%+.0f" % g["heap_leak"],
                     "%.1f / %.1f" % (g["rss_end"] / 1024, g["rss_peak1"] / 1024),
                     "%+.0f" % g["rss_slope"], "%+.2f" % g["fd_slope"], "%+.2f" % g["thr_slope"],
                     "%d" % g["objs"], "%+.1f" % g["objs_slope"]))
    table += "\n\n" + "\n".join("| " + " | ".join(r) + " |" for r in grow)
    print("\n" + table + "\n")
    with open(os.path.join(OUT, "table.md"), "w") as f:
        f.write(table + "\n")
    for ns in churn.nss + sorted(set(lease_nss[:len(names)])):
        kubectl("delete", "namespace", ns, "--wait=false")
    if violations:
        print("chaos: FAILED with %d violations (seed %d):" % (len(violations), SEED))
        for v in violations:
            print("  - " + v)
        return 1
    print("chaos: passed (seed %d)" % SEED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
