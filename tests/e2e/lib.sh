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
# $E2E_LOGS/NAME.pid and its log to $E2E_LOGS/NAME.log. Metrics are plain HTTP
# (--metrics-secure=false) so that the tests scrape them with curl http://;
# test_metrics_secure.sh passes --metrics-secure=true after.
start_controller() {
	local name="$1"; shift
	env "${SC_ENV[@]}" "$SC_BIN" --metrics-bind-address=0 --health-probe-bind-address=0 \
		--metrics-secure=false -v=4 "$@" \
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

# ---- Operability helpers (metrics, probes, leases, kubeconfigs, exits) ----

# The Debian python3 has prometheus_client; the pyenv one on PATH may not.
PROM_PY="${PROM_PY:-/usr/bin/python3}"

free_port() { # print a TCP port on 127.0.0.1 that was free a moment ago
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# prom_value HOST:PORT NAME [LABEL=VALUE | LABEL!=VALUE | LABEL~REGEX ...]: parse
# /metrics with the Prometheus text parser and print the sum of the samples named NAME
# whose labels match; prints "absent" when none does. Fails when /metrics does not
# parse. With PROM_TOKEN set (a bearer token allowed to get /metrics), it scrapes
# https:// instead, without verifying the (self-signed) certificate: the secure
# metrics of a deployed daemon. HOST:PORT may be file:PATH, a scrape kept earlier.
prom_value() {
	local addr="$1"; shift
	local how=("http://$addr/metrics")
	[ -n "${PROM_TOKEN:-}" ] && how=(-k -H "Authorization: Bearer $PROM_TOKEN" "https://$addr/metrics")
	{ if [ "${addr#file:}" != "$addr" ]; then cat "${addr#file:}"; else curl -sf --max-time 5 "${how[@]}"; fi; } | "$PROM_PY" -c '
import re, sys
from prometheus_client.parser import text_string_to_metric_families
name, conds = sys.argv[1], []
for a in sys.argv[2:]:
    m = re.match(r"^(\w+)(!=|=|~)(.*)$", a)
    conds.append((m.group(1), m.group(2), m.group(3)))
def ok(labels):
    for k, op, v in conds:
        have = labels.get(k)
        if op == "=" and have != v: return False
        if op == "!=" and have == v: return False
        if op == "~" and (have is None or not re.fullmatch(v, have)): return False
    return True
total, seen = 0.0, False
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        if s.name == name and ok(s.labels):
            total += s.value
            seen = True
print(repr(total) if seen else "absent")
' "$@"
}

# prom_eq HOST:PORT WANT NAME [LABELS...] / prom_ge HOST:PORT MIN NAME [LABELS...]:
# prom_value compared when called (for until_ok, which gets its arguments expanded
# once: a "$(...)" among them would never be read again).
prom_eq() {
	local addr="$1" want="$2" v; shift 2
	v=$(prom_value "$addr" "$@") || return 1
	[ "$v" != absent ] && python3 -c 'import sys; sys.exit(float(sys.argv[1]) != float(sys.argv[2]))' "$v" "$want"
}
prom_ge() {
	local addr="$1" min="$2" v; shift 2
	v=$(prom_value "$addr" "$@") || return 1
	[ "$v" != absent ] && python3 -c 'import sys; sys.exit(float(sys.argv[1]) < float(sys.argv[2]))' "$v" "$min"
}

# http_code URL: print the HTTP status of a GET (000 when there is no answer).
http_code() {
	curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$1" || true
}

lease_holder() { # lease_holder NS NAME
	kubectl -n "$1" get lease "$2" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null
}

# kubeconfig_via FILE SERVER_URL: a copy of $KUBECONFIG with another server URL.
kubeconfig_via() {
	sed "s#^\(\s*server:\).*#\1 $2#" "$KUBECONFIG" >"$1"
}

# kubeconfig_token FILE TOKEN: a kubeconfig for the local API server that
# authenticates with TOKEN only.
kubeconfig_token() {
	cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$API_SERVER", certificate-authority: "$CA_FILE"}
users:
- name: sa
  user: {token: "$2"}
contexts:
- name: sa
  context: {cluster: local, user: sa}
current-context: sa
KC
}

# json_log_ts FILE MSG: the "ts" of the first JSON log line whose msg is MSG.
json_log_ts() {
	python3 - "$1" "$2" <<'PY'
import json, sys
for line in open(sys.argv[1], errors="replace"):
    try:
        o = json.loads(line)
    except ValueError:
        continue
    if isinstance(o, dict) and o.get("msg") == sys.argv[2]:
        print(o["ts"])
        sys.exit(0)
sys.exit(1)
PY
}

# wait_exit NAME SECS: wait up to SECS for the daemon NAME to exit by itself; sets
# WAIT_RC to its exit status, or to "timeout" (and leaves it running). Not in $(...):
# only the shell that started the daemon can wait for it.
wait_exit() {
	local name="$1" secs="$2" pid end state
	WAIT_RC="no pid"
	pid=$(cat "$E2E_LOGS/$name.pid") || return 0
	end=$(( $(date +%s) + secs ))
	# A zombie still answers kill -0: look at the process state instead.
	while :; do
		# (gone: no stat file; `|| state=` keeps set -e + pipefail from ending the test)
		state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || state=
		[ -z "$state" ] || [ "$state" = Z ] && break
		if [ "$(date +%s)" -ge "$end" ]; then
			WAIT_RC=timeout
			return 0
		fi
		sleep 0.1
	done
	WAIT_RC=0
	wait "$pid" || WAIT_RC=$?
	rm -f "$E2E_LOGS/$name.pid"
}

# jp_eq NS KIND/NAME JSONPATH WANT: re-reads the value on every call (use it with
# until_ok; `until_ok 30 test "$(jp ...)" = x` would expand $(...) only once).
jp_eq() {
	[ "$(jp "$1" "$2" "$3")" = "$4" ]
}
