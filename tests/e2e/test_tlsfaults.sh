# Faults the real API server cannot produce on demand, from a TLS proxy in front of
# it (tests/e2e/tlsproxy.py: its own certificate, trusted by a test kubeconfig;
# HTTP/2 or HTTP/1.1 as the client negotiates). For each fault the daemon must not
# crash, must not spin (requests through the proxy per second stay bounded while
# the fault lasts) and must converge once it ends; where the fault is an error the
# daemon can see at once, it must report it.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The most requests per second the daemon may send while a fault lasts. Idle, it
# sends none; a client retrying without backoff sends hundreds.
TF_MAX_RPS=${TF_MAX_RPS:-4}
TF_FAULT_S=${TF_FAULT_S:-15}

tf_ctl() { python3 - "$TF_DIR/ctl.sock" "$*" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((sys.argv[2] + "\n").encode())
print(s.makefile().readline().strip())
PY
}
tf_requests() { tf_ctl stats | sed 's/.*requests=\([0-9]*\).*/\1/'; }

tf_cleanup() {
	local rc=$1
	stop_controller "tf-$TF_NAME" || rc=1
	[ -n "${TF_PROXY:-}" ] && kill "$TF_PROXY" 2>/dev/null && wait "$TF_PROXY" 2>/dev/null
	[ -n "${TF_NS:-}" ] && kubectl delete namespace "$TF_NS" --wait=false >/dev/null 2>&1
	exit "$rc"
}

# tf_setup NAME [ALPN]: proxy + daemon through it, synced, one Foo converged.
tf_setup() {
	TF_NAME=$1
	local alpn=${2:-h2,http/1.1}
	ensure_crd
	TF_NS=$(new_ns "e2e-tf-$1")
	TF_DIR="$E2E_LOGS/tf-$1"
	rm -rf "$TF_DIR"; mkdir -p "$TF_DIR"
	trap 'tf_cleanup $?' EXIT
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj /CN=tlsproxy -addext subjectAltName=IP:127.0.0.1,DNS:localhost \
		-keyout "$TF_DIR/key.pem" -out "$TF_DIR/cert.pem" >/dev/null 2>&1 || fail "openssl"
	python3 "$E2E_ROOT/tests/e2e/tlsproxy.py" "127.0.0.1:$API_PORT" "$TF_DIR/cert.pem" \
		"$TF_DIR/key.pem" "$TF_DIR" --alpn "$alpn" >"$TF_DIR/proxy.log" 2>&1 &
	TF_PROXY=$!
	until_ok 10 test -s "$TF_DIR/port" || fail "proxy did not start: $(cat "$TF_DIR/proxy.log")"
	CA_FILE="$TF_DIR/cert.pem" API_SERVER="https://127.0.0.1:$(cat "$TF_DIR/port")" \
		kubeconfig_token "$TF_DIR/kubeconfig" "$(admin_token)"
	TF_M=127.0.0.1:$(free_port)
	start_controller "tf-$1" --kubeconfig "$TF_DIR/kubeconfig" --namespace "$TF_NS" \
		--metrics-bind-address=$TF_M --log-format=json
	until_ok 30 prom_eq "$TF_M" 2 informer_synced || fail "never synced through the proxy"
	apply_foo "$TF_NS" before dbefore 1
	until_ok 30 deploy_exists "$TF_NS" dbefore || fail "no Deployment before the fault"
}

deploy_exists() { kubectl -n "$1" get deploy "$2" >/dev/null 2>&1; }

# tf_quiet: every Foo of the namespace has its status written for its generation
# and is Ready, and the daemon's queue is empty, twice a second apart. The fault
# then finds no reconcile in flight: what the daemon sends during it is its own
# retrying of list/watch, not the workqueue's per-item backoff of writes that a
# fault made fail (client-go's too: 5 ms doubling per Foo, a burst that a slower
# machine turned into 8 requests/s in the first seconds of a fault).
tf_foos_settled() {
	kubectl -n "$TF_NS" get foos -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
def ready(f):
    st = f.get("status", {})
    c = [x for x in st.get("conditions", []) if x.get("type") == "Ready"]
    return st.get("observedGeneration") == f["metadata"].get("generation") and c and c[0]["status"] == "True"
sys.exit(0 if items and all(ready(f) for f in items) else 1)'
}
tf_queue_empty() { prom_eq "$TF_M" 0 workqueue_depth && sleep 1 && prom_eq "$TF_M" 0 workqueue_depth; }
tf_quiet() {
	until_ok 120 tf_foos_settled || fail "the Foos never settled before the fault"
	until_ok 30 tf_queue_empty || fail "the daemon's queue never emptied before the fault"
}
tf_alive() { kill -0 "$(cat "$E2E_LOGS/tf-$TF_NAME.pid")" 2>/dev/null; }

