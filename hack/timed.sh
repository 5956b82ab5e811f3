#!/usr/bin/env bash
# How long make test's parts take (make test prints the summary, pass or fail).
#
#   hack/timed.sh FILE NAME CMD...    run CMD; append "SECONDS step NAME" to FILE;
#                                     exit with CMD's status
#   hack/timed.sh --slowest FILE N    print every step's time and the N slowest
#                                     tests (lines "SECONDS KIND NAME" that others,
#                                     such as tests/e2e/run.sh with CSC_TIMES, add)
set -uo pipefail
if [ "${1:-}" = --slowest ]; then
	f="$2" n="$3"
	[ -s "$f" ] || exit 0
	echo "== time by step"
	awk '$2 == "step" { printf "  %5ds  %s\n", $1, $3; t += $1 } END { printf "  %5ds  total\n", t }' "$f"
	echo "== the $n slowest tests"
	awk '$2 != "step"' "$f" | sort -rn | head -n "$n" |
		awk '{ s = $1; $1 = ""; printf "  %5ds %s\n", s, $0 }'
	exit 0
fi
f="$1" name="$2"
shift 2
start=$(date +%s)
"$@"
rc=$?
echo "$(($(date +%s) - start)) step $name" >>"$f"
exit "$rc"
