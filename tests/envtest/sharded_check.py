#!/usr/bin/env python3
"""Checks for tests/envtest/sharded.sh (the sharded sample-controller).

  sharded_check.py converged FOOS.json DEPLOYS.json
      every Foo has its Deployment (spec.replicas, controlled by the Foo's uid) and a
      status for its generation; prints what is missing (the first few), exit 1.
  sharded_check.py caches GATE FOOS.json METRICS...
      each replica's Foo and Deployment caches hold exactly the objects of the
      namespaces whose FNV-1a hash falls in the buckets it owns (from its
      ckube_shard_bucket_owned ranges), the buckets are disjoint and cover
      everything, and its informers say the server filtered (GATE on) or that it
      did not (off), and each holds between half and one and a half times 1/N of
      the Foos. Prints each replica's share.
"""
import json
import os
import re
import sys


def fnv1a(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def converged(foos_path, deploys_path):
    foos = json.load(open(foos_path))["items"]
    deps = {(d["metadata"]["namespace"], d["metadata"]["name"]): d
            for d in json.load(open(deploys_path))["items"]}
    bad = []
    for f in foos:
        ns, name = f["metadata"]["namespace"], f["metadata"]["name"]
        spec, st = f.get("spec", {}), f.get("status", {})
        d = deps.get((ns, spec.get("deploymentName")))
        if d is None:
            bad.append(f"{ns}/{name}: no Deployment {spec.get('deploymentName')}")
            continue
        refs = [r for r in d["metadata"].get("ownerReferences", []) if r.get("controller")]
        if not refs or refs[0]["uid"] != f["metadata"]["uid"]:
            bad.append(f"{ns}/{name}: Deployment not controlled by it")
        elif d["spec"].get("replicas") != spec.get("replicas", 1):
            bad.append(f"{ns}/{name}: Deployment has {d['spec'].get('replicas')} replicas, "
                       f"want {spec.get('replicas')}")
        elif st.get("observedGeneration") != f["metadata"]["generation"]:
            bad.append(f"{ns}/{name}: status for generation {st.get('observedGeneration')}, "
                       f"want {f['metadata']['generation']}")
    print(f"converged: {len(foos) - len(bad)} of {len(foos)} Foos")
    for b in bad[:5]:
        print("  " + b)
    return 1 if bad or not foos else 0


SAMPLE = re.compile(r'^([a-z_]+)\{(.*)\} (\S+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')


def metrics(path):
    out = []
    for line in open(path):
        m = SAMPLE.match(line.strip())
        if m:
            out.append((m.group(1), dict(LABEL.findall(m.group(2))), float(m.group(3))))
    return out


def dump_keys(path):
    """A replica's cache dump (--cache-dump-file): {resource: set of keys}."""
    out = {}
    for line in open(path):
        res, _, key = line.strip().partition(" ")
        if key:
            out.setdefault(res, set()).add(key)
    return out


def caches(gate, foos_path, metric_paths):
    per_ns, foo_keys, dumped = {}, set(), set()
    for f in json.load(open(foos_path))["items"]:
        ns = f["metadata"]["namespace"]
        per_ns[ns] = per_ns.get(ns, 0) + 1
        foo_keys.add(ns + "/" + f["metadata"]["name"])
    total = sum(per_ns.values())
    want_mode = 2 if gate == "on" else 3
    seen_ranges, bad, shares = [], [], []
    for path in metric_paths:
        ranges, objs, modes = [], {}, {}
        for name, labels, v in metrics(path):
            if name == "ckube_shard_bucket_owned":
                ranges.append((int(labels["start"], 16), int(labels["end"], 16) or 1 << 64))
            elif name == "informer_objects":
                objs[labels["resource"]] = v
            elif name == "informer_shard_mode":
                modes[labels["resource"]] = v
        want = sum(n for ns, n in per_ns.items()
                   if any(a <= fnv1a(ns) < b for a, b in ranges))
        got = objs.get("foos.samplecontroller.k8s.io", -1)
        deps = objs.get("deployments.apps", -1)
        shares.append(f"{path.rsplit('/', 1)[-1]}: {len(ranges)} buckets, {int(got)} Foos "
                      f"cached (want {want}), {int(deps)} Deployments")
        # Balance: about 1/N of the objects each (namespaces that differ only at
        # the end, as app-1 ... app-60, fall into one or two equal ranges: the
        # boundaries must follow the hashes). Half to one and a half times 1/N.
        fair = total / len(metric_paths)
        if not 0.5 * fair <= got <= 1.5 * fair:
            bad.append(f"{path}: {int(got)} Foos, not about 1/{len(metric_paths)} of {total}")
        if got != want or deps != want:
            bad.append(f"{path}: {int(got)} Foos and {int(deps)} Deployments cached, "
                       f"want {want} each")
        # The objects themselves (the replica's dump beside its metrics, m1.txt ->
        # m1.dump, when there is one): every key's namespace in its ranges.
        dump = path.rsplit(".", 1)[0] + ".dump"
        if os.path.exists(dump):
            for res, keys in dump_keys(dump).items():
                for key in keys:
                    ns = key.split("/", 1)[0]
                    if not any(a <= fnv1a(ns) < b for a, b in ranges):
                        bad.append(f"{dump}: {res} {key} cached, outside its buckets")
                        break
                if res == "foos.samplecontroller.k8s.io":
                    dumped |= keys
                    if len(keys) != got:
                        bad.append(f"{dump}: {len(keys)} Foos dumped, {int(got)} counted")
        # Gate on: nothing may have come from outside the selector; the Foos, listed
        # non-empty, prove the server filtered (Deployments, created after the
        # first lists, may stay "unknown": an empty list proves nothing). Gate off:
        # the others' objects arrived and were dropped.
        for res, m in modes.items():
            if gate == "on" and (m == 3 or (res.startswith("foos.") and want > 0 and m != 2)):
                bad.append(f"{path}: {res} shard mode {int(m)}, want 2 (server-side)")
            if gate != "on" and want > 0 and m != 3:
                bad.append(f"{path}: {res} shard mode {int(m)}, want 3 (client-side)")
        seen_ranges += ranges
    seen_ranges.sort()
    pos = 0
    for a, b in seen_ranges:
        if a != pos:
            bad.append(f"buckets do not tile the hash space at 0x{pos:016x} (next 0x{a:016x})")
            break
        pos = b
    if pos != 1 << 64 and not bad:
        bad.append(f"buckets end at 0x{pos:016x}")
    if dumped and dumped != foo_keys:
        bad.append(f"the dumps hold {len(dumped)} Foos, {len(dumped & foo_keys)} of the "
                   f"{len(foo_keys)} there are")
    print(f"caches ({total} Foos, gate {gate}): " + "; ".join(shares))
    for b in bad[:8]:
        print("  " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "converged":
        sys.exit(converged(sys.argv[2], sys.argv[3]))
    if len(sys.argv) >= 5 and sys.argv[1] == "caches":
        sys.exit(caches(sys.argv[2], sys.argv[3], sys.argv[4:]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
