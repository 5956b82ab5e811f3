#!/usr/bin/env bash
# Builds the decoder's libFuzzer target and runs it on seeds made from the JSON
# fixtures. Extra arguments go to libFuzzer (default: -max_total_time=60).
#   bash tests/fuzz/run_fuzz_decode.sh [-max_total_time=600]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${B:-build-fuzz}
mkdir -p "$B/corpus_decode"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=c11 \
	-D_GNU_SOURCE -I. $(pkg-config --cflags yajl 2>/dev/null) tests/fuzz/fuzz_decode.c \
	pkg/base/base.c pkg/kube/obj.c pkg/kube/decode.c pkg/kube/status.c pkg/kube/types.c \
	-lyajl -pthread -lm -o "$B/fuzz_decode"
# Seeds: each fixture in each mode, with the 4-byte header (mode/kind, limit, chunk seed).
i=0
for f in tests/fixtures/json/*.json; do
	for m in 0 1 2; do
		printf "\\x$(printf %02x $m)\\x00\\x12\\x34" | cat - "$f" >"$B/corpus_decode/seed-$i-$m"
	done
	i=$((i + 1))
done
if [ $# -eq 0 ]; then set -- -max_total_time=60; fi
"$B/fuzz_decode" -max_len=65536 "$@" "$B/corpus_decode"
