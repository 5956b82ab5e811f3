#!/usr/bin/env bash
# Builds and runs the pkg/record benchmark: heap bytes the event correlator holds per
# entry after the events sample-controller emits for 1,000 Foos (prints figures;
# asserts nothing). No control plane needed.
#   bash bench/bench_record.sh [foos]      # build dir: $B, default build-bench-record
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-bench-record}
mkdir -p "$B"
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_cc "$B/bench_record" bench/bench_record.c meta codec kinds clientcmd flowcontrol rest record

# Chunks parked in a thread's tcache would count as in use.
GLIBC_TUNABLES=glibc.malloc.tcache_count=0 "$B/bench_record" "${1:-1000}"
