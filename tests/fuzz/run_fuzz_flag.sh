#!/usr/bin/env bash
# Builds the libFuzzer target for command-line flag parsing (tests/fuzz/fuzz_flag.c)
# and runs it on the committed seeds in tests/fuzz/seeds/flag/ plus what earlier runs
# found ($B/corpus_flag). A first argument that is a number is the time limit in
# seconds (default 60); the rest go to libFuzzer. Crashes go to $B/artifacts-flag/.
#   bash tests/fuzz/run_fuzz_flag.sh [SECONDS] [libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/fuzz/lib.sh
mkdir -p "$B/corpus_flag"
# shellcheck disable=SC2046
fuzz_build fuzz_flag tests/fuzz/fuzz_flag.c pkg/base/base.c pkg/flag/flag.c
FUZZ_MAX_LEN=2048 fuzz_run flag "$B/corpus_flag" "$@"
