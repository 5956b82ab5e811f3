# The daemon under API Priority and Fairness: its service account is sent to a
# priority level that rejects every request with 429 (tests/e2e/apf_lib.sh), on
# the real API server. While rejected it must back off as client-go does: the
# REST client's own retries honour Retry-After (10, as client-go's), then the
# reflector backs off exponentially (800 ms doubling to 30 s, jitter 1.0) and
# never sooner than Retry-After. Requests are counted by the kube-apiserver
# (apiserver_flowcontrol_rejected_requests_total of the FlowSchema).
# bench/bench_apf.sh measures the Go sample-controller the same way.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/apf_lib.sh"

# Seconds after the start before the window, and the window. The reflector's
# backoff has grown by the window (13 s, then 26 s, then 30 s between rounds of
# 11 requests, each round about 15 s of Retry-After retries); the old policy (a
# retry every Retry-After, forever) made at least one request per Retry-After per
# informer throughout. With the window at 70 s the backoff was still at 6-13 s and
# rounds took most of the window: 34 to 59 requests against 60 for the old policy,
# too close (one CI-like run failed at 59); from 150 s the gaps dominate.
APF_WARMUP="${APF_WARMUP:-150}"
APF_WINDOW="${APF_WINDOW:-60}"
APF_INFORMERS=2 # Foos, Deployments

t_apf_rejected_backs_off_then_converges() {
	local port own0 own1 max_ra allow
	ensure_crd
	NS=$(new_ns e2e-apf)
	# Also when the test fails half-way: the level must not outlive it.
	trap 'set +e; kill9_controller apf; apf_teardown; kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1' EXIT
	apf_setup "$NS"
	apply_foo "$NS" foo1 web1 1
	port=$(free_port)
	# -v=5: the REST client logs each retry with its delay (the Retry-After).
	start_controller apf --kubeconfig "$E2E_LOGS/apf-ctl.kubeconfig" --namespace "$NS" \
		--metrics-bind-address="127.0.0.1:$port" -v=5
	until_ok 20 prom_ge "127.0.0.1:$port" 1 rest_client_requests_total code=429 || fail "no 429 seen by the daemon"
	sleep "$APF_WARMUP"
	own0=$(prom_value "127.0.0.1:$port" rest_client_requests_total code=429)
	apf_window 0 "$APF_WINDOW"
	own1=$(prom_value "127.0.0.1:$port" rest_client_requests_total code=429)
	max_ra=$(grep -o 'reason="429 with Retry-After" delayMilliseconds=[0-9]*' "$E2E_LOGS/apf.log" |
		sed 's/.*=//' | sort -n | tail -n 1)
	max_ra=$(( ${max_ra:-1000} / 1000 ))
	# The old policy: one request per Retry-After (+ a round trip) per informer.
	allow=$(python3 -c "print(int($APF_INFORMERS * $APF_WINDOW / ($max_ra + 0.5)))")
	echo "rejected server-side in ${APF_WINDOW}s after ${APF_WARMUP}s: $APF_N ($APF_PER_MIN/min);" \
		"daemon's own 429s: $(python3 -c "print(int($own1 - $own0))"); largest Retry-After ${max_ra}s;" \
		"a retry every Retry-After would make >= $allow"
	[ "$APF_N" -gt 0 ] || fail "nothing rejected in the window: is the level rejecting?"
	[ "$APF_N" -lt "$allow" ] || fail "$APF_N requests in ${APF_WINDOW}s while rejected: no backoff (>= $allow)"
	grep -q '"Caches synced"' "$E2E_LOGS/apf.log" && fail "caches synced while every request was rejected"
	apf_converge "$NS" foo1 web1
	echo "converged ${APF_CONVERGE_S}s after the FlowSchema was deleted"
	test "$(jp "$NS" deploy/web1 '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')" = Foo/foo1 ||
		fail "web1 is not owned by foo1"
	stop_controller apf
}
