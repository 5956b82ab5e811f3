#!/usr/bin/env bash
# Builds and runs the pkg/workqueue benchmark, then the same loop shapes in Go, and
# prints them side by side with the ratio C ÷ Go of the printed figures: below 1,
# ours takes less, except on the "M adds+gets/s" lines (rates), where above 1 means
# ours is faster. Prints figures; asserts nothing about speed. The Go peers, built by
# bench/build_go_peer.sh when go is installed, print the same label per figure
# ("label: number unit"):
#   bench/peers/workqueue      client-go's workqueue: every figure of the plain
#                              queue, the "plain queue, ..." lines included
#   bench/peers/priorityqueue  controller-runtime's priority queue (the release of
#                              bench/peers/controller-runtime): the "priority queue,
#                              ..." lines and the priority queue's allocations
# The last column of the table names the Go queue of each line. Every queue timed is
# unnamed, so keeps no metrics, on both sides, but for the C-only "metrics on" line.
#   bash bench/bench_workqueue.sh          # build dir: $B, default build-wq
#   bash bench/bench_workqueue.sh priority # only some parts (single workers after memory
#                                          # priority), in C and in both Go peers
#   WQ_RUNS=3                              # 3 rounds of the three programs, best of
#                                          # each figure in the table (default 1)
#   WQ_GO_BIN=path WQ_PQ_BIN=path          # Go peers already built (client-go's,
#                                          # controller-runtime's priority queue)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-wq}
mkdir -p "$B"
# The queue's own modules and what they call: log (key traces), flowcontrol (the
# bucket limiter), base's x509 (gnutls).
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Iinclude -I. bench/bench_workqueue.c pkg/base/*.c \
	pkg/log/*.c pkg/flowcontrol/*.c pkg/workqueue/*.c -pthread -lm -lgnutls -o "$B/bench_workqueue"

go_bin="${WQ_GO_BIN:-}" pq_bin="${WQ_PQ_BIN:-}"
if command -v go >/dev/null; then
	[ -n "$go_bin" ] || go_bin="$(bash bench/build_go_peer.sh workqueue wq-bench | tail -n 1)"
	[ -n "$pq_bin" ] || pq_bin="$(bash bench/build_go_peer.sh priorityqueue pq-bench | tail -n 1)"
fi
# WQ_RUNS rounds, each running the three programs in turn, so that a load that comes
# and goes on a shared machine falls on all of them; the table keeps the best of the
# rounds per figure (the highest rate, else the lowest figure).
runs=${WQ_RUNS:-1}
: >"$B/c.txt"
: >"$B/go.txt"
: >"$B/pq.txt"
for ((run = 1; run <= runs; run++)); do
	[ "$runs" = 1 ] || echo "== round $run of $runs"
	"$B/bench_workqueue" "$@" | tee -a "$B/c.txt"
	if [ -n "$go_bin" ]; then
		echo
		"$go_bin" "$@" | tee -a "$B/go.txt"
	fi
	if [ -n "$pq_bin" ]; then
		echo
		"$pq_bin" "$@" | tee -a "$B/pq.txt"
	fi
	echo
done
[ -n "$go_bin$pq_bin" ] || { echo "(go is not installed: no Go column)"; exit 0; }
# Each figure line is "label: number unit ...", the same label in all programs (a
# label the Go peers do not print shows "-"); the programs' title lines have no ": ".
awk -F': *' -v cf="$B/c.txt" -v pq="$B/pq.txt" '
	function num(s) { split(s, a, " "); return a[1] }
	function unit(s) { split(s, a, " "); return a[2] ~ /^\(/ ? "" : a[2] }
	function better(new, old, u) { return u == "M" ? new + 0 > old + 0 : new + 0 < old + 0 }
	NF < 2 { next }
	FILENAME == cf {
		if (!($1 in c)) { order[++n] = $1; u[$1] = unit($2); c[$1] = num($2) }
		else if (better(num($2), c[$1], u[$1])) c[$1] = num($2)
		next
	}
	{
		if (!($1 in g) || better(num($2), g[$1], u[$1])) g[$1] = num($2)
		src[$1] = (FILENAME == pq) ? "controller-runtime" : "client-go"
	}
	END {
		printf "%-43s %13s %13s %6s  %s\n", "figure (same loop shapes)", "pkg/workqueue", "Go", "C/Go", "Go queue"
		for (i = 1; i <= n; i++) {
			k = order[i]
			if (!(k in g)) { g[k] = "-"; src[k] = "" }
			r = (g[k] > 0) ? sprintf("%.2f", c[k] / g[k]) : "-"
			printf "%-43s %9s %-3s %9s %-3s %6s  %s\n", k, c[k], u[k], g[k], u[k], r, src[k]
			if (u[k] == "M") rates = 1
		}
		if (rates) print "(C/Go of the M adds+gets/s lines is a ratio of rates: above 1, ours is faster)"
	}' "$B/c.txt" "$B/go.txt" "$B/pq.txt"
