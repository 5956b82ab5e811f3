#!/usr/bin/env bash
# Initial sync of Deployment informers: streaming list (sendInitialEvents, the
# library's default) against a paged list, from both sides: each client's time,
# CPU and peak, and the kube-apiserver's CPU and peak memory while 1 and then 4
# clients sync at once (WatchList exists for the server's memory when many clients
# list big collections). Prints a table; asserts nothing.
#   BENCH_FULL=1 bash bench/bench_streaming.sh   # 50,000 Deployments
#   bash bench/bench_streaming.sh                # 5,000 (quick; what bench/run.sh runs)
#   BENCH_STREAMING_N=20000 BENCH_STREAMING_CLIENTS="1 8" bash bench/bench_streaming.sh
# The control plane is ckube-envtest's etcd + kube-apiserver, its own on free ports
# (no controller-manager: the Deployments make no ReplicaSets). Each client is a
# fresh process (bench_streaming sync ...), so that VmHWM is the peak of one sync;
# the server's VmHWM is reset through /proc/PID/clear_refs before each round and
# its peak is reported above its RSS before. BENCH_STREAMING_RUNS rounds of each
# (default 3), alternating modes; the table has the medians and each run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
B=${B:-build-bench-streaming}
NS=stream-bench
N=5000
[ "${BENCH_FULL:-0}" = 1 ] && N=50000
N=${BENCH_STREAMING_N:-$N}
RUNS=${BENCH_STREAMING_RUNS:-3}
CLIENTS=${BENCH_STREAMING_CLIENTS:-1 4}
OUT=${BENCH_OUT:-$root/build/bench-out}/streaming
ENVTEST="$root/bin/ckube-envtest"
say() { printf '%s bench_streaming: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
[ -x "$ENVTEST" ] || { say "build first (make all)"; exit 1; }

mkdir -p "$B"
bench_cc "$B/bench_streaming" bench/bench_streaming.c meta codec kinds clientcmd flowcontrol rest apply gen cache

rm -rf "$OUT/run"
mkdir -p "$OUT/run/envs"
export CKUBE_ENVTEST_STATE_DIR="$OUT/run/envs"
cleanup() { "$ENVTEST" stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
envtest_up || { say "ckube-envtest start failed"; exit 1; }
t0=$(now)
"$B/bench_streaming" populate "$NS" "$N"
say "$N Deployments in $(elapsed "$t0") s; kube-apiserver pid $apiserver_pid"

# round MODE K: K clients sync at once; one line per round into $res:
# mode clients server_cpu_s server_peak_above_mib server_rss_before_mib sync_max_s
# client_cpu_mean_s client_hwm_mean_mib how
res="$OUT/run/rounds.txt"
: >"$res"
round() {
	local mode=$1 k=$2 i a0 base pids=()
	sleep 2
	echo 5 >"/proc/$apiserver_pid/clear_refs"
	base=$(status_mib "$apiserver_pid" VmRSS)
	a0=$(cpu_ticks "$apiserver_pid")
	for i in $(seq 1 "$k"); do
		"$B/bench_streaming" sync "$NS" "$mode" >"$OUT/run/client-$i.txt" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	local acpu apeak
	acpu=$(ticks_to_s $(($(cpu_ticks "$apiserver_pid") - a0)))
	apeak=$(awk -v h="$(status_mib "$apiserver_pid" VmHWM)" -v b="$base" 'BEGIN { printf "%.1f", h - b }')
	cat "$OUT"/run/client-*.txt | awk -v m="$mode" -v k="$k" -v c="$acpu" -v p="$apeak" -v b="$base" '
		{ if ($3 > smax) smax = $3; cpu += $4; hwm += $6 / 1024; how = $8; n++ }
		END { printf "%s %d %s %s %s %.2f %.2f %.1f %s\n", m, k, c, p, b, smax, cpu / n, hwm / n, how }' |
		tee -a "$res" >&2
	rm -f "$OUT"/run/client-*.txt
}
for i in $(seq 1 "$RUNS"); do
	for k in $CLIENTS; do
		for mode in stream list; do round "$mode" "$k"; done
	done
done

apiserver=$(kubectl version -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | tail -n 1)
echo "streaming: initial sync of $N Deployments (namespace $NS), kube-apiserver ${apiserver:-?}, $RUNS rounds each, medians"
awk '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ key = $1 " " $2; if (!(key in n)) order[++nk] = key; r = ++n[key]
  scpu[key, r] = $3; speak[key, r] = $4; sbase[key] = $5; sync[key, r] = $6; ccpu[key, r] = $7; chwm[key, r] = $8; how[key] = $9 }
END {
	printf "%-7s %7s | %11s %16s | %12s %12s %15s | %s\n", "mode", "clients", "server CPU s", "server peak MiB", "sync s (max)", "client CPU s", "client peak MiB", "runs: server CPU s / peak MiB"
	for (x = 1; x <= nk; x++) {
		key = order[x]; split(key, kk, " "); m = n[key]; runs = ""
		for (r = 1; r <= m; r++) {
			a[r] = scpu[key, r]; b[r] = speak[key, r]; c[r] = sync[key, r]; d[r] = ccpu[key, r]; e[r] = chwm[key, r]
			runs = runs sprintf("%s%s/%s", r > 1 ? " " : "", scpu[key, r], speak[key, r])
		}
		printf "%-7s %7d | %11.2f %16.1f | %12.2f %12.2f %15.1f | %s (%s; server RSS before %s MiB)\n", kk[1], kk[2],
			median(a, m), median(b, m), median(c, m), median(d, m), median(e, m), runs, how[key], sbase[key]
	}
}' "$res"
