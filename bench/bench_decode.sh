#!/usr/bin/env bash
# Builds and runs the streaming-decoder benchmark (prints figures; asserts nothing).
#   bash bench/bench_decode.sh [items]      # build dir: $B, default build-dec
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-dec}
mkdir -p "$B"
# The library as built by make (the generated Foo needs most of it).
[ -f lib/libckube.a ] || make --no-print-directory lib/libckube.a >/dev/null
# shellcheck disable=SC2046
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Iinclude -I. bench/bench_decode.c \
	api/samplecontroller/v1alpha1/foo.c lib/libckube.a \
	$(pkg-config --cflags --libs libcurl yajl yaml-0.1 libmicrohttpd gnutls 2>/dev/null) -lev -pthread -lm \
	-o "$B/bench_decode"
"$B/bench_decode" "$@"
