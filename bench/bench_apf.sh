#!/usr/bin/env bash
# The C daemon and Kubernetes' Go sample-controller under API Priority and
# Fairness, on the real local control plane: each in turn runs as a service
# account that a priority level rejects with 429 on every request (the set-up of
# tests/e2e/test_apf.sh, shared through tests/e2e/apf_lib.sh). The kube-apiserver
# counts the rejected requests (apiserver_flowcontrol_rejected_requests_total of
# the FlowSchema) from the start, over a first stretch and over the window after
# it; then the FlowSchema is deleted and the time until a Foo (created before the
# start) has its Deployment and status is taken. Prints a table; asserts nothing.
#
#   bash bench/bench_apf.sh [c|go|both]        (default both; C first)
#
# Environment:
#   BENCH_APF_WARMUP   seconds from the start to the window (70; the e2e test waits 150)
#   BENCH_APF_WINDOW   the window, seconds (60)
#   SC_BIN             the C daemon (default: lib.sh's, the ASan build or bin/)
#   GO_SC_BIN          the Go original (default: bench/build_go_controller.sh)
# Needs the local control plane (bash hack/local-up.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
case "${1:-both}" in
c) impls=(c) ;;
go) impls=(go) ;;
both) impls=(c go) ;;
*) echo "usage: $0 [c|go|both]" >&2; exit 2 ;;
esac
WARMUP="${BENCH_APF_WARMUP:-70}"
WINDOW="${BENCH_APF_WINDOW:-60}"

[ -f .local/env ] || { echo "bench-apf: no local control plane; run bash hack/local-up.sh" >&2; exit 1; }
# shellcheck source=../tests/e2e/lib.sh
. tests/e2e/lib.sh
# shellcheck source=../tests/e2e/apf_lib.sh
. tests/e2e/apf_lib.sh
kubectl get --raw /readyz >/dev/null 2>&1 || { echo "bench-apf: the local API server is not ready" >&2; exit 1; }
if [[ " ${impls[*]} " == *" go "* ]] && [ -z "${GO_SC_BIN:-}" ]; then
	GO_SC_BIN="$(bash bench/build_go_controller.sh | tail -n 1)"
fi

NS="" pid=""
cleanup() {
	set +e
	[ -n "$pid" ] && { kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
	apf_teardown
	[ -n "$NS" ] && kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1
	return 0
}
trap cleanup EXIT

rows=()
for impl in "${impls[@]}"; do
	ensure_crd
	NS=$(new_ns "bench-apf-$impl")
	apf_setup "$NS"
	apply_foo "$NS" foo1 web1 1
	log="$E2E_LOGS/bench-apf-$impl.log"
	r0=$(apf_rejected)
	if [ "$impl" = c ]; then
		"$SC_BIN" --kubeconfig "$E2E_LOGS/apf-ctl.kubeconfig" --namespace "$NS" \
			--metrics-bind-address=0 --health-probe-bind-address=0 -v=2 >"$log" 2>&1 &
	else
		"$GO_SC_BIN" -kubeconfig "$E2E_LOGS/apf-ctl.kubeconfig" -namespace "$NS" -v=2 >"$log" 2>&1 &
	fi
	pid=$!
	echo "bench-apf: $impl started in $NS; counting for $((WARMUP + WINDOW)) s" >&2
	sleep "$WARMUP"
	r1=$(apf_rejected)
	sleep "$WINDOW"
	r2=$(apf_rejected)
	apf_converge "$NS" foo1 web1
	rows+=("$(printf '%-6s %16d %16d %8d %12s' "$impl" $((r1 - r0)) $((r2 - r1)) \
		$(((r2 - r1) * 60 / WINDOW)) "$APF_CONVERGE_S")")
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=""
	apf_teardown
	kubectl delete namespace "$NS" --wait=false >/dev/null
	NS=""
done

printf '\nRejected (429) requests counted by the kube-apiserver; window %d-%d s after the start.\n' \
	"$WARMUP" $((WARMUP + WINDOW))
printf '%-6s %16s %16s %8s %12s\n' controller "first ${WARMUP}s" "window ${WINDOW}s" "req/min" "converge s"
printf '%s\n' "${rows[@]}"
