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
. tests/fuzz/lib.sh
mkdir -p "$B/corpus_json"
# shellcheck disable=SC2046
fuzz_build fuzz_json $(pkg-config --cflags yajl 2>/dev/null) tests/fuzz/fuzz_json.c pkg/base/base.c pkg/meta/obj.c pkg/codec/json.c pkg/codec/json_merge.c pkg/codec/syntax.c pkg/apply/patch.c pkg/kinds/types.c pkg/kinds/kinds.c -lyajl
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
fuzz_run json "$B/corpus_json" "$@"
