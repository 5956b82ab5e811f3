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

# The daemon under test: the ASan/UBSan build when present (make e2e builds it).
SC_BIN="${SC_BIN:-$E2E_ROOT/build/asan/sample-controller}"
[ -x "$SC_BIN" ] || SC_BIN="$E2E_ROOT/bin/sample-controller"
E2E_LOGS="${E2E_LOGS:-$E2E_ROOT/.local/e2e-logs}"
mkdir -p "$E2E_LOGS"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:exitcode=23}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Extra environment for start_controller (e.g. SC_ENV=(-u KUBECONFIG X=y)).
SC_ENV=()
# start_controller NAME [ARGS...]: run the daemon in the background; its PID goes to
# $E2E_LOGS/NAME.pid and its log to $E2E_LOGS/NAME.log.
start_controller() {
	local name="$1"; shift
	env "${SC_ENV[@]}" "$SC_BIN" --metrics-bind-address=0 --health-probe-bind-address=0 -v=4 "$@" \
		>"$E2E_LOGS/$name.log" 2>&1 &
	echo $! >"$E2E_LOGS/$name.pid"
}

# stop_controller NAME: SIGTERM, wait; fails if it did not exit 0 (sanitizer
# findings and leaks give non-zero exit codes).
stop_controller() {
	local name="$1" pid rc=0
	pid=$(cat "$E2E_LOGS/$name.pid" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" || rc=$?
	rm -f "$E2E_LOGS/$name.pid"
	if [ "$rc" != 0 ]; then
		echo "controller $name exited with $rc; last log lines:" >&2
		tail -n 30 "$E2E_LOGS/$name.log" >&2
		return 1
	fi
}

kill9_controller() {
	local name="$1" pid
	pid=$(cat "$E2E_LOGS/$name.pid" 2>/dev/null) || return 0
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$E2E_LOGS/$name.pid"
}

jp() { # jp NS KIND/NAME JSONPATH
	kubectl -n "$1" get "$2" -o jsonpath="$3" 2>/dev/null
}

apply_foo() { # apply_foo NS NAME DEPLOYMENT [REPLICAS]; an empty DEPLOYMENT omits the field
	local rep="" dn=""
	[ -n "${4:-}" ] && rep="replicas: $4"
	[ -n "$3" ] && dn="deploymentName: \"$3\""
	kubectl -n "$1" apply -f - >/dev/null <<YAML
apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata: {name: $2}
spec:
  $dn
  $rep
YAML
}

ensure_crd() {
	kubectl apply -f "$E2E_ROOT/deploy/crd.yaml" >/dev/null
	kubectl wait --for=condition=Established --timeout=60s crd/foos.samplecontroller.k8s.io >/dev/null
}
