#!/usr/bin/env bash
# The controller as a pod under the real kubelet (hack/node-up.sh): the time from
# `kubectl apply -k hack/node` to two Ready pods and a held Lease, and the leader
# pod's memory working set as the kubelet reports it (/stats/summary, the figure an
# OOM kill and `kubectl top` go by), idle and with BENCH_NODE_FOOS Foos (default
# 1,000) all available. Prints figures; asserts nothing about speed. Needs root (the
# node does); prints one line and exits 0 otherwise. Starts the node if it is not
# up and stops it afterwards if it was started here (BENCH_KEEP_NODE=1 keeps it).
#
# BENCH_NODE_IMPLS="c go cr rs" (any of them, in the order given) compares instead
# the C daemon (c) with Kubernetes' Go sample-controller (go), the controller-runtime
# peer (cr) and the kube-rs peer (rs) as pods, one after the other, each deployed
# alike by hack/node/compare (one replica, leader election off, no probes, one
# ClusterRole with what the four need, the same resources) with the flags
# bench/lib.sh's ctl_flags gives every benchmark's controllers (one namespace of
# its own, client QPS/burst BENCH_QPS/BENCH_BURST, default 200/400) and the
# in-cluster configuration. The peers' images are built by `bash hack/image.sh
# peer-<impl>` (their binaries are the host benchmarks', bench/build_*_controller.sh)
# and imported into the node's containerd here. For each: the Deployment is given
# the image, the args and one replica; the time to the pod Ready and to "Started
# workers" in its log (caches synced); after BENCH_NODE_SETTLE seconds (default 20:
# the kubelet samples its stats every 10-15 s) the figures idle; then
# BENCH_NODE_FOOS Foos, created as above; once all are available and after the same
# settle time the figures again; then its namespace, the controller's namespace and
# its ClusterRole are deleted and waited for before the next one starts. Figures:
# the pod's working set (kubelet /stats/summary), and of the container's main
# process read on the host (its PID from containerd's task list, checked against
# its cgroup) RSS and RssAnon (/proc/PID/status) and PSS (/proc/PID/smaps_rollup);
# one table with a column per implementation.
#
# The page cache is dropped (`sync; echo 1 > /proc/sys/vm/drop_caches`) just before
# each pod starts, so that all four start from the same state: a file page is
# charged to the memory cgroup (v1 and v2 alike) of the first process that touches
# it, so the binary's and its libraries' pages, unpacked by containerd at import,
# would otherwise stay charged to whoever read them before (containerd, an earlier
# run) and be missing from this pod's working set, or not, by history. (It drops
# every clean unmapped page on the machine, not only these.)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
N="${BENCH_NODE_FOOS:-1000}"
CHUNK=200
IMPLS="${BENCH_NODE_IMPLS:-}"
QPS="${BENCH_QPS:-200}"
BURST="${BENCH_BURST:-400}"
SETTLE="${BENCH_NODE_SETTLE:-20}"
for impl in $IMPLS; do
	case "$impl" in c | go | cr | rs) ;; *)
		echo "bench_node: BENCH_NODE_IMPLS: unknown implementation '$impl' (c, go, cr, rs)" >&2
		exit 2
		;;
	esac
done

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
# The trap runs under errexit: a command that fails in it would end the script there,
# with status 1 and the node left up (the compare mode has deleted these namespaces
# already, so a plain delete fails). Each step is allowed to fail; node-down's own
# failure is reported.
cleanup() {
	[ -z "$ns" ] || kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	kubectl delete namespace sample-controller --ignore-not-found --wait=false >/dev/null 2>&1 || true
	kubectl delete clusterrolebinding,clusterrole sample-controller --ignore-not-found >/dev/null 2>&1 || true
	if [ "$started" = 1 ] && [ -z "${BENCH_KEEP_NODE:-}" ]; then
		bash hack/node-down.sh >/tmp/bench-node-down.log 2>&1 ||
			{ echo "bench_node: hack/node-down.sh failed:" >&2; tail -n 20 /tmp/bench-node-down.log >&2; }
	fi
}
trap cleanup EXIT
# shellcheck source=/dev/null
. .local/env
# shellcheck source=/dev/null
. .local/node/env
export KUBECONFIG="$LOCAL_KUBECONFIG"
# shellcheck source=hack/node/lib.sh
. hack/node/lib.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh

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
# load_foos: N Foos into $ns, CHUNK a file, one `kubectl apply` after the other;
# prints bench/wait_ready.py's line once all are available.
load_foos() {
	local work t1
	work=$(mktemp -d)
	gen_foos 1 "$N" "$work"
	t1=$(date +%s.%N)
	for f in "$work"/foos-*.yaml; do kubectl -n "$ns" apply -f "$f" >/dev/null; done
	rm -rf "$work"
	python3 bench/wait_ready.py "$ns" "$N" "$t1" 900
}

