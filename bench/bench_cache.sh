#!/usr/bin/env bash
# Builds and runs the pkg/cache benchmark (prints figures; asserts nothing).
#   bash bench/bench_cache.sh          # build dir: $B, default build-bench-cache
# In-process figures always: dispatch throughput through the delta queue, bytes per
# cached Deployment. On the local control plane too when it is running ($KUBECONFIG
# or .local/kubeconfig): an informer over 10,000 Deployments, and 50,000 with
# BENCH_FULL=1 (creating them takes minutes). They live in namespace cache-bench, which
# is deleted at the end (the control plane is shared: other benchmarks would list
# them) unless BENCH_CACHE_KEEP=1 keeps it for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build-bench-cache}
mkdir -p "$B"
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_cc "$B/bench_cache" bench/bench_cache.c meta codec kinds clientcmd flowcontrol rest apply gen cache

"$B/bench_cache" dispatch 10000 2000000
"$B/bench_cache" memory 50000

export KUBECONFIG=${KUBECONFIG:-$PWD/.local/kubeconfig}
if ! kubectl get --raw /readyz >/dev/null 2>&1; then
	echo "cluster: skipped (no local control plane; hack/local-up.sh starts one)"
	exit 0
fi
sizes="10000"
[ "${BENCH_FULL:-0}" = 1 ] && sizes="10000 50000"
for n in $sizes; do
	"$B/bench_cache" cluster "$n"
done
if [ "${BENCH_CACHE_KEEP:-0}" != 1 ]; then
	kubectl delete namespace cache-bench --wait=false >/dev/null 2>&1 || true
fi
