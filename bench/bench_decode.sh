#!/usr/bin/env bash
# Builds and runs the streaming-decoder benchmark (prints figures; asserts nothing).
#   bash bench/bench_decode.sh [items]      # build dir: $B, default build-dec
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-dec}
mkdir -p "$B"
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iinclude -I. bench/bench_decode.c \
	pkg/base/base.c pkg/kube/obj.c pkg/kube/decode.c pkg/kube/status.c pkg/kube/types.c \
	pkg/kube/kinds.c pkg/kube/json.c api/samplecontroller/v1alpha1/foo.c \
	$(pkg-config --cflags yajl 2>/dev/null) -lyajl -pthread -lm -o "$B/bench_decode"
"$B/bench_decode" "$@"