# ---- The C daemon as deploy/ installs it: two replicas, a leader.
leader_pair() {
	local t0 t_ready t_lease pod idle loaded restarts
	t0=$(now)
	kubectl apply -k hack/node >/dev/null
	kubectl -n sample-controller rollout status deploy/sample-controller --timeout=180s >/dev/null
	t_ready=$(elapsed "$t0")
	for _ in $(seq 1 120); do [ -n "$(leader)" ] && break; sleep 0.5; done
	t_lease=$(elapsed "$t0")
	pod=$(leader)
	[ -n "$pod" ] || { echo "bench_node: no leader" >&2; exit 1; }
	# The kubelet's stats are sampled every ~10-15 s: let them catch up with idle.
	sleep 20
	idle=$(working_set "$pod")

	ns=$(new_ns bench-node)
	load_foos >/tmp/bench-node-ready.txt
	sleep 20
	loaded=$(working_set "$pod")
	restarts=$(kubectl -n sample-controller get pod "$pod" -o jsonpath='{.status.containerStatuses[0].restartCount}')

	printf '%-52s %s\n' "figure (controller pod on real-node)" "value"
	printf '%-52s %s\n' "apply -k to 2 pods Ready, s" "$t_ready"
	printf '%-52s %s\n' "apply -k to Lease held, s" "$t_lease"
	printf '%-52s %s\n' "leader working set idle, MiB (kubelet /stats/summary)" "$idle"
	printf '%-52s %s\n' "$N Foos available, s since first apply" "$(tr '\n' ' ' </tmp/bench-node-ready.txt)"
	printf '%-52s %s\n' "leader working set with $N Foos, MiB" "$loaded"
	printf '%-52s %s\n' "leader container restarts" "$restarts"
}

# ---- The four implementations side by side (BENCH_NODE_IMPLS).
declare -A NAME=([c]=C [go]=Go [cr]=controller-rt [rs]=kube-rs)
declare -A IMAGE
declare -A R # R[impl,figure] = value

