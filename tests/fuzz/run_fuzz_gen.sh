#!/usr/bin/env bash
# Builds ckube-gen's libFuzzer target (tests/fuzz/fuzz_gen.c: gen_crd_load lenient
# and --strict, gen_emit of every version twice, and gen_pattern_ere on inputs that
# start with "#pattern\n") and runs it, single-process, on seeds made from the
# repository's CRDs, a few patterns, and the committed seeds in tests/fuzz/seeds/gen
# (aliases, an alias cycle, deep nesting, several documents and versions, every
# schema feature, bad inputs).
#   bash tests/fuzz/run_fuzz_gen.sh [SECONDS] [libFuzzer flags...]
# SECONDS (default 60) becomes -max_total_time. Crashes go to $B/artifacts-gen/.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/fuzz/lib.sh
secs=60
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
	secs=$1
	shift
fi
seeds="$B/seeds_gen"
mkdir -p "$B/corpus_gen" "$B/artifacts-gen" "$seeds"
# shellcheck disable=SC2046
# (With the library's pattern matching, gen_pattern.c, which logs.)
fuzz_build fuzz_gen $(pkg-config --cflags yaml-0.1 2>/dev/null) tests/fuzz/fuzz_gen.c \
	cmd/ckube-gen/crd.c cmd/ckube-gen/emit.c cmd/ckube-gen/pattern.c pkg/base/base.c \
	pkg/gen/gen_pattern.c pkg/log/log.c -lyaml

# Seeds: the repository's CRDs, as is.
i=0
for f in deploy/crd.yaml examples/greeting/crd.yaml tests/unit/crd/*.yaml; do
	[ -f "$f" ] || continue
	cp "$f" "$seeds/crd-$i"
	i=$((i + 1))
done
# Patterns ("#pattern\n" and the pattern): the CRDs' own, and each translated form.
i=0
{
	grep -h -o "pattern: *'[^']*'" deploy/crd.yaml examples/greeting/crd.yaml \
		tests/unit/crd/*.yaml 2>/dev/null | sed "s/^pattern: *'//; s/'\$//" || true
	cat <<'EOF'
^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
^[A-Za-z_][A-Za-z0-9_]*$
^\d{1,3}(\.\d{1,3}){3}$
^(?:[^\]\\-]|\\.)+?$
[\w\s\-\]\^]*\.[^\n]{2,}
a{,3}b{2}c{3,}d}{e
^\$\{[A-Z_]+\}$|\/\.\*\?
\bword(?=x)
(a)\1
[[:alpha:]]
^(?i)[k-s\w]+(?-i:x)(?s:.)(?U)a+?$
(?i-s)x(?m)$
EOF
} | while IFS= read -r p; do
	printf '#pattern\n%s' "$p" >"$seeds/pattern-$i"
	i=$((i + 1))
done

"$B/fuzz_gen" -max_len="${FUZZ_MAX_LEN:-65536}" -timeout=10 -rss_limit_mb=2048 \
	-dict=tests/fuzz/fuzz_gen.dict -artifact_prefix="$B/artifacts-gen/" \
	-max_total_time="$secs" "$@" "$B/corpus_gen" "$seeds" tests/fuzz/seeds/gen
