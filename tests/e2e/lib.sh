# Helpers for e2e test scripts. Each test_*.sh defines functions named t_* which
# run.sh calls one by one; a function fails by returning non-zero (or via fail).
# shellcheck shell=bash
E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=/dev/null
. "$E2E_ROOT/.local/env"
export KUBECONFIG="$LOCAL_KUBECONFIG"

fail() { echo "    FAIL: $*" >&2; return 1; }

# until_ok SECONDS CMD...: retry CMD every 0.5 s until it succeeds.
until_ok() {
	local secs="$1"; shift
	local end=$(( $(date +%s) + secs ))
	while [ "$(date +%s)" -lt "$end" ]; do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	"$@" || true
	return 1
}

# new_ns PREFIX: create a fresh namespace, print its name.
new_ns() {
	local ns
	ns="$1-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	kubectl create namespace "$ns" >/dev/null
	until_ok 30 kubectl -n "$ns" get serviceaccount default >/dev/null
	echo "$ns"
}

admin_token() {
	python3 - "$LOCAL_KUBECONFIG" <<'PY'
import sys, re
text = open(sys.argv[1]).read()
m = re.search(r'^\s*token:\s*(\S+)', text, re.M)
print(m.group(1))
PY
}
