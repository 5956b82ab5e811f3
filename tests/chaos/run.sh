#!/usr/bin/env bash
# make chaos (not part of make test): tests/chaos/chaos.py against the local control
# plane, started here if it is not running and stopped after. Prints one table and
# fails on any violation. CHAOS_SECONDS (1200), CHAOS_FOOS (5000), CHAOS_QUIET (300),
# CHAOS_SEED; CHAOS_IMPL=go drives the Go sample-controller instead, for comparison;
# the other knobs are in chaos.py.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
started=0
if ! { [ -f .local/env ] && KUBECONFIG=.local/kubeconfig kubectl get --raw /readyz >/dev/null 2>&1; }; then
	bash hack/local-up.sh >/dev/null || { echo "chaos: could not start the local control plane" >&2; exit 1; }
	started=1
fi
cleanup() { if [ "$started" = 1 ] && [ -z "${CHAOS_KEEP_CLUSTER:-}" ]; then bash hack/local-down.sh >/dev/null; fi; }
trap cleanup EXIT
export KUBECONFIG="$root/.local/kubeconfig"
kubectl apply -f deploy/crd.yaml >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/foos.samplecontroller.k8s.io >/dev/null
if [ "${CHAOS_IMPL:-c}" = go ] && [ -z "${CHAOS_GO_BIN:-}" ]; then
	CHAOS_GO_BIN="$(bash bench/build_go_controller.sh | tail -n 1)" || { echo "chaos: could not build the Go sample-controller" >&2; exit 1; }
	export CHAOS_GO_BIN
fi
# Outside .local, which local-down removes with the control plane.
export CHAOS_OUT="${CHAOS_OUT:-$root/build/chaos${CHAOS_IMPL:+-$CHAOS_IMPL}}"
rm -rf "$CHAOS_OUT"
python3 tests/chaos/chaos.py
