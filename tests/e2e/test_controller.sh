# sample-controller end to end, on the real local control plane.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Each test gets its own namespace and its own daemon restricted to it.
setup() {
	ensure_crd
	NS=$(new_ns "e2e-$1")
	start_controller "$1" --kubeconfig "$KUBECONFIG" --namespace "$NS" --resync-period=5s
}
teardown() {
	stop_controller "$1"
	kubectl delete namespace "$NS" --wait=false >/dev/null
}

deploy_ok() { # the Deployment has what newDeployment says
	local ns="$1" foo="$2" dep="$3" replicas="$4" uid
	uid=$(jp "$ns" "foo/$foo" '{.metadata.uid}')
	test "$(jp "$ns" "deploy/$dep" '{.metadata.labels.app},{.metadata.labels.controller}')" = "nginx,$foo" || return 1
	test "$(jp "$ns" "deploy/$dep" '{.spec.selector.matchLabels.app},{.spec.selector.matchLabels.controller}')" = "nginx,$foo" || return 1
	test "$(jp "$ns" "deploy/$dep" '{.spec.template.spec.containers[*].name}={.spec.template.spec.containers[*].image}')" = "nginx=nginx:latest" || return 1
	test "$(jp "$ns" "deploy/$dep" '{.spec.replicas}')" = "$replicas" || return 1
	test "$(jp "$ns" "deploy/$dep" '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].uid}/{.metadata.ownerReferences[0].controller}/{.metadata.ownerReferences[0].blockOwnerDeletion}/{.metadata.ownerReferences[0].apiVersion}')" \
		= "Foo/$foo/$uid/true/true/samplecontroller.k8s.io/v1alpha1"
}

t_create_scale_ready() {
	setup create
	apply_foo "$NS" foo1 web1 2
	until_ok 30 deploy_ok "$NS" foo1 web1 2 || fail "deployment web1 not as newDeployment says"
	until_ok 60 kubectl -n "$NS" wait --for=condition=Ready --timeout=2s foo/foo1 || fail "foo1 never Ready"
	test "$(jp "$NS" foo/foo1 '{.status.availableReplicas}')" = 2 || fail "availableReplicas != 2"
	test "$(jp "$NS" foo/foo1 '{.status.observedGeneration}')" = "$(jp "$NS" foo/foo1 '{.metadata.generation}')" || fail "observedGeneration"
	# Scale through the Foo: the Deployment follows, then the status.
	kubectl -n "$NS" patch foo foo1 --type merge -p '{"spec":{"replicas":3}}' >/dev/null
	until_ok 30 jp_eq "$NS" deploy/web1 '{.spec.replicas}' 3 || fail "deployment did not follow to 3"
	until_ok 60 jp_eq "$NS" foo/foo1 '{.status.availableReplicas}' 3 || fail "status did not follow to 3"
	[ -n "$(kubectl -n "$NS" get events --field-selector involvedObject.name=foo1,reason=Synced -o name)" ] || fail "no Synced event"
	teardown create
}

t_drift_is_repaired() {
	setup drift
	apply_foo "$NS" foo2 web2 2
	until_ok 30 deploy_ok "$NS" foo2 web2 2 || fail "no deployment"
	kubectl -n "$NS" scale deploy web2 --replicas=5 >/dev/null
	until_ok 30 jp_eq "$NS" deploy/web2 '{.spec.replicas}' 2 || fail "scale not reverted"
	kubectl -n "$NS" delete deploy web2 >/dev/null
	until_ok 30 deploy_ok "$NS" foo2 web2 2 || fail "deleted deployment not recreated"
	teardown drift
}

