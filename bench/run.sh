#!/usr/bin/env bash
# Entry point of `make bench`: every component benchmark (bench/bench_*.sh), then the
# controller benchmark on the real local control plane, side by side with the Go
# original: quick mode (1,000 Foos, 60 s steady window) unless BENCH_FULL=1 (1,000
# and 10,000 Foos, 10 min window; see bench/bench_controller.sh for the knobs).
# Prints figures; asserts nothing about speed. Exits non-zero only if a benchmark
# could not run.
#
# The control plane is started after the component benchmarks (so they run on a
# quieter machine) if it is not already running, and stopped at the end if it was
# started here (BENCH_KEEP_CLUSTER=1 keeps it).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

rc=0
for f in bench/bench_*.sh; do
	[ "$f" = bench/bench_controller.sh ] && continue
	echo "== $(basename "$f" .sh)"
	bash "$f" || { echo "bench: $f failed" >&2; rc=1; }
	echo
done

started=0
cleanup() {
	if [ "$started" = 1 ] && [ -z "${BENCH_KEEP_CLUSTER:-}" ]; then bash hack/local-down.sh; fi
}
trap cleanup EXIT
if ! { [ -f .local/env ] && KUBECONFIG=.local/kubeconfig kubectl get --raw /readyz >/dev/null 2>&1; }; then
	bash hack/local-up.sh || { echo "bench: could not start the local control plane" >&2; exit 1; }
	started=1
fi

echo "== bench_controller"
if [ "${BENCH_FULL:-0}" = 1 ]; then
	bash bench/bench_controller.sh || rc=1
else
	BENCH_QUICK=1 bash bench/bench_controller.sh || rc=1
fi
exit "$rc"
