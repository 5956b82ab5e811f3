#!/usr/bin/env bash
# Entry point of `make bench`: every component benchmark (bench/bench_*.sh), then the
# system ones, each on a control plane: the sharded daemon (bench_sharded.sh), the
# four controllers at scale on ckube-envtest (bench_scale.sh: up to 10,000 Foos,
# 100,000 with BENCH_FULL=1), and the controller benchmark on the real local
# control plane, side by side with the Go original and the controller-runtime and
# kube-rs peers (bench/peers/; building them needs go and cargo): quick mode (1,000
# Foos, 60 s steady window) unless BENCH_FULL=1 (1,000 and 10,000 Foos, 10 min
# window; see bench/bench_controller.sh for the knobs).
# Prints figures; asserts nothing about speed. Exits non-zero if a benchmark could
# not run or a component one ran over BENCH_COMPONENT_TIMEOUT seconds (default 600,
# 3600 with BENCH_FULL=1); the system ones have their own time limits.
#
# The control plane is started first if it is not running (bench_cache.sh uses it
# too) and stopped at the end if it was started here (BENCH_KEEP_CLUSTER=1 keeps it).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

started=0
cleanup() {
	if [ "$started" = 1 ] && [ -z "${BENCH_KEEP_CLUSTER:-}" ]; then bash hack/local-down.sh; fi
}
trap cleanup EXIT
if ! { [ -f .local/env ] && KUBECONFIG=.local/kubeconfig kubectl get --raw /readyz >/dev/null 2>&1; }; then
	bash hack/local-up.sh || { echo "bench: could not start the local control plane" >&2; exit 1; }
	started=1
fi
export KUBECONFIG="$root/.local/kubeconfig"

limit="${BENCH_COMPONENT_TIMEOUT:-600}"
[ "${BENCH_FULL:-0}" = 1 ] && limit="${BENCH_COMPONENT_TIMEOUT:-3600}"
rc=0
system=" bench/bench_sharded.sh bench/bench_scale.sh bench/bench_controller.sh "
for f in bench/bench_*.sh; do
	[[ "$system" == *" $f "* ]] && continue
	echo "== $(basename "$f" .sh)"
	# A hung benchmark must not hold up the others.
	timeout "$limit" bash "$f" || { echo "bench: $f failed or ran over ${limit}s" >&2; rc=1; }
	echo
done
for f in bench/bench_sharded.sh bench/bench_scale.sh; do
	echo "== $(basename "$f" .sh)"
	bash "$f" || { echo "bench: $f failed" >&2; rc=1; }
	echo
done

echo "== bench_controller"
if [ "${BENCH_FULL:-0}" = 1 ]; then
	bash bench/bench_controller.sh || rc=1
else
	BENCH_QUICK=1 bash bench/bench_controller.sh || rc=1
fi
exit "$rc"
