#!/usr/bin/env bash
# Builds the decoder's libFuzzer target and runs it on seeds made from the JSON
# fixtures. Extra arguments go to libFuzzer (default: -max_total_time=60); a first
# argument that is a number is the time limit in seconds.
#   bash tests/fuzz/run_fuzz_decode.sh [-max_total_time=600]
#   bash tests/fuzz/run_fuzz_decode.sh 300 [libFuzzer flags...]
# Crashes go to $B/artifacts-decode/.
# The other target, the kubeconfig loader: tests/fuzz/run_fuzz_kubeconfig.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/fuzz/lib.sh
mkdir -p "$B/corpus_decode"
# shellcheck disable=SC2046
fuzz_build fuzz_decode $(pkg-config --cflags yajl 2>/dev/null) tests/fuzz/fuzz_decode.c pkg/base/base.c pkg/meta/obj.c pkg/codec/decode.c pkg/codec/syntax.c pkg/meta/status.c pkg/codec/status_parse.c pkg/kinds/types.c pkg/kinds/kinds.c pkg/codec/json.c -lyajl
# Seeds: each fixture in each mode, with the 4-byte header (mode/kind, limit, chunk seed).
i=0
for f in tests/fixtures/json/*.json; do
	for m in 0 1 2; do
		printf "\\x$(printf %02x $m)\\x00\\x12\\x34" | cat - "$f" >"$B/corpus_decode/seed-$i-$m"
	done
	i=$((i + 1))
done
# Seeds at and past the nesting limit (KDEC_MAX_DEPTH 256) in each mode: kept fields,
# skipped fields, a List's skipped members, watch events in either member order.
arrays() { printf "%${1}s" '' | tr ' ' '['; printf "%${1}s" '' | tr ' ' ']'; }
objects() { for _ in $(seq "$1"); do printf '{"a":'; done; printf 1; printf "%${1}s" '' | tr ' ' '}'; }
for n in 255 256 300; do
	{ printf '\x00\x00\x12\x34{"metadata":{"name":"a"},"spec":{"selector":'; objects $n
	  printf '},"x":'; arrays $n; printf '}'; } >"$B/corpus_decode/deep-obj-$n"
	{ printf '\x01\x00\x12\x34{"metadata":{"resourceVersion":"1"},"junk":'; arrays $n
	  printf ',"items":[{"metadata":{"name":"a"},"x":'; objects $n; printf '}]}'; } \
		>"$B/corpus_decode/deep-list-$n"
	{ printf '\x02\x80\x12\x34{"type":"ADDED","object":{"metadata":{"name":"a"},"x":'
	  arrays $n; printf '}}\n{"object":{"metadata":{"name":"b"},"x":'; objects $n
	  printf '},"type":"ERROR"}\n'; } >"$B/corpus_decode/deep-watch-$n"
done
fuzz_run decode "$B/corpus_decode" "$@"
