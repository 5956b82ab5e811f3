# deploy/ as a security reviewer reads it, on the real API server: the admission
# policy that keeps the cluster-wide controller's writes to Deployments a Foo
# controls, and the namespaced install (deploy/namespaced/) that confines it to one
# namespace. (The restricted Pod Security labels and the network policy are applied
# with the rest of deploy/ by node_deploy.sh, whose pods must pass them.)
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SC_SA=system:serviceaccount:sample-controller:sample-controller

# owned_deploy_ok NS FOO DEPLOYMENT REPLICAS: the Foo's Deployment exists, is
# controlled by it and has its replicas.
owned_deploy_ok() {
	test "$(jp "$1" "deploy/$3" '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}/{.spec.replicas}')" = "Foo/$2/true/$4"
}

# as_sa_create_denied NS NAME: a server-side dry-run create of an unowned Deployment,
# as the controller's service account, is refused by the admission policy.
as_sa_create_denied() {
	local out
	out=$(kubectl --as="$SC_SA" -n "$1" create deployment "$2" --image=csc.invalid/x \
		--dry-run=server 2>&1) && return 1
	grep -q 'may only write Deployments controlled by a Foo' <<<"$out"
}

t_deploy_admission_policy_owned_only() {
	ensure_crd
	kubectl apply -f "$E2E_ROOT/deploy/base/namespace.yaml" -f "$E2E_ROOT/deploy/base/serviceaccount.yaml" \
		-f "$E2E_ROOT/deploy/cluster/rbac.yaml" -f "$E2E_ROOT/deploy/base/admission-policy.yaml" >/dev/null
	# The API server loads policies through its own informer: wait until it enforces
	# this one (a dry run changes nothing).
	until_ok 60 as_sa_create_denied kube-system csc-probe ||
		fail "the controller's service account may create an unowned Deployment in kube-system"

	# Someone else's Deployment in kube-system.
	kubectl -n kube-system delete deployment csc-outsider --ignore-not-found >/dev/null
	kubectl -n kube-system create deployment csc-outsider --image=csc.invalid/x --replicas=0 >/dev/null
	local obj out
	obj=$(kubectl -n kube-system get deployment csc-outsider -o json)
	# Rewrite it (update is in the ClusterRole): refused.
	out=$(sed 's/"replicas": 0/"replicas": 5/' <<<"$obj" | kubectl --as="$SC_SA" replace -f - 2>&1) &&
		fail "the controller's service account rewrote kube-system/csc-outsider: $out"
	grep -q 'may only write Deployments controlled by a Foo; kube-system/csc-outsider' <<<"$out" ||
		fail "update refused, but not by the policy: $out"
	# Adopt it by adding a Foo as its controller: refused too (it was not owned before).
	out=$(python3 -c '
import json, sys
d = json.load(sys.stdin)
d["metadata"]["ownerReferences"] = [{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
    "name": "x", "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]
print(json.dumps(d))' <<<"$obj" | kubectl --as="$SC_SA" replace -f - 2>&1) &&
		fail "the controller's service account adopted kube-system/csc-outsider: $out"
	grep -q 'controlled by a Foo' <<<"$out" || fail "adoption refused, but not by the policy: $out"
	# Patch is not even in its RBAC.
	out=$(kubectl --as="$SC_SA" -n kube-system patch deployment csc-outsider --type merge \
		-p '{"spec":{"replicas":3}}' 2>&1) && fail "the controller's service account patched kube-system/csc-outsider"
	test "$(kubectl -n kube-system get deployment csc-outsider -o jsonpath='{.spec.replicas}')" = 0 ||
		fail "kube-system/csc-outsider was changed"

	# A Deployment a Foo controls may be written (what the controller does).
	local ns
	ns=$(new_ns e2e-vap)
	out=$(kubectl --as="$SC_SA" -n "$ns" create --dry-run=server -o name -f - 2>&1 <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: owned
  ownerReferences:
  - {apiVersion: samplecontroller.k8s.io/v1alpha1, kind: Foo, name: f, uid: 00000000-0000-0000-0000-000000000002, controller: true, blockOwnerDeletion: true}
spec:
  replicas: 0
  selector: {matchLabels: {app: owned}}
  template:
    metadata: {labels: {app: owned}}
    spec: {containers: [{name: c, image: csc.invalid/x}]}
YAML
	) || fail "a Deployment controlled by a Foo was refused: $out"
	# The controller itself, as that service account, works under the enforced
	# policy: it creates its Foo's Deployment and updates it on a scale.
	local sa="$E2E_LOGS/sa-vap"
	rm -rf "$sa"; mkdir -p "$sa"
	kubectl -n sample-controller create token sample-controller --duration=1h >"$sa/token"
	kubeconfig_token "$sa/kubeconfig" "$(cat "$sa/token")"
	start_controller vap --kubeconfig "$sa/kubeconfig" --namespace "$ns"
	apply_foo "$ns" under-policy web-under-policy 1
	until_ok 60 owned_deploy_ok "$ns" under-policy web-under-policy 1 ||
		{ tail -20 "$E2E_LOGS/vap.log"; fail "the controller did not create its Deployment under the policy"; }
	apply_foo "$ns" under-policy web-under-policy 3
	until_ok 60 owned_deploy_ok "$ns" under-policy web-under-policy 3 ||
		{ tail -20 "$E2E_LOGS/vap.log"; fail "the controller did not update its Deployment under the policy"; }
	grep -Eq 'denied request|forbidden' "$E2E_LOGS/vap.log" &&
		fail "a write of the controller was refused: $(grep -Em1 'denied request|forbidden' "$E2E_LOGS/vap.log")"
	stop_controller vap
	# Other users are not affected by the policy.
	kubectl -n kube-system scale deployment csc-outsider --replicas=1 >/dev/null || fail "the admin was refused"
	kubectl -n kube-system delete deployment csc-outsider --wait=false >/dev/null
	kubectl delete namespace "$ns" --wait=false >/dev/null
}

# deploy/namespaced/: its Role is enough to reconcile in the namespace, and the
# service account it binds reads nothing outside it. Run as a service account of the
# test's own, bound by that Role (the shipped one may also hold the cluster-wide
# binding from the tests above).
t_deploy_namespaced_install() {
	ensure_crd
	local ns other sa="$E2E_LOGS/sa-namespaced" out
	ns=$(new_ns e2e-nsinstall)
	other=$(new_ns e2e-nsother)
	kubectl -n "$ns" create serviceaccount nsctl >/dev/null
	sed -e "s/^  namespace: sample-controller\$/  namespace: $ns/" \
		-e "s/name: sample-controller, namespace: sample-controller}/name: nsctl, namespace: $ns}/" \
		"$E2E_ROOT/deploy/namespaced/rbac.yaml" | kubectl apply -f - >/dev/null
	# The install's Deployment runs the controller on its own namespace, and it binds
	# no ClusterRole that grants objects (only the metrics reviews' one).
	local rendered
	rendered=$(kubectl kustomize "$E2E_ROOT/deploy/namespaced")
	grep -q -- '- --namespace=sample-controller$' <<<"$rendered" ||
		fail "deploy/namespaced does not pass --namespace"
	"$PROM_PY" -c '
import sys, yaml
bound = [d["roleRef"]["name"] for d in yaml.safe_load_all(sys.stdin)
         if d and d.get("kind") == "ClusterRoleBinding"]
sys.exit(0 if bound == ["sample-controller-metrics-auth"] else "binds " + ", ".join(bound))' <<<"$rendered" ||
		fail "deploy/namespaced binds a ClusterRole beyond the metrics reviews"

	rm -rf "$sa"; mkdir -p "$sa"
	kubectl -n "$ns" create token nsctl --duration=1h >"$sa/token"
	kubeconfig_token "$sa/kubeconfig" "$(cat "$sa/token")"
	start_controller namespaced --kubeconfig "$sa/kubeconfig" --namespace "$ns"
	apply_foo "$other" elsewhere web-elsewhere 1
	apply_foo "$ns" here web-here 2
	until_ok 60 owned_deploy_ok "$ns" here web-here 2 || { tail -20 "$E2E_LOGS/namespaced.log"; fail "the namespaced install did not reconcile in $ns"; }
	until_ok 60 kubectl -n "$ns" wait --for=condition=Ready --timeout=2s foo/here || fail "status not written"
	kubectl -n "$other" get deployment web-elsewhere >/dev/null 2>&1 && fail "it reconciled a Foo outside its namespace"
	grep -q 'forbidden' "$E2E_LOGS/namespaced.log" && fail "RBAC denied something: $(grep -m1 forbidden "$E2E_LOGS/namespaced.log")"
	# Its identity reads nothing elsewhere.
	out=$(kubectl --as="system:serviceaccount:$ns:nsctl" -n "$other" get deployments 2>&1) &&
		fail "the namespaced service account lists Deployments in $other: $out"
	stop_controller namespaced
	kubectl delete namespace "$ns" "$other" --wait=false >/dev/null
}