# tf_fault CMD...: inject, change a Foo meanwhile, hold for TF_FAULT_S while
# counting requests, then clear and require convergence (the changed Foo and a new
# one). Sets TF_LOG_NEW to the daemon's log lines written during the fault.
tf_fault() {
	local r0 r1 c0 c1 lines0 rate crate cmd
	tf_quiet
	lines0=$(wc -l <"$E2E_LOGS/tf-$TF_NAME.log")
	r0=$(tf_requests)
	c0=$(prom_value "$TF_M" rest_client_requests_total)
	for cmd in "$@"; do [ "$(tf_ctl "$cmd")" = ok ] || fail "proxy refused: $cmd"; done
	apply_foo "$TF_NS" before dbefore 3
	apply_foo "$TF_NS" during dduring 1
	sleep "$TF_FAULT_S"
	r1=$(tf_requests)
	c1=$(prom_value "$TF_M" rest_client_requests_total)
	tf_alive || fail "the daemon died during '$*': $(tail -n 20 "$E2E_LOGS/tf-$TF_NAME.log")"
	TF_LOG_NEW=$(tail -n +"$((lines0 + 1))" "$E2E_LOGS/tf-$TF_NAME.log")
	# Two counts: requests that reached the server through the proxy, and attempts
	# the daemon made (its rest_client_requests_total counts refused connects too).
	rate=$(python3 -c "print(round(($r1 - $r0) / $TF_FAULT_S, 2))")
	crate=$(python3 -c "print(round(($c1 - $c0) / $TF_FAULT_S, 2))")
	echo "    fault '$*': $((r1 - r0)) requests through the proxy ($rate/s), $(python3 -c "print(int($c1 - $c0))") attempts by the daemon ($crate/s) in ${TF_FAULT_S}s"
	python3 -c "import sys; sys.exit(max($rate, $crate) > $TF_MAX_RPS)" ||
		fail "the daemon spins under '$*': $rate requests/s through the proxy, $crate attempts/s (max $TF_MAX_RPS)"
	[ "$(tf_ctl clear)" = ok ] || fail "clear"
	until_ok 90 jp_eq "$TF_NS" deploy/dbefore '{.spec.replicas}' 3 ||
		fail "after '$*': dbefore not scaled to 3: $(jp "$TF_NS" deploy/dbefore '{.spec.replicas}')"
	until_ok 90 deploy_exists "$TF_NS" dduring || fail "after '$*': the Foo made during the fault never converged"
	apply_foo "$TF_NS" after dafter 1
	until_ok 60 deploy_exists "$TF_NS" dafter || fail "after '$*': a new Foo never converged"
	jp_eq "$TF_NS" foo/after '{.status.conditions[?(@.type=="Ready")].status}' True ||
		until_ok 30 jp_eq "$TF_NS" foo/after '{.status.conditions[?(@.type=="Ready")].status}' True ||
		fail "after '$*': foo/after not Ready"
}

# tf_reported PATTERN: the daemon logged something matching during the fault.
tf_reported() {
	grep -Eq "$1" <<<"$TF_LOG_NEW" || fail "the fault was not reported (want /$1/); log during it: $(head -c 1500 <<<"$TF_LOG_NEW")"
}

t_tlsfault_latency() {
	tf_setup latency
	tf_fault "latency 400"
}

t_tlsfault_stall() {
	tf_setup stall
	tf_fault stall
}

t_tlsfault_reset_mid_body() {
	tf_setup reset
	# Lists and watch streams cut after 2 KiB: every (re)list of this namespace fails.
	for i in $(seq 1 30); do apply_foo "$TF_NS" "pad$i" "dpad$i" 1; done
	until_ok 60 deploy_exists "$TF_NS" dpad30 || fail "padding Foos"
	tf_fault "reset 2048" "reset 0"
	tf_reported 'List/watch failed|Watch ended|failed'
}

t_tlsfault_truncated_body() {
	tf_setup truncate
	for i in $(seq 1 30); do apply_foo "$TF_NS" "pad$i" "dpad$i" 1; done
	until_ok 60 deploy_exists "$TF_NS" dpad30 || fail "padding Foos"
	tf_fault "truncate 2048" "truncate 0"
	tf_reported 'List/watch failed|failed'
}

t_tlsfault_goaway_h2() {
	tf_setup goaway h2
	tf_fault goaway
}

t_tlsfault_refused_http1() {
	tf_setup refuse http/1.1
	tf_fault refuse "reset 0"
	tf_reported 'List/watch failed|refused|failed'
}
