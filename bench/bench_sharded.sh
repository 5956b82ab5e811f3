#!/usr/bin/env bash
# Sharded sample-controller (--shards-by=namespace, docs/sharding.md): 1, 2 and 4
# active replicas on $SHARD_FOOS Foos (10,000; 100,000 is not tried: see
# bench/RESULTS.md) in $SHARD_NS namespaces named app-1 ... app-N, on a control plane
# with ShardedListAndWatch on (the server filters) and again with it off (every
# replica receives everything and filters itself), plus one unsharded leader
# (--leader-elect) for reference. Prints a table and writes $OUT/sharded.csv and,
# with gnuplot, $OUT/sharded.png. Asserts nothing about speed; exits non-zero only if
# a run could not be made.
#
# The control plane is ckube-envtest's etcd + kube-apiserver (its own, on free
# ports; the local control plane of the other benchmarks is not touched): no
# deployment controller runs, so nothing becomes available, and "done" is when every
# Foo has its Deployment (wait_ready.py --owned), measured from the replicas' start.
# Every run starts from the same state: the Foos and Deployments of the run before are
# deleted (a delete-collection of each per namespace) and the Foos made anew
# (bench/mkfoos.py), so each Foo costs every run the same writes (its Deployment,
# its status, an event).
#
# Per replica, at "done": its share of the Foos (informer_objects), peak RSS
# (VmHWM), CPU seconds (user + system), response body bytes read
# (rest_client_response_body_bytes_total), requests (rest_client_requests_total) and
# of those to Leases. The replicas run the release build with
# --kube-api-qps=200 --kube-api-burst=400 (the control plane, not the client's
# limiter, is what is measured) and the default lease timings (15 s / 10 s / 2 s).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
FOOS=${SHARD_FOOS:-10000}
NS=${SHARD_NS:-100}
REPLICAS=${SHARD_REPLICAS:-1 2 4}
GATES=${SHARD_GATES:-true false}
OUT=${BENCH_OUT:-$root/build/bench-out}/sharded
BIN="$root/bin/sample-controller"
ENVTEST="$root/bin/ckube-envtest"
mkdir -p "$OUT"
rm -rf "$OUT/run"
mkdir -p "$OUT/run/envs"
export CKUBE_ENVTEST_STATE_DIR="$OUT/run/envs"

