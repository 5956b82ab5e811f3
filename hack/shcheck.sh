#!/usr/bin/env bash
# shcheck: the project's shell scripts run with `set -o pipefail`, where a pipeline
# fails if any of its commands does. A reader that quits at its first match
# (`grep -q`, `grep -m`) makes the command feeding it die of SIGPIPE whenever that
# command is still writing, so `kubectl get pods | grep -q NAME` fails, or not, by
# timing: a rollout test failed that way once. Such a check reads the producer's
# output whole first: `grep -q NAME <<<"$(kubectl get pods)"`. Inside a `bash -c`
# string pipefail is not inherited, so those lines are left alone.
#
# Usage: hack/shcheck.sh [file...]   (default: every .sh under hack/ tests/ bench/
#                                    and .ci/run)
#        hack/shcheck.sh --self-test  it flags a bad line and passes a good one
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
if [ "${1:-}" = --self-test ]; then
	tmp=$(mktemp -d /tmp/shcheck.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	printf 'set -o pipefail\ngrep -qx "$p" <<<"$(kubectl get pods)" || exit 1\n# `a | grep -q` in a comment\nuntil_ok 9 bash -c "a | grep -q b"\n' >"$tmp/good.sh"
	bash "$self" "$tmp/good.sh" >/dev/null || { echo "shcheck self-test: a good script was refused" >&2; exit 1; }
	for g in 'grep -qx' 'grep -m1' 'grep -c --max-count=1'; do
		printf 'set -o pipefail\nkubectl get pods | %s "$p" || exit 1\n' "$g" >"$tmp/bad.sh"
		if out=$(bash "$self" "$tmp/bad.sh" 2>&1); then
			echo "shcheck self-test: a pipe into $g was let through" >&2
			exit 1
		fi
		grep -q "$tmp/bad.sh:2:" <<<"$out" || { echo "shcheck self-test: it did not name the line: $out" >&2; exit 1; }
	done
	echo "shcheck: self-test ok (pipes into grep -q, -m and --max-count refused, the fix passed)"
	exit 0
fi
cd "$(dirname "$self")/.."
[ $# -gt 0 ] || set -- $(find hack tests bench -name '*.sh' | sort) .ci/run
# A pipe (not ||) into grep with -q or -m among its short options; comments and
# bash -c lines excepted.
# (other options may come first: `grep -c --max-count=1`).
bad=$(grep -nE '(^|[^|])\|[[:space:]]*grep([[:space:]]+-[^[:space:]]+)*[[:space:]]+(-[A-Za-z]*[qm]|--quiet|--max-count)' "$@" /dev/null |
	grep -vE '^[^:]+:[0-9]+:[[:space:]]*#|bash -c' || true)
if [ -n "$bad" ]; then
	echo "shcheck: a pipe into an early-exiting grep fails under pipefail when the writer is still writing;" >&2
	echo "read the writer's output whole first (grep -q PATTERN <<<\"\$(writer)\"):" >&2
	echo "$bad" >&2
	exit 1
fi
echo "shcheck: $# scripts, no pipe into grep -q/-m"
