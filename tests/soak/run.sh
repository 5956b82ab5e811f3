#!/usr/bin/env bash
# Soak test (make soak; not part of make test, it takes minutes): two daemons, one
# under valgrind (memcheck, leaks) and one built with ThreadSanitizer, each leading
# in its own namespace with metrics and probes on, while tests/soak/churn.sh creates,
# changes and deletes Foos, scales and deletes their Deployments and plants foreign
# ones. Then SIGTERM: both must exit 0, valgrind must report no error and nothing
# definitely or indirectly lost, TSan no race. Prints the figures.
#   SOAK_SECONDS   churn time (default 480)
# Needs the local control plane (started here if it is not running, stopped after).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
secs="${SOAK_SECONDS:-480}"
out="$root/.local/soak"
started=0
if ! { [ -f .local/env ] && KUBECONFIG=.local/kubeconfig kubectl get --raw /readyz >/dev/null 2>&1; }; then
	bash hack/local-up.sh >/dev/null || { echo "soak: could not start the local control plane" >&2; exit 1; }
	started=1
fi
cleanup() { if [ "$started" = 1 ]; then bash hack/local-down.sh >/dev/null; fi; }
trap cleanup EXIT
export KUBECONFIG="$root/.local/kubeconfig"
mkdir -p "$out"
kubectl apply -f deploy/crd.yaml >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/foos.samplecontroller.k8s.io >/dev/null
suffix=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
ns_vg="soak-vg-$suffix" ns_ts="soak-tsan-$suffix"
kubectl create namespace "$ns_vg" >/dev/null && kubectl create namespace "$ns_ts" >/dev/null || exit 1
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
m_vg=127.0.0.1:$(port) m_ts=127.0.0.1:$(port)
common=(--kubeconfig "$KUBECONFIG" --resync-period=10s --leader-elect -v=2 --metrics-secure=false)

valgrind --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=definite,indirect \
	--error-exitcode=3 --log-file="$out/valgrind.txt" bin/sample-controller "${common[@]}" \
	--namespace "$ns_vg" --leader-elect-resource-namespace="$ns_vg" \
	--metrics-bind-address="$m_vg" --health-probe-bind-address=0 >"$out/vg.log" 2>&1 &
pid_vg=$!
TSAN_OPTIONS="halt_on_error=0 exitcode=66" "$B_TSAN/sample-controller" "${common[@]}" \
	--namespace "$ns_ts" --leader-elect-resource-namespace="$ns_ts" \
	--metrics-bind-address="$m_ts" --health-probe-bind-address=0 >"$out/tsan.log" 2>&1 &
pid_ts=$!
for f in vg tsan; do
	for _ in $(seq 120); do grep -q '"Started workers"' "$out/$f.log" && break; sleep 0.5; done
	grep -q '"Started workers"' "$out/$f.log" || { echo "soak: the $f daemon did not start" >&2; tail "$out/$f.log" >&2; kill -9 $pid_vg $pid_ts; exit 1; }
done
echo "soak: churning for ${secs}s in $ns_vg (valgrind) and $ns_ts (TSan)"
bash tests/soak/churn.sh "$ns_vg" "$secs" "$m_vg" &
c1=$!
bash tests/soak/churn.sh "$ns_ts" "$secs" "$m_ts" &
c2=$!
wait $c1 $c2
sleep 15 # let the last changes reconcile
for m in "$m_vg" "$m_ts"; do
	curl -sf "http://$m/metrics" | grep -E '^(controller_runtime_reconcile_total|process_resident_memory_bytes) '"|"'^controller_runtime_reconcile_total\{' | sed "s/^/  $m /"
done
hwm() { awk '/VmHWM/ {print $2 " kB"}' "/proc/$1/status"; }
echo "  peak RSS: valgrind daemon $(hwm $pid_vg) (under memcheck), TSan daemon $(hwm $pid_ts)"
kill -TERM $pid_vg $pid_ts
rc=0
wait $pid_vg; rv=$?
wait $pid_ts; rt=$?
grep -E 'definitely lost|indirectly lost|possibly lost|still reachable|ERROR SUMMARY' "$out/valgrind.txt" | sed 's/^==[0-9]*==/  valgrind:/'
races=$(grep -c 'WARNING: ThreadSanitizer' "$out/tsan.log" || true)
echo "  exit codes: valgrind daemon $rv, TSan daemon $rt; TSan reports: $races"
[ "$rv" = 0 ] || { echo "soak: FAIL: the valgrind daemon exited $rv (3 = memcheck errors or leaks; see $out/valgrind.txt)"; rc=1; }
[ "$rt" = 0 ] && [ "$races" = 0 ] || { echo "soak: FAIL: TSan daemon exited $rt with $races reports (see $out/tsan.log)"; rc=1; }
kubectl delete namespace "$ns_vg" "$ns_ts" --wait=false >/dev/null 2>&1
[ "$rc" = 0 ] && echo "soak: 2 passed, 0 failed" || echo "soak: failed"
exit "$rc"
