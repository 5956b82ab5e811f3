#!/usr/bin/env bash
# Builds the JSON reader's libFuzzer target (tests/fuzz/fuzz_json.c) and runs it
# on seeds made from the JSON fixtures plus nesting at and past the limit. Extra
# arguments go to libFuzzer (default: -max_total_time=60); a first argument that
# is a number is the time limit in seconds.
#   bash tests/fuzz/run_fuzz_json.sh [-max_total_time=600]
#   bash tests/fuzz/run_fuzz_json.sh 300 [libFuzzer flags...]
# Crashes go to $B/artifacts-json/.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${B:-build-fuzz}
mkdir -p "$B/corpus_json"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=c11 \
	-D_GNU_SOURCE -Iinclude -I. $(pkg-config --cflags yajl 2>/dev/null) tests/fuzz/fuzz_json.c \
	pkg/base/base.c pkg/kube/obj.c pkg/kube/json.c pkg/kube/patch.c pkg/kube/types.c \
	-lyajl -pthread -lm -o "$B/fuzz_json"
i=0
for f in tests/fixtures/json/*.json; do
	cp "$f" "$B/corpus_json/seed-$i"
	i=$((i + 1))
done
printf '{"a.b":{"c/d":[1,-2.5e3,true,null,"\\u00e9\\n"]},"a.b":0,"k\\u0000":{}}' \
	>"$B/corpus_json/seed-kept"
# At and past the nesting limit (CK_JSON_MAX_DEPTH 256).
for n in 255 256 257; do
	{ printf "%${n}s" '' | tr ' ' '['; printf "%${n}s" '' | tr ' ' ']'; } >"$B/corpus_json/deep-arr-$n"
	{ for _ in $(seq "$n"); do printf '{"a":'; done; printf 1; printf "%${n}s" '' | tr ' ' '}'; } \
		>"$B/corpus_json/deep-obj-$n"
done
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
	secs=$1
	shift
	set -- -max_total_time="$secs" "$@"
fi
if [ $# -eq 0 ]; then set -- -max_total_time=60; fi
mkdir -p "$B/artifacts-json"
"$B/fuzz_json" -max_len=65536 -artifact_prefix="$B/artifacts-json/" "$@" "$B/corpus_json"
