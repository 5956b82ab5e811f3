#!/usr/bin/env bash
# Builds the libFuzzer target for the Status decoder and the error predicates (tests/fuzz/fuzz_status.c)
# and runs it on the committed seeds in tests/fuzz/seeds/status/ plus what earlier runs
# found ($B/corpus_status). A first argument that is a number is the time limit in
# seconds (default 60); the rest go to libFuzzer. Crashes go to $B/artifacts-status/.
#   bash tests/fuzz/run_fuzz_status.sh [SECONDS] [libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/fuzz/lib.sh
mkdir -p "$B/corpus_status"
# shellcheck disable=SC2046
fuzz_build fuzz_status $(pkg-config --cflags yajl 2>/dev/null) tests/fuzz/fuzz_status.c pkg/base/base.c pkg/meta/obj.c pkg/codec/decode.c pkg/codec/syntax.c pkg/meta/status.c pkg/codec/status_parse.c pkg/kinds/types.c pkg/kinds/kinds.c pkg/codec/json.c -lyajl
FUZZ_MAX_LEN=8192 fuzz_run status "$B/corpus_status" "$@"
