#!/usr/bin/env bash
# Builds and runs the pkg/record benchmark: heap bytes the event correlator holds per
# entry after the events sample-controller emits for 1,000 Foos (prints figures;
# asserts nothing). No control plane needed.
#   bash bench/bench_record.sh [foos]      # build dir: $B, default build-bench-record
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-bench-record}
mkdir -p "$B"
# shellcheck disable=SC2046
cc -O2 -g -std=c11 -D_GNU_SOURCE -DCSC_VERSION=\"bench\" -Wall -Wextra -Wno-unused-parameter -Iinclude -I. \
	bench/bench_record.c pkg/base/*.c pkg/log/log.c pkg/meta/*.c pkg/codec/*.c pkg/kinds/*.c pkg/clientcmd/*.c pkg/flowcontrol/*.c pkg/rest/*.c pkg/record/*.c \
	$(pkg-config --cflags libcurl yajl yaml-0.1 gnutls 2>/dev/null) \
	$(pkg-config --libs libcurl yajl yaml-0.1 gnutls 2>/dev/null) -lev -pthread -lm -o "$B/bench_record"

# Chunks parked in a thread's tcache would count as in use.
GLIBC_TUNABLES=glibc.malloc.tcache_count=0 "$B/bench_record" "${1:-1000}"