t_foreign_deployment_untouched() {
	setup foreign
	kubectl -n "$NS" create deployment taken --image=busybox --replicas=1 >/dev/null
	local rv; rv=$(jp "$NS" deploy/taken '{.metadata.generation}')
	apply_foo "$NS" foo3 taken 3
	until_ok 30 bash -c "kubectl -n $NS get events --field-selector involvedObject.name=foo3,reason=ErrResourceExists -o jsonpath='{.items[0].message}' | grep -q 'Resource \"taken\" already exists and is not managed by Foo'" ||
		fail "no ErrResourceExists warning event"
	test "$(jp "$NS" deploy/taken '{.metadata.generation}/{.spec.replicas}/{.spec.template.spec.containers[0].image}')" = "$rv/1/busybox" ||
		fail "foreign deployment was modified"
	test "$(jp "$NS" foo/foo3 '{.status.conditions[?(@.type=="Ready")].reason}')" = ErrResourceExists || fail "Ready reason"
	teardown foreign
}

t_foo_delete_collects_deployment() {
	setup gc
	apply_foo "$NS" foo4 web4 1
	until_ok 30 deploy_ok "$NS" foo4 web4 1 || fail "no deployment"
	kubectl -n "$NS" delete foo foo4 >/dev/null
	until_ok 60 bash -c "! kubectl -n $NS get deploy web4" || fail "deployment not garbage-collected"
	teardown gc
}

t_invalid_spec_reported() {
	setup invalid
	# The CRD validates names and replicas; a Foo without deploymentName passes it.
	apply_foo "$NS" foo5 "" 1
	until_ok 30 bash -c "kubectl -n $NS get events --field-selector involvedObject.name=foo5,reason=InvalidSpec -o name | grep -q ." ||
		fail "no InvalidSpec event"
	until_ok 30 jp_eq "$NS" foo/foo5 '{.status.conditions[?(@.type=="Ready")].status}' False || fail "not Ready=False"
	# Fixing it converges.
	apply_foo "$NS" foo5 web5 1
	until_ok 30 deploy_ok "$NS" foo5 web5 1 || fail "no deployment after the fix"
	teardown invalid
}

# A resync of unchanged Foos (valid ones and one whose spec is invalid) makes no API
# write at all: no status update, no Deployment update, no Event create or patch.
# Counted by the daemon's own rest_client_requests_total, since an Event repeat
# would only grow a count and leave the number of Event objects unchanged.
t_resync_writes_nothing() {
	ensure_crd
	NS=$(new_ns e2e-resync)
	local m; m=127.0.0.1:$(free_port)
	start_controller resync --kubeconfig "$KUBECONFIG" --namespace "$NS" --resync-period=5s \
		--metrics-bind-address="$m"
	for i in 1 2 3; do apply_foo "$NS" "r$i" "rd$i" 1; done
	apply_foo "$NS" rbad "" 1
	for i in 1 2 3; do until_ok 60 kubectl -n "$NS" wait --for=condition=Ready --timeout=2s "foo/r$i" || fail "r$i not Ready"; done
	until_ok 30 jp_eq "$NS" foo/rbad '{.status.conditions[?(@.type=="Ready")].reason}' InvalidSpec || fail "rbad not reported InvalidSpec"
	sleep 3
	local before after syncs0 rvs
	before=$(prom_value "$m" rest_client_requests_total 'method!=GET') || fail "/metrics"
	syncs0=$(grep -c '"Successfully synced"' "$E2E_LOGS/resync.log" || true)
	rvs=$(kubectl -n "$NS" get foos,deployments -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}')
	sleep 12 # two resync periods of 5 s
	after=$(prom_value "$m" rest_client_requests_total 'method!=GET') || fail "/metrics"
	test "$before" = "$after" || fail "resync wrote to the API server ($before -> $after writes)"
	test "$(kubectl -n "$NS" get foos,deployments -o jsonpath='{range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}')" = "$rvs" ||
		fail "resync changed a Foo or a Deployment"
	test "$(grep -c '"Successfully synced"' "$E2E_LOGS/resync.log")" -ge $((syncs0 + 6)) || fail "resyncs did not reconcile"
	teardown resync
}

