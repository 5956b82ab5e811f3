#!/usr/bin/env bash
# Builds the libFuzzer target for the watch stream's framing, split at every byte (tests/fuzz/fuzz_watch.c)
# and runs it on the committed seeds in tests/fuzz/seeds/watch/ plus what earlier runs
# found ($B/corpus_watch). A first argument that is a number is the time limit in
# seconds (default 60); the rest go to libFuzzer. Crashes go to $B/artifacts-watch/.
#   bash tests/fuzz/run_fuzz_watch.sh [SECONDS] [libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/fuzz/lib.sh
mkdir -p "$B/corpus_watch"
# shellcheck disable=SC2046
fuzz_build fuzz_watch $(pkg-config --cflags yajl 2>/dev/null) tests/fuzz/fuzz_watch.c pkg/base/base.c pkg/meta/obj.c pkg/codec/decode.c pkg/codec/syntax.c pkg/meta/status.c pkg/codec/status_parse.c pkg/kinds/types.c pkg/kinds/kinds.c pkg/codec/json.c -lyajl
FUZZ_MAX_LEN=1024 fuzz_run watch "$B/corpus_watch" "$@"