say() { echo "bench_sharded: $*" >&2; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
[ -x "$BIN" ] && [ -x "$ENVTEST" ] || { say "build first (make all)"; exit 1; }

pids=() proxy="" waiter=""
cleanup() {
	local p
	for p in "${pids[@]}" $proxy $waiter; do kill -9 "$p" 2>/dev/null; done
	"$ENVTEST" stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

metric_sum() { # metric_sum FILE NAME [LABEL-MATCH]: the sum of NAME's samples
	awk -v n="$2" -v m="${3:-}" '
		index($1, n "{") == 1 || $1 == n { if (m == "" || index($1, m)) s += $NF }
		END { printf "%.0f", s }' "$1"
}
# fresh_foos: no Deployment and no Foo left (a delete-collection of each per
# namespace, through the kubectl proxy), then the Foos anew.
fresh_foos() {
	local i r
	none() { [ "$(kubectl get "$1" -A --no-headers 2>/dev/null | wc -l)" = 0 ]; }
	for r in apps/v1/namespaces/%s/deployments samplecontroller.k8s.io/v1alpha1/namespaces/%s/foos; do
		for i in $(seq 1 "$NS"); do
			# shellcheck disable=SC2059
			curl -sf -o /dev/null -X DELETE "$PROXY/apis/$(printf "$r" "app-$i")" ||
				{ say "delete-collection $r in app-$i failed"; return 1; }
		done
	done
	until_ok 120 none deployments || { say "Deployments still there"; return 1; }
	until_ok 120 none foos || { say "Foos still there"; return 1; }
	python3 bench/mkfoos.py "$PROXY" app- "$NS" "$FOOS" >&2 ||
		{ say "creating the Foos failed"; return 1; }
}

# run GATE LABEL N FLAGS...: N replicas with FLAGS; one CSV row per replica.
run() {
	local gate=$1 label=$2 n=$3 i t0 done_s port rc=0 owned
	shift 3
	pids=() ports=()
	t0=$(date +%s.%N)
	for i in $(seq 1 "$n"); do
		port=$(free_port)
		ports+=("$port")
		"$BIN" --kubeconfig "$KUBECONFIG" --metrics-bind-address="127.0.0.1:$port" \
			--health-probe-bind-address="127.0.0.1:$port" --metrics-secure=false \
			--leader-elect-resource-namespace=default --kube-api-qps=200 --kube-api-burst=400 \
			"$@" >"$OUT/run/$label-$n-$i.log" 2>&1 &
		pids+=($!)
	done
	# In the background, so that a signal to this script is handled at once.
	python3 bench/wait_ready.py - "$FOOS" "$t0" 900 --owned >"$OUT/run/owned.out" &
	waiter=$!
	wait "$waiter" || rc=1
	waiter=""
	owned=$(cat "$OUT/run/owned.out")
	done_s=${owned#owned=}
	for i in $(seq 0 $((n - 1))); do
		local m="$OUT/run/m-$label-$n-$i.txt" p=${pids[$i]}
		curl -sf --max-time 5 "http://127.0.0.1:${ports[$i]}/metrics" >"$m" || { say "no metrics from replica $i"; rc=1; }
		echo "$gate,$label,$n,$((i + 1)),$done_s,$(metric_sum "$m" informer_objects 'resource="foos.samplecontroller.k8s.io"'),$(status_mib "$p" VmHWM),$(ticks_to_s "$(cpu_ticks "$p")"),$(metric_sum "$m" rest_client_response_body_bytes_total),$(metric_sum "$m" rest_client_requests_total),$(metric_sum "$m" rest_client_resource_requests_total 'resource="leases"')" >>"$OUT/sharded.csv"
	done
	for i in "${pids[@]}"; do kill -TERM "$i" 2>/dev/null; done
	for i in "${pids[@]}"; do wait "$i" 2>/dev/null; done
	pids=()
	[ $rc = 0 ] || { say "$label $n replicas: $owned"; tail -n 5 "$OUT/run/$label-$n-"*.log >&2; }
	return $rc
}

echo "gate,mode,replicas,replica,done_s,foos_cached,vmhwm_mib,cpu_s,body_bytes,requests,lease_requests" >"$OUT/sharded.csv"
rc=0
for gate in $GATES; do
	envtest_up -feature-gates "ShardedListAndWatch=$gate" || { say "ckube-envtest start (gate $gate) failed"; exit 1; }
	proxy_up || { say "kubectl proxy did not start"; exit 1; }
	if [ "$gate" = true ]; then
		fresh_foos || exit 1
		run "$gate" leader 1 --leader-elect || rc=1
	fi
	for n in $REPLICAS; do
		fresh_foos || exit 1
		run "$gate" sharded "$n" --shards-by=namespace || rc=1
	done
	kill "$proxy"
	wait "$proxy" 2>/dev/null
	proxy=""
	"$ENVTEST" stop || rc=1
done

# The table: per run, the time and the per-replica mean and max.
python3 - "$OUT/sharded.csv" "$FOOS" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
runs = {}
for r in rows:
    runs.setdefault((r["gate"], r["mode"], int(r["replicas"])), []).append(r)
print("%-6s %-8s %3s %7s %12s %11s %9s %14s %9s %7s" % (
    "gate", "mode", "N", "done s", "Foos/replica", "peak MiB", "CPU s", "MiB received", "requests", "leases"))
for (gate, mode, n), rs in runs.items():
    def f(k, scale=1.0):
        return [float(r[k]) / scale for r in rs]

    def span(k, fmt, scale=1.0):
        lo, hi = min(f(k, scale)), max(f(k, scale))
        return fmt % lo if fmt % lo == fmt % hi else (fmt % lo) + "-" + (fmt % hi)
    print("%-6s %-8s %3d %7s %12s %11s %9s %14s %9d %7d" % (
        "on" if gate == "true" else "off", mode, n, rs[0]["done_s"],
        span("foos_cached", "%.0f"), span("vmhwm_mib", "%.0f"), span("cpu_s", "%.1f"),
        span("body_bytes", "%.1f", 1048576.0), sum(f("requests")), sum(f("lease_requests"))))
print("(N replicas; per-replica figures as min-max; requests and leases summed over the replicas)")
PY

if ! command -v gnuplot >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 || say "no gnuplot: no plot"
fi
if command -v gnuplot >/dev/null; then
	# Per-replica means against N, server-side against client-side filtering.
	python3 - "$OUT/sharded.csv" >"$OUT/sharded.dat" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["mode"] == "sharded"]
print("# gate replicas mean_peak_mib mean_mib_received done_s")
for gate in ("true", "false"):
    for n in sorted({int(r["replicas"]) for r in rows}):
        rs = [r for r in rows if r["gate"] == gate and int(r["replicas"]) == n]
        if rs:
            m = lambda k: sum(float(r[k]) for r in rs) / len(rs)
            print(gate, n, "%.1f" % m("vmhwm_mib"), "%.1f" % (m("body_bytes") / 1048576), rs[0]["done_s"])
    print()
    print()
PY
	commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
	gnuplot <<-GP || say "gnuplot failed: no plot"
		set terminal pngcairo size 1200,420 noenhanced
		set output '$OUT/sharded.png'
		set multiplot layout 1,3 title "Sharded sample-controller, $FOOS Foos in $NS namespaces ($(date -u +%Y-%m-%d), $commit, $(nproc) cores)"
		set xlabel 'replicas'
		set xtics (1, 2, 4)
		set xrange [0.5:4.5]
		set yrange [0:*]
		set grid
		set key top right
		set title 'peak RSS per replica (MiB)'
		plot '$OUT/sharded.dat' index 0 using 2:3 with linespoints lw 2 title 'gate on', '' index 1 using 2:3 with linespoints lw 2 dt 2 title 'gate off'
		set title 'MiB received per replica'
		plot '$OUT/sharded.dat' index 0 using 2:4 with linespoints lw 2 title 'gate on', '' index 1 using 2:4 with linespoints lw 2 dt 2 title 'gate off'
		set title 'seconds until every Foo has its Deployment'
		plot '$OUT/sharded.dat' index 0 using 2:5 with linespoints lw 2 title 'gate on', '' index 1 using 2:5 with linespoints lw 2 dt 2 title 'gate off'
		unset multiplot
	GP
	[ -f "$OUT/sharded.png" ] && say "plot: $OUT/sharded.png"
fi
exit $rc
