#!/usr/bin/env bash
# Initial sync of a Deployment informer: streaming list (sendInitialEvents, the
# default) against a paged list, on the local control plane. Prints a table; asserts
# nothing.
#   BENCH_FULL=1 bash bench/bench_streaming.sh   # 50,000 Deployments
#   bash bench/bench_streaming.sh                # 5,000 (quick; what bench/run.sh runs)
#   BENCH_STREAMING_N=20000 bash bench/bench_streaming.sh
# Each measurement is a fresh process (bench_streaming sync ...): time from start to
# HasSynced, CPU seconds, VmHWM (peak RSS) at that moment. BENCH_STREAMING_RUNS runs
# each way (default 3), alternating; the table has each run and the median.
# The Deployments live in namespace stream-bench, deleted at the end unless
# BENCH_STREAMING_KEEP=1 keeps them for the next run (creating 50,000 takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-bench-streaming}
NS=stream-bench
N=5000
[ "${BENCH_FULL:-0}" = 1 ] && N=50000
N=${BENCH_STREAMING_N:-$N}
RUNS=${BENCH_STREAMING_RUNS:-3}

export KUBECONFIG=${KUBECONFIG:-$PWD/.local/kubeconfig}
if ! kubectl get --raw /readyz >/dev/null 2>&1; then
	echo "streaming: skipped (no local control plane; hack/local-up.sh starts one)"
	exit 0
fi

mkdir -p "$B"
# shellcheck disable=SC2046
cc -O2 -g -std=c11 -D_GNU_SOURCE -DCSC_VERSION=\"bench\" -Wall -Wextra -Wno-unused-parameter -Iinclude -I. \
	bench/bench_streaming.c pkg/base/*.c pkg/log/log.c pkg/meta/*.c pkg/codec/*.c pkg/kinds/*.c pkg/clientcmd/*.c pkg/flowcontrol/*.c pkg/rest/*.c pkg/apply/*.c pkg/gen/*.c pkg/cache/*.c \
	$(pkg-config --cflags libcurl yajl yaml-0.1 2>/dev/null) \
	$(pkg-config --libs libcurl yajl yaml-0.1 2>/dev/null) -lev -pthread -lm -o "$B/bench_streaming"

"$B/bench_streaming" populate "$NS" "$N"

out="$B/streaming.txt"
: >"$out"
for i in $(seq 1 "$RUNS"); do
	for mode in stream list; do
		"$B/bench_streaming" sync "$NS" "$mode" | tee -a "$out" >&2
	done
done

apiserver=$(kubectl version -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | tail -n 1)
echo "streaming: initial sync of $N Deployments (namespace $NS), kube-apiserver ${apiserver:-?}, $RUNS runs each"
awk '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ m = $1; k = ++n[m]; secs[m, k] = $3; cpu[m, k] = $4; hwm[m, k] = $6; how[m] = $8; objs[m] = $2 }
END {
	printf "%-8s %9s %10s %10s %14s  %s\n", "mode", "objects", "sync s", "CPU s", "VmHWM MiB", "runs (s / MiB)"
	split("stream list", modes, " ")
	for (x = 1; x <= 2; x++) {
		m = modes[x]; runs = ""
		for (k = 1; k <= n[m]; k++) {
			s[k] = secs[m, k]; c[k] = cpu[m, k]; h[k] = hwm[m, k] / 1024
			runs = runs sprintf("%s%.2f/%.0f", k > 1 ? " " : "", secs[m, k], hwm[m, k] / 1024)
		}
		printf "%-8s %9d %10.2f %10.2f %14.1f  %s (%s)\n", m, objs[m], median(s, n[m]), median(c, n[m]), median(h, n[m]), runs, how[m]
	}
}' "$out"

if [ "${BENCH_STREAMING_KEEP:-0}" != 1 ]; then
	kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
fi
