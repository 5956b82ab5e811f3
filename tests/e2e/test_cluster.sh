# The local control plane itself is real and complete.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t_crd_becomes_established() {
	kubectl apply -f deploy/crd.yaml
	until_ok 30 kubectl wait --for=condition=Established --timeout=5s crd/foos.samplecontroller.k8s.io
}

t_deployment_becomes_available() {
	local ns; ns=$(new_ns e2e-dep)
	kubectl -n "$ns" create deployment web --image=nginx:latest --replicas=2
	until_ok 180 jp_eq "$ns" deploy/web "{.status.availableReplicas}" 2 ||
		fail "deployment web never reported 2 available replicas"
	kubectl delete namespace "$ns" --wait=false
}

t_garbage_collector_deletes_dependents() {
	local ns; ns=$(new_ns e2e-gc)
	kubectl -n "$ns" create configmap owner
	local uid; uid=$(kubectl -n "$ns" get configmap owner -o jsonpath='{.metadata.uid}')
	kubectl -n "$ns" apply -f - <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: $uid}
YAML
	kubectl -n "$ns" delete configmap owner
	until_ok 60 bash -c "! kubectl -n $ns get configmap dependent" ||
		fail "dependent was not garbage-collected"
	kubectl delete namespace "$ns" --wait=false
}

t_both_contexts_accepted_wrong_token_rejected() {
	test "$(kubectl --context token auth whoami -o jsonpath='{.status.userInfo.username}')" = token-admin
	test "$(kubectl --context cert auth whoami -o jsonpath='{.status.userInfo.username}')" = cert-admin
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$CA_FILE" \
		-H "Authorization: Bearer not-a-valid-token" "$API_SERVER/api")
	test "$code" = 401 || fail "wrong token answered $code, want 401"
	# The server certificate is verified (no -k): a wrong CA must fail.
	! curl -s -o /dev/null --cacert /etc/ssl/certs/ca-certificates.crt "$API_SERVER/api" ||
		fail "TLS accepted without the local CA"
}
