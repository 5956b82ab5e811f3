#!/usr/bin/env bash
# Builds and runs the pkg/workqueue benchmark (prints figures; asserts nothing).
#   bash bench/bench_workqueue.sh          # build dir: $B, default build-wq
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-wq}
mkdir -p "$B"
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Iinclude -I. bench/bench_workqueue.c pkg/base/base.c \
	pkg/workqueue/*.c -pthread -lm -o "$B/bench_workqueue"
"$B/bench_workqueue"
