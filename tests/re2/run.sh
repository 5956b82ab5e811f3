#!/usr/bin/env bash
# Differential test of schema patterns: ckube-gen's translation, matched by the
# library as generated validation matches, against Go's regexp, which the API
# server checks a CRD's pattern with. For each seed, tests/re2/oracle.go writes
# random patterns (atoms, classes, escapes, groups, RE2 flags, quantifiers) and
# random strings (ASCII, newlines, multi-byte characters, the non-ASCII letters Go
# folds ASCII ones to) with Go's answer; tests/re2/diff.c answers each pair again
# and prints every disagreement. Fails on any.
#   bash tests/re2/run.sh DIFF-BINARY
# RE2_SEEDS (default "1 2 3") and RE2_PATTERNS (default 5000 per seed).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$1"
# Built once, next to the C side (Go's build cache is outside the tree).
oracle="$(dirname "$bin")/re2-oracle"
go build -o "$oracle" tests/re2/oracle.go
for seed in ${RE2_SEEDS:-1 2 3}; do
	echo "== re2 diff, seed $seed"
	"$oracle" "$seed" "${RE2_PATTERNS:-5000}" 8 | "$bin"
done
