#!/usr/bin/env bash
# Builds the libFuzzer target for the exec credential plugin's output reader (tests/fuzz/fuzz_exec.c)
# and runs it on the committed seeds in tests/fuzz/seeds/exec/ plus what earlier runs
# found ($B/corpus_exec). A first argument that is a number is the time limit in
# seconds (default 60); the rest go to libFuzzer. Crashes go to $B/artifacts-exec/.
#   bash tests/fuzz/run_fuzz_exec.sh [SECONDS] [libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/fuzz/lib.sh
mkdir -p "$B/corpus_exec"
# shellcheck disable=SC2046
fuzz_build fuzz_exec $(pkg-config --cflags yaml-0.1 yajl 2>/dev/null) tests/fuzz/fuzz_exec.c pkg/base/base.c pkg/clientcmd/config.c pkg/clientcmd/config_kubeconfig.c pkg/clientcmd/config_incluster.c pkg/clientcmd/config_exec.c pkg/clientcmd/config_creds.c pkg/codec/json.c pkg/codec/syntax.c pkg/meta/obj.c pkg/kinds/types.c pkg/kinds/kinds.c -lyaml -lyajl
FUZZ_MAX_LEN=8192 fuzz_run exec "$B/corpus_exec" "$@"
