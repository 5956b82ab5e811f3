#!/usr/bin/env bash
# Builds and runs the pkg/workqueue benchmark, then client-go's workqueue with the
# same loop shapes (bench/peers/workqueue, built by bench/build_go_peer.sh when go is
# installed), and prints both side by side with the ratio C ÷ client-go (below 1:
# ours takes less). Prints figures; asserts nothing about speed.
#   bash bench/bench_workqueue.sh          # build dir: $B, default build-wq
#   bash bench/bench_workqueue.sh priority # only some parts (single workers after memory
#                                          # priority); the client-go column still runs all
#   WQ_GO_BIN=path                         # a client-go benchmark already built
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-wq}
mkdir -p "$B"
# The queue's own modules and what they call: log (key traces), flowcontrol (the
# bucket limiter), base's x509 (gnutls).
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Iinclude -I. bench/bench_workqueue.c pkg/base/*.c \
	pkg/log/*.c pkg/flowcontrol/*.c pkg/workqueue/*.c -pthread -lm -lgnutls -o "$B/bench_workqueue"
"$B/bench_workqueue" "$@" | tee "$B/c.txt"

go_bin="${WQ_GO_BIN:-}"
if [ -z "$go_bin" ]; then
	command -v go >/dev/null || { echo "(go is not installed: no client-go column)"; exit 0; }
	go_bin="$(bash bench/build_go_peer.sh workqueue wq-bench | tail -n 1)"
fi
echo
"$go_bin" | tee "$B/go.txt"
echo
# Each figure line is "label: number unit ...", the same label in both programs.
awk -F': *' '
	function num(s) { split(s, a, " "); return a[1] }
	function unit(s) { split(s, a, " "); return a[2] }
	FNR == 1 { next }
	NR == FNR { c[$1] = num($2); u[$1] = unit($2); order[++n] = $1; next }
	{ g[$1] = num($2) }
	END {
		printf "%-38s %12s %12s %8s\n", "figure (same loop shapes)", "pkg/workqueue", "client-go", "C/Go"
		for (i = 1; i <= n; i++) {
			k = order[i]
			if (!(k in g)) g[k] = "-"
			r = (g[k] > 0) ? sprintf("%.2f", c[k] / g[k]) : "-"
			printf "%-38s %9s %-3s %9s %-3s %7s\n", k, c[k], u[k], g[k], u[k], r
		}
	}' "$B/c.txt" "$B/go.txt"
