# API Priority and Fairness helpers shared by tests/e2e/test_apf.sh and
# bench/bench_apf.sh: put one controller's service account in a priority level
# that rejects every request with 429, count its rejections server-side, let it
# go again. Source after lib.sh.
#
# The level: Limited, nominalConcurrencyShares 0, lendablePercent 0,
# borrowingLimitPercent 0, limitResponse Reject. Its concurrency limit is 0, but
# APF still dispatches a request when nothing executes at the level (a request
# wider than the limit would never run otherwise): measured, five requests one
# after the other all got 200. tests/e2e/apf_blocker.py keeps one request
# executing there (its own FlowSchema, so its rejections are not counted as the
# controller's); then every other request gets 429.
# shellcheck shell=bash

APF_PL=e2e-apf-reject
APF_FS=e2e-apf-ctl           # the controller's FlowSchema: deleted to let it go
APF_FS_BLOCKER=e2e-apf-blocker

# apf_setup NS: service accounts apf-ctl (what the sample-controller needs, in NS)
# and apf-blocker in NS; writes $E2E_LOGS/apf-ctl.kubeconfig for apf-ctl; puts
# both in the rejecting level; returns once a request of apf-ctl gets 429.
apf_setup() {
	local ns="$1" tok btok
	kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: apf-ctl}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: apf-blocker}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: apf-ctl}
rules:
- {apiGroups: [samplecontroller.k8s.io], resources: [foos], verbs: [list, watch]}
- {apiGroups: [samplecontroller.k8s.io], resources: [foos/status], verbs: [update]}
- {apiGroups: [apps], resources: [deployments], verbs: [list, watch, create, update]}
- {apiGroups: [""], resources: [events], verbs: [create, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: apf-ctl}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: apf-ctl}
subjects: [{kind: ServiceAccount, name: apf-ctl, namespace: $ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: apf-blocker}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: apf-blocker}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: apf-blocker}
subjects: [{kind: ServiceAccount, name: apf-blocker, namespace: $ns}]
YAML
	kubectl apply -f - >/dev/null <<YAML
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: $APF_PL}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 0
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: $APF_FS_BLOCKER}
spec:
  priorityLevelConfiguration: {name: $APF_PL}
  matchingPrecedence: 99
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: ServiceAccount, serviceAccount: {name: apf-blocker, namespace: $ns}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]
YAML
	apf_reject "$ns"
	tok=$(kubectl -n "$ns" create token apf-ctl --duration=1h)
	kubeconfig_token "$E2E_LOGS/apf-ctl.kubeconfig" "$tok"
	btok=$(kubectl -n "$ns" create token apf-blocker --duration=1h)
	python3 "$E2E_ROOT/tests/e2e/apf_blocker.py" "$API_SERVER" "$CA_FILE" "$btok" "$ns" \
		>"$E2E_LOGS/apf-blocker.log" 2>&1 &
	echo $! >"$E2E_LOGS/apf-blocker.pid"
	APF_PROBE_URL="$API_SERVER/apis/apps/v1/namespaces/$ns/deployments"
	APF_PROBE_TOKEN="$tok"
	until_ok 30 apf_probe_is 429 || fail "requests of apf-ctl are not rejected with 429"
}

# apf_reject NS: (again) send apf-ctl of NS to the rejecting level.
apf_reject() {
	kubectl apply -f - >/dev/null <<YAML
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: $APF_FS}
spec:
  priorityLevelConfiguration: {name: $APF_PL}
  matchingPrecedence: 100
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: ServiceAccount, serviceAccount: {name: apf-ctl, namespace: $1}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
YAML
}

# apf_probe_is CODE: a GET as apf-ctl answers CODE.
apf_probe_is() {
	[ "$(curl -s -o /dev/null --max-time 5 --cacert "$CA_FILE" \
		-H "Authorization: Bearer $APF_PROBE_TOKEN" -w '%{http_code}' "$APF_PROBE_URL")" = "$1" ]
}

# apf_unreject: delete the controller's FlowSchema (it falls back to the built-in
# service-accounts one); returns once a request of apf-ctl is served again.
apf_unreject() {
	kubectl delete flowschema "$APF_FS" --ignore-not-found >/dev/null
	until_ok 30 apf_probe_is 200 || fail "apf-ctl still rejected after the FlowSchema went"
}

# apf_rejected: the kube-apiserver's count of requests of the controller's
# FlowSchema it rejected (all reasons).
apf_rejected() {
	kubectl get --raw /metrics | awk -v fs="flow_schema=\"$APF_FS\"" '
		/^apiserver_flowcontrol_rejected_requests_total\{/ && index($0, fs) { n += $NF }
		END { printf "%d\n", n }'
}

# apf_teardown: stop the blocker, delete the FlowSchemas and the level.
# Never fails (it runs from EXIT traps, under set -e).
apf_teardown() {
	local pid
	if pid=$(cat "$E2E_LOGS/apf-blocker.pid" 2>/dev/null); then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -f "$E2E_LOGS/apf-blocker.pid"
	kubectl delete flowschema "$APF_FS" "$APF_FS_BLOCKER" --ignore-not-found >/dev/null 2>&1 || true
	kubectl delete prioritylevelconfiguration "$APF_PL" --ignore-not-found >/dev/null 2>&1 || true
}

# apf_window WARMUP WINDOW: sleep WARMUP seconds (the controller was just started),
# then count the controller's rejected requests server-side over WINDOW seconds:
# sets APF_N (requests in the window) and APF_PER_MIN.
apf_window() {
	local r0 r1
	sleep "$1"
	r0=$(apf_rejected)
	sleep "$2"
	r1=$(apf_rejected)
	APF_N=$((r1 - r0))
	APF_PER_MIN=$((APF_N * 60 / $2))
}

# apf_converge NS FOO DEPLOYMENT: let the controller go (apf_unreject) and wait
# for FOO's Deployment and status (availableReplicas 1); sets APF_CONVERGE_S, the
# seconds from the FlowSchema's deletion to the status.
apf_converge() {
	local t0
	t0=$(date +%s.%N)
	apf_unreject
	until_ok 90 jp_eq "$1" "deploy/$3" '{.spec.replicas}' 1 || fail "no Deployment $3 after the FlowSchema went"
	until_ok 60 jp_eq "$1" "foo/$2" '{.status.availableReplicas}' 1 || fail "status of $2 not written"
	APF_CONVERGE_S=$(python3 -c "import time; print('%.1f' % (time.time() - $t0))")
}