t_kill9_and_restart_converges() {
	setup kill9
	apply_foo "$NS" foo6 web6 1
	until_ok 30 deploy_ok "$NS" foo6 web6 1 || fail "no deployment"
	kill9_controller kill9
	apply_foo "$NS" foo6 web6 4
	apply_foo "$NS" foo7 web7 2
	start_controller kill9 --kubeconfig "$KUBECONFIG" --namespace "$NS"
	until_ok 30 deploy_ok "$NS" foo6 web6 4 || fail "foo6 change missed"
	until_ok 30 deploy_ok "$NS" foo7 web7 2 || fail "foo7 missed"
	teardown kill9
}

t_apiserver_restart_converges() {
	setup apirestart
	apply_foo "$NS" foo8 web8 1
	until_ok 30 deploy_ok "$NS" foo8 web8 1 || fail "no deployment"
	bash "$E2E_ROOT/hack/local-ctl.sh" restart-apiserver
	apply_foo "$NS" foo8 web8 3
	apply_foo "$NS" foo9 web9 1
	until_ok 60 deploy_ok "$NS" foo8 web8 3 || fail "change after restart missed"
	until_ok 60 deploy_ok "$NS" foo9 web9 1 || fail "new foo after restart missed"
	teardown apirestart
}

t_in_cluster_with_deploy_rbac() {
	ensure_crd
	kubectl apply -f "$E2E_ROOT/deploy/base/namespace.yaml" -f "$E2E_ROOT/deploy/base/serviceaccount.yaml" -f "$E2E_ROOT/deploy/cluster/rbac.yaml" \
		-f "$E2E_ROOT/deploy/base/admission-policy.yaml" >/dev/null
	NS=$(new_ns e2e-incluster)
	local sa="$E2E_LOGS/sa-incluster"
	rm -rf "$sa"; mkdir -p "$sa"
	kubectl -n sample-controller create token sample-controller --duration=1h >"$sa/token"
	cp "$CA_FILE" "$sa/ca.crt"
	echo sample-controller >"$sa/namespace"
	# In-cluster configuration: no kubeconfig anywhere, only the service account.
	SC_ENV=(-u KUBECONFIG HOME="$sa" CKUBE_SERVICEACCOUNT_DIR="$sa"
		KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$API_PORT")
	start_controller incluster --namespace "$NS" --leader-elect \
		--leader-elect-lease-duration=4s --leader-elect-renew-deadline=3s --leader-elect-retry-period=1s
	SC_ENV=()
	apply_foo "$NS" foo10 web10 2
	until_ok 60 deploy_ok "$NS" foo10 web10 2 || { tail -20 "$E2E_LOGS/incluster.log"; fail "in-cluster daemon did not reconcile"; }
	until_ok 60 kubectl -n "$NS" wait --for=condition=Ready --timeout=2s foo/foo10 || fail "status not written in-cluster"
	test "$(kubectl -n sample-controller get lease sample-controller -o jsonpath='{.spec.holderIdentity}')" != "" || fail "no lease holder"
	grep -q 'forbidden' "$E2E_LOGS/incluster.log" && fail "RBAC denied something: $(grep -m1 forbidden "$E2E_LOGS/incluster.log")"
	stop_controller incluster
	# SIGTERM released the lease.
	test "$(kubectl -n sample-controller get lease sample-controller -o jsonpath='{.spec.holderIdentity}')" = "" || fail "lease not released"
	kubectl delete namespace "$NS" --wait=false >/dev/null
}

t_bad_config_clear_errors() {
	local out rc=0
	printf 'apiVersion: v1\nkind: Config\nclusters: [\n' >"$E2E_LOGS/bad.kubeconfig"
	out=$("$SC_BIN" --kubeconfig "$E2E_LOGS/bad.kubeconfig" 2>&1) || rc=$?
	test "$rc" = 2 || fail "malformed kubeconfig: exit $rc, want 2"
	grep -q "$E2E_LOGS/bad.kubeconfig" <<<"$out" || fail "error does not name the file: $out"
	test "$(echo "$out" | wc -l)" = 1 || fail "more than one line: $out"
	rc=0; out=$("$SC_BIN" --kubeconfig /nonexistent/kubeconfig 2>&1) || rc=$?
	test "$rc" = 2 && grep -q /nonexistent/kubeconfig <<<"$out" || fail "missing kubeconfig: $rc $out"
	rc=0; out=$("$SC_BIN" --workers=zero 2>&1) || rc=$?
	test "$rc" = 2 && grep -q -- '-workers' <<<"$out" || fail "bad flag: $rc $out"
	# Unreachable server: keeps running and says why it cannot sync.
	start_controller unreachable --master https://127.0.0.1:1 --kubeconfig "$KUBECONFIG"
	until_ok 20 grep -q 'Caches not synced yet.*127.0.0.1:1' "$E2E_LOGS/unreachable.log" ||
		{ tail "$E2E_LOGS/unreachable.log"; fail "no clear reason for the unreachable server"; }
	stop_controller unreachable
}

# The CRD: validation (replicas 1..10, deploymentName a DNS-1123 name), the short
# name, printer columns; and the daemon's --version.
t_crd_validation_and_columns() {
	ensure_crd
	NS=$(new_ns e2e-crd)
	local out rc
	for bad in '"deploymentName":"web","replicas":11' '"deploymentName":"web","replicas":0' \
		'"deploymentName":"Bad_Name","replicas":1'; do
		rc=0
		out=$(echo "{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",\"kind\":\"Foo\",\"metadata\":{\"name\":\"v\"},\"spec\":{$bad}}" |
			kubectl -n "$NS" apply -f - 2>&1) || rc=$?
		test "$rc" != 0 && grep -q 'Invalid value' <<<"$out" || fail "spec {$bad} was not rejected: $out"
	done
	apply_foo "$NS" good web 3
	[ "$(kubectl -n "$NS" get fo good -o name)" = foo.samplecontroller.k8s.io/good ] || fail "short name fo"
	# sed reads it all: head may exit before kubectl's last write, and pipefail
	# then fails on kubectl's SIGPIPE (141) -- it did once, in a fresh make test.
	out=$(kubectl -n "$NS" get foos | sed -n 1p)
	for col in NAME DEPLOYMENT DESIRED AVAILABLE READY AGE; do
		grep -qw "$col" <<<"$out" || fail "no printer column $col: $out"
	done
	out=$("$SC_BIN" --version 2>&1) || fail "--version exited non-zero"
	grep -q "$(cat "$E2E_ROOT/VERSION")" <<<"$out" || fail "--version does not print the VERSION: $out"
	kubectl delete namespace "$NS" --wait=false >/dev/null
}

# The Foo CRD is missing when the daemon starts: it keeps running, says why it
# cannot sync (instead of hanging silently, as client-go's WaitForCacheSync does),
# and once the CRD is installed it syncs and reconciles without a restart.
t_crd_missing_reported_then_recovers() {
	NS=$(new_ns e2e-nocrd)
	kubectl delete -f "$E2E_ROOT/deploy/crd.yaml" --ignore-not-found --wait=true --timeout=120s >/dev/null
	start_controller nocrd --kubeconfig "$KUBECONFIG" --namespace "$NS"
	until_ok 30 grep -q 'Caches not synced yet.*CRD installed' "$E2E_LOGS/nocrd.log" ||
		{ tail -n 5 "$E2E_LOGS/nocrd.log"; ensure_crd; fail "no clear reason for the missing CRD"; }
	grep -q '"Started workers"' "$E2E_LOGS/nocrd.log" && { ensure_crd; fail "workers started without the Foo cache"; }
	ensure_crd
	apply_foo "$NS" late weblate 1
	until_ok 90 deploy_ok "$NS" late weblate 1 || fail "no deployment after the CRD was installed"
	grep -q '"Caches synced"' "$E2E_LOGS/nocrd.log" || fail "no 'Caches synced' in the log"
	teardown nocrd
}