# gone KIND NAME: true once the object no longer exists.
gone() { ! kubectl get "$1" "$2" >/dev/null 2>&1; }
# undeploy: the controller's namespace and ClusterRole deleted, and waited for
# (its pod gone), then the Foos' namespace (everything in it) likewise.
undeploy() {
	kubectl delete namespace sample-controller --wait=false >/dev/null 2>&1 || true
	kubectl delete clusterrolebinding,clusterrole sample-controller --ignore-not-found >/dev/null
	until_ok 300 gone namespace sample-controller || { echo "bench_node: namespace sample-controller still there after 300 s" >&2; exit 1; }
	if [ -n "$ns" ]; then
		kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
		until_ok 900 gone namespace "$ns" || { echo "bench_node: namespace $ns still there after 900 s" >&2; exit 1; }
		ns=""
	fi
}
# the_pod: the name of the controller's one pod.
the_pod() {
	local pods
	pods=$(kubectl -n sample-controller get pods -l app=sample-controller -o jsonpath='{.items[*].metadata.name}')
	[ "$(wc -w <<<"$pods")" = 1 ] || { echo "bench_node: expected one controller pod, found: '$pods'" >&2; return 1; }
	echo "$pods"
}
# started POD: true once its log says "Started workers" (every implementation
# prints it when its caches are synced).
started() { grep -q "Started workers" <<<"$(kubectl -n sample-controller logs "$1" 2>/dev/null)"; }
# main_pid POD: the host PID of the pod's container's main process, from containerd's
# task list (a container's task ID is its ID), checked against the process's cgroup
# (the kubelet's cgroupfs driver names the container's cgroup after that ID).
main_pid() {
	local cid tasks pid
	cid=$(kubectl -n sample-controller get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')
	cid=${cid#containerd://}
	tasks=$(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls)
	pid=$(awk -v id="$cid" '$1 == id { print $2 }' <<<"$tasks")
	if [ -z "$cid" ] || [ -z "$pid" ] || ! grep -q "$cid" "/proc/$pid/cgroup" 2>/dev/null; then
		echo "bench_node: no host process for container '$cid' of pod $1 (containerd's tasks: $tasks)" >&2
		return 1
	fi
	echo "$pid"
}
# figures KEY: the pod's working set and its main process's RSS, RssAnon and PSS
# (MiB) into R[impl,KEYws], KEYrss, KEYanon, KEYpss.
figures() {
	local pid ws=""
	# A new pod is in the summary after the kubelet's next sampling.
	for _ in $(seq 1 60); do
		ws=$(working_set "$pod") || ws=""
		[ -n "$ws" ] && break
		sleep 1
	done
	R[$impl,${1}ws]="${ws:--}"
	pid=$(main_pid "$pod") || return 0 # (said why; its figures stay "-")
	R[$impl,${1}rss]=$(status_mib "$pid" VmRSS)
	R[$impl,${1}anon]=$(status_mib "$pid" RssAnon)
	R[$impl,${1}pss]=$(pss_mib "$pid")
}
say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

compare_one() {
	local impl="$1" args patch t0 out
	ns=$(new_ns bench-node)
	kubectl apply -k hack/node/compare >/dev/null
	mapfile -t args < <(ctl_flags "$impl" "$ns")
	patch=$(python3 -c 'import json, sys
print(json.dumps([
    {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": sys.argv[1]},
    {"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": sys.argv[2:]},
    {"op": "replace", "path": "/spec/replicas", "value": 1}]))' "${IMAGE[$impl]}" "${args[@]}")
	# Every pod starts from the same page cache (see the header).
	sync
	echo 1 >/proc/sys/vm/drop_caches
	t0=$(now)
	kubectl -n sample-controller patch deployment sample-controller --type=json -p "$patch" >/dev/null
	if ! kubectl -n sample-controller rollout status deploy/sample-controller --timeout=180s >/dev/null; then
		echo "bench_node: $impl: no Ready pod in 180 s:" >&2
		kubectl -n sample-controller get pods -o wide >&2 || true
		kubectl -n sample-controller logs -l app=sample-controller --tail=20 >&2 || true
		exit 1
	fi
	R[$impl,ready]=$(elapsed "$t0")
	pod=$(the_pod)
	until_ok 300 started "$pod" || { echo "bench_node: $impl: no 'Started workers' in 300 s:" >&2; kubectl -n sample-controller logs "$pod" | tail -n 20 >&2; exit 1; }
	R[$impl,synced]=$(elapsed "$t0")
	say "[$impl] pod $pod Ready after ${R[$impl,ready]} s, caches synced after ${R[$impl,synced]} s"
	sleep "$SETTLE"
	figures idle
	say "[$impl] idle: working set ${R[$impl,idlews]} MiB, RSS ${R[$impl,idlerss]} (anon ${R[$impl,idleanon]}, PSS ${R[$impl,idlepss]}) MiB"
	out=$(load_foos) || true
	R[$impl,avail]=$(sed -n 's/.*avail=\([^ ]*\).*/\1/p' <<<"$out")
	say "[$impl] $N Foos: $out"
	sleep "$SETTLE"
	figures load
	R[$impl,restarts]=$(kubectl -n sample-controller get pod "$pod" -o jsonpath='{.status.containerStatuses[0].restartCount}')
	say "[$impl] $N Foos: working set ${R[$impl,loadws]} MiB, RSS ${R[$impl,loadrss]} (anon ${R[$impl,loadanon]}, PSS ${R[$impl,loadpss]}) MiB; restarts ${R[$impl,restarts]}"
	undeploy
}

compare() {
	local impl row
	for impl in $IMPLS; do
		if [ "$impl" = c ]; then
			IMAGE[c]="$NODE_IMAGE"
			continue
		fi
		# Built anew when the peer's binary changed; otherwise from buildah's layer cache.
		bash hack/image.sh "peer-$impl" >/tmp/bench-node-image-"$impl".log 2>&1 ||
			{ tail -n 30 /tmp/bench-node-image-"$impl".log >&2; exit 1; }
		IMAGE[$impl]=$(node_import_image "build/image/peer-$impl-sample-controller.oci.tar")
	done
	undeploy
	for impl in $IMPLS; do
		say "[$impl] ${IMAGE[$impl]}"
		compare_one "$impl"
	done

	echo "controller pods on $NODE_NAME, one after the other, each alone (hack/node/compare, in-cluster config):"
	for impl in $IMPLS; do echo "  ${NAME[$impl]}: ${IMAGE[$impl]} $(ctl_flags "$impl" NS | tr '\n' ' ')"; done
	row() {
		printf '%-52s' "$1"
		shift
		printf ' %14s' "$@"
		printf '\n'
	}
	fig() {
		local vals=() i
		for i in $IMPLS; do vals+=("${R[$i,$2]:--}"); done
		row "$1" "${vals[@]}"
	}
	local names=()
	for impl in $IMPLS; do names+=("${NAME[$impl]}"); done
	row "figure" "${names[@]}"
	fig "patched to pod Ready (s)" ready
	fig "  to \"Started workers\" in its log (s)" synced
	fig "idle: working set (MiB, kubelet /stats/summary)" idlews
	fig "  main process RSS (MiB, /proc/PID/status)" idlerss
	fig "  RssAnon (MiB)" idleanon
	fig "  PSS (MiB, /proc/PID/smaps_rollup)" idlepss
	fig "$N Foos available (s since the first apply)" avail
	fig "$N Foos: working set (MiB)" loadws
	fig "  main process RSS (MiB)" loadrss
	fig "  RssAnon (MiB)" loadanon
	fig "  PSS (MiB)" loadpss
	fig "container restarts" restarts
}

if [ -z "$IMPLS" ]; then
	leader_pair
else
	compare
fi
