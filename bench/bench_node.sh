#!/usr/bin/env bash
# The controller as a pod under the real kubelet (hack/node-up.sh): the time from
# `kubectl apply -k hack/node` to two Ready pods and a held Lease, and the leader
# pod's memory working set as the kubelet reports it (/stats/summary, the figure an
# OOM kill and `kubectl top` go by), idle and with BENCH_NODE_FOOS Foos (default
# 1,000) all available. Prints figures; asserts nothing about speed. Needs root (the
# node does); prints one line and exits 0 otherwise. Starts the node if it is not
# up and stops it afterwards if it was started here (BENCH_KEEP_NODE=1 keeps it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
N="${BENCH_NODE_FOOS:-1000}"
CHUNK=200

if [ "$(id -u)" != 0 ]; then
	echo "bench_node: skipped: not root (hack/node-up.sh needs root for its bridge, iptables rules and cgroups)"
	exit 0
fi
started=0
if [ ! -f .local/node/env ]; then
	bash hack/node-up.sh >/tmp/bench-node-up.log 2>&1 || { tail -n 30 /tmp/bench-node-up.log; exit 1; }
	started=1
fi
ns=""
cleanup() {
	[ -n "$ns" ] && kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1
	kubectl delete namespace sample-controller --wait=false >/dev/null 2>&1
	kubectl delete clusterrolebinding,clusterrole sample-controller --ignore-not-found >/dev/null 2>&1
	if [ "$started" = 1 ] && [ -z "${BENCH_KEEP_NODE:-}" ]; then bash hack/node-down.sh >/dev/null 2>&1; fi
}
trap cleanup EXIT
# shellcheck source=/dev/null
. .local/env
# shellcheck source=/dev/null
. .local/node/env
export KUBECONFIG="$LOCAL_KUBECONFIG"

now_ms() { date +%s%3N; }
leader() {
	local h
	h=$(kubectl -n sample-controller get lease sample-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true)
	[ -n "$h" ] && echo "${h%_*}"
}
# working_set POD: MiB, from the kubelet's summary API through the API server.
working_set() {
	kubectl get --raw "/api/v1/nodes/$NODE_NAME/proxy/stats/summary" | python3 -c '
import json, sys
for p in json.load(sys.stdin)["pods"]:
    if p["podRef"]["name"] == sys.argv[1]:
        print("%.1f" % (sum(c["memory"]["workingSetBytes"] for c in p["containers"]) / 1048576))' "$1"
}

t0=$(now_ms)
kubectl apply -k hack/node >/dev/null
kubectl -n sample-controller rollout status deploy/sample-controller --timeout=180s >/dev/null
t_ready=$(($(now_ms) - t0))
for _ in $(seq 1 120); do [ -n "$(leader)" ] && break; sleep 0.5; done
t_lease=$(($(now_ms) - t0))
pod=$(leader)
[ -n "$pod" ] || { echo "bench_node: no leader" >&2; exit 1; }
# The kubelet's stats are sampled every ~10-15 s: let them catch up with idle.
sleep 20
idle=$(working_set "$pod")

ns="bench-node-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
kubectl create namespace "$ns" >/dev/null
for _ in $(seq 1 120); do kubectl -n "$ns" get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done
work=$(mktemp -d)
awk -v n="$N" -v chunk="$CHUNK" -v dir="$work" 'BEGIN {
	for (i = 1; i <= n; i++) {
		f = sprintf("%s/foos-%06d.yaml", dir, int((i - 1) / chunk))
		printf "---\napiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n" \
			"metadata:\n  name: foo-%05d\nspec:\n  deploymentName: foo-%05d\n" \
			"  replicas: 1\n", i, i > f
	}
}'
t1=$(date +%s.%N)
for f in "$work"/foos-*.yaml; do kubectl -n "$ns" apply -f "$f" >/dev/null; done
rm -rf "$work"
python3 bench/wait_ready.py "$ns" "$N" "$t1" 900 >/tmp/bench-node-ready.txt
sleep 20
loaded=$(working_set "$pod")
restarts=$(kubectl -n sample-controller get pod "$pod" -o jsonpath='{.status.containerStatuses[0].restartCount}')

printf '%-52s %s\n' "figure (controller pod on real-node)" "value"
printf '%-52s %s\n' "apply -k to 2 pods Ready, ms" "$t_ready"
printf '%-52s %s\n' "apply -k to Lease held, ms" "$t_lease"
printf '%-52s %s\n' "leader working set idle, MiB (kubelet /stats/summary)" "$idle"
printf '%-52s %s\n' "$N Foos available, s since first apply" "$(cat /tmp/bench-node-ready.txt | tr '\n' ' ')"
printf '%-52s %s\n' "leader working set with $N Foos, MiB" "$loaded"
printf '%-52s %s\n' "leader container restarts" "$restarts"
