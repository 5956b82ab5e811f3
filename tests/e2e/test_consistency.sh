# The informers' consistency check (--cache-consistency-check-period) against the
# real API server: its Exact lists at the cache's resourceVersion are accepted,
# rounds complete while Foos churn and etcd is compacted under them, and the
# caches of both informers never diverge from the server.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cc_checks() { prom_value "$1" informer_consistency_checks_total "resource=$2"; }

t_consistency_check_under_churn() {
	ensure_crd
	local ns m
	ns=$(new_ns e2e-consistency)
	m=127.0.0.1:$(free_port)
	start_controller cons --kubeconfig "$KUBECONFIG" --namespace "$ns" \
		--metrics-bind-address=$m --cache-consistency-check-period=1s
	until_ok 30 prom_eq "$m" 2 informer_synced || fail "informers never synced"
	until_ok 30 prom_ge "$m" 1 informer_consistency_checks_total resource=foos.samplecontroller.k8s.io ||
		fail "no consistency check of foos completed: $(grep -i consisten "$E2E_LOGS/cons.log" | tail -n 3)"
	# Churn: creates, scale changes and deletes, and a compaction in the middle.
	local i
	for i in $(seq 1 20); do apply_foo "$ns" "c$i" "cd$i" 1; done
	bash "$E2E_ROOT/hack/local-ctl.sh" compact >/dev/null
	for i in $(seq 1 20 | shuf | head -n 10); do apply_foo "$ns" "c$i" "cd$i" 2; done
	for i in $(seq 1 5); do kubectl -n "$ns" delete foo "c$i" --wait=false >/dev/null; done
	until_ok 60 bash -c "[ \$(kubectl -n $ns get deploy -o name | wc -l) = 15 ]" ||
		fail "garbage collection: $(kubectl -n "$ns" get deploy -o name | wc -l) Deployments, want 15"
	# Quiet now: every check from here on must compare equal.
	local f0 d0
	f0=$(cc_checks "$m" foos.samplecontroller.k8s.io)
	d0=$(cc_checks "$m" deployments.apps)
	until_ok 30 prom_ge "$m" "$(python3 -c "print($f0 + 3)")" informer_consistency_checks_total resource=foos.samplecontroller.k8s.io ||
		fail "foos: consistency checks stopped at $(cc_checks "$m" foos.samplecontroller.k8s.io)"
	until_ok 30 prom_ge "$m" "$(python3 -c "print($d0 + 3)")" informer_consistency_checks_total resource=deployments.apps ||
		fail "deployments: consistency checks stopped at $(cc_checks "$m" deployments.apps)"
	prom_eq "$m" 0 informer_consistency_divergent_objects || fail "divergent objects: $(prom_value "$m" informer_consistency_divergent_objects)"
	if grep -q 'Cache diverges' "$E2E_LOGS/cons.log"; then
		fail "the log reports divergence: $(grep 'Cache diverges' "$E2E_LOGS/cons.log" | head -n 3)"
	fi
	stop_controller cons
	kubectl delete namespace "$ns" --wait=false >/dev/null
}
