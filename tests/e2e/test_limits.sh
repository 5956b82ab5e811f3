# Input at and beyond Kubernetes' limits, on the real local control plane: names and
# labels at their maximum lengths, a Foo whose name is too long for its Deployment's
# label, annotations at the API server's 256 KiB cap and beyond it, bytes that are not
# UTF-8, and one Foo in each of many namespaces with a cluster-wide daemon. What the
# server refuses must be refused with its message (and the daemon unaffected); what it
# accepts the daemon must reconcile. Objects over the client's own size limit are the
# integration case cache/over_limit (the server cannot hold one over 64 MiB).
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# How many namespaces t_limits_many_namespaces spreads Foos over (one each).
LIMITS_NAMESPACES=${LIMITS_NAMESPACES:-300}

lim_setup() {
	ensure_crd
	NS=$(new_ns "e2e-lim-$1")
	LIM_NAME="lim-$1"
	start_controller "$LIM_NAME" --kubeconfig "$KUBECONFIG" --namespace "$NS" "${@:2}"
	trap 'lim_cleanup $?' EXIT
}
lim_cleanup() {
	local rc=$1
	stop_controller "$LIM_NAME" || rc=1
	[ -n "${NS:-}" ] && kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1
	exit "$rc"
}
lim_alive() { kill -0 "$(cat "$E2E_LOGS/$LIM_NAME.pid")" 2>/dev/null; }
foo_ready() { jp_eq "$1" "foo/$2" '{.status.conditions[?(@.type=="Ready")].status}' True; }
foo_reason() { jp "$1" "foo/$2" '{.status.conditions[?(@.type=="Ready")].reason}'; }
rep() { python3 -c "import sys; print(sys.argv[1] * int(sys.argv[2]))" "$1" "$2"; }

t_limits_names_and_labels_at_max() {
	lim_setup names
	local name63 dep253 lkey lval out
	name63=$(rep n 63)
	# DNS-1123 subdomains of 253 characters: the Deployment's name, and a label
	# key's prefix (before a name of 63).
	dep253="$(rep d 62).$(rep e 62).$(rep f 62).$(rep g 62).h"
	lkey="$(rep p 63).$(rep q 63).$(rep r 63).$(rep s 61)/$(rep k 63)"
	lval=$(rep v 63)
	[ "${#dep253}" = 253 ] && [ "${#lkey}" = 317 ] || fail "test lengths"
	kubectl -n "$NS" create -f - >/dev/null <<YAML || fail "the server refused a Foo at the limits"
apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata:
  name: $name63
  labels: {"$lkey": "$lval"}
spec: {deploymentName: "$dep253", replicas: 1}
YAML
	until_ok 60 jp_eq "$NS" "deploy/$dep253" '{.metadata.labels.controller}' "$name63" ||
		fail "no Deployment of 253 characters labelled controller=<63 characters>"
	test "$(jp "$NS" "deploy/$dep253" '{.metadata.ownerReferences[0].name}')" = "$name63" || fail "owner"
	until_ok 60 jp_eq "$NS" "foo/$name63" '{.status.observedGeneration}' 1 || fail "no status on the Foo"
	# 64 characters: the CRD's rule refuses it, with its message.
	out=$(kubectl -n "$NS" create -f - 2>&1 <<YAML
apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata: {name: $(rep n 64)}
spec: {deploymentName: web64, replicas: 1}
YAML
	) && fail "a 64-character Foo name was accepted"
	grep -q "must be at most 63 characters" <<<"$out" || fail "refused without the rule's message: $out"
	lim_alive || fail "the daemon died"
}

t_limits_annotations_at_and_over_the_cap() {
	lim_setup annots
	# The API server caps annotations at 256 KiB in total (keys and values).
	python3 - "$NS" <<'PY' >"$E2E_LOGS/lim-big.json"
import json, sys
ann = {"pad%d" % i: "x" * (60 * 1024) for i in range(4)}  # 240 KiB
print(json.dumps({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                  "metadata": {"name": "big", "annotations": ann},
                  "spec": {"deploymentName": "dbig", "replicas": 1}}))
PY
	kubectl -n "$NS" create -f "$E2E_LOGS/lim-big.json" >/dev/null || fail "240 KiB of annotations refused"
	until_ok 90 foo_ready "$NS" big || fail "the Foo with 240 KiB of annotations never Ready"
	# 1 MiB: refused by the server, with its message; the daemon goes on.
	python3 - <<'PY' >"$E2E_LOGS/lim-huge.json"
import json
print(json.dumps({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                  "metadata": {"name": "huge", "annotations": {"pad": "x" * (1 << 20)}},
                  "spec": {"deploymentName": "dhuge", "replicas": 1}}))
PY
	local out
	out=$(kubectl -n "$NS" create -f "$E2E_LOGS/lim-huge.json" 2>&1) && fail "1 MiB of annotations accepted"
	grep -qi "annotations: Too long" <<<"$out" || fail "refused without saying why: $(head -c 300 <<<"$out")"
	apply_foo "$NS" after dafter 1
	until_ok 60 foo_ready "$NS" after || fail "a Foo after the refusal never Ready"
	lim_alive || fail "the daemon died"
}

t_limits_bytes_not_utf8() {
	lim_setup utf8
	# Written raw (kubectl would refuse the file): the API server stores each
	# invalid byte as U+FFFD; the daemon must read it back and reconcile.
	printf '{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"u1","annotations":{"note":"bad \xff\xfe bytes \xc3","ok":"caf\xc3\xa9"}},"spec":{"deploymentName":"du1","replicas":1}}' \
		>"$E2E_LOGS/lim-utf8.json"
	local code
	code=$(curl -sk -o "$E2E_LOGS/lim-utf8-answer.json" -w '%{http_code}' \
		-H "Authorization: Bearer $(admin_token)" -H 'Content-Type: application/json' \
		--data-binary @"$E2E_LOGS/lim-utf8.json" \
		"$API_SERVER/apis/samplecontroller.k8s.io/v1alpha1/namespaces/$NS/foos")
	[ "$code" = 201 ] || fail "the raw Foo was answered $code: $(head -c 300 "$E2E_LOGS/lim-utf8-answer.json")"
	until_ok 60 foo_ready "$NS" u1 || fail "the Foo with non-UTF-8 bytes never Ready"
	# In a name the server refuses them (not a DNS subdomain once replaced).
	printf '{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"u2"},"spec":{"deploymentName":"d\xff","replicas":1}}' \
		>"$E2E_LOGS/lim-utf8-2.json"
	code=$(curl -sk -o "$E2E_LOGS/lim-utf8-answer2.json" -w '%{http_code}' \
		-H "Authorization: Bearer $(admin_token)" -H 'Content-Type: application/json' \
		--data-binary @"$E2E_LOGS/lim-utf8-2.json" \
		"$API_SERVER/apis/samplecontroller.k8s.io/v1alpha1/namespaces/$NS/foos")
	[ "$code" = 422 ] || fail "a deploymentName with a non-UTF-8 byte was answered $code"
	lim_alive || fail "the daemon died"
}

many_cleanup() {
	local rc=$1
	stop_controller lim-many || rc=1
	kubectl delete namespace -l "e2e-lim-many=$LIM_PREFIX" --wait=false >/dev/null 2>&1
	exit "$rc"
}

# One Foo in each of LIMITS_NAMESPACES namespaces, a daemon watching all of them.
t_limits_many_namespaces() {
	ensure_crd
	local n=$LIMITS_NAMESPACES prefix start
	prefix="e2e-lim-many-$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	LIM_PREFIX=$prefix
	trap 'many_cleanup $?' EXIT
	start=$(date +%s)
	python3 - "$prefix" "$n" <<'PY' >"$E2E_LOGS/lim-many.json"
import json, sys
prefix, n = sys.argv[1], int(sys.argv[2])
items = []
for i in range(n):
    ns = "%s-%d" % (prefix, i)
    items.append({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": ns, "labels": {"e2e-lim-many": prefix}}})
    items.append({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                  "metadata": {"name": "f", "namespace": ns},
                  "spec": {"deploymentName": "d", "replicas": 1}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
	kubectl create -f "$E2E_LOGS/lim-many.json" >/dev/null || fail "creating $n namespaces"
	echo "    $n namespaces and Foos created in $(( $(date +%s) - start ))s"
	start_controller lim-many --kubeconfig "$KUBECONFIG" --kube-api-qps=200 --kube-api-burst=400 --workers=4
	start=$(date +%s)
	local done=0
	for _ in $(seq 1 360); do
		done=$(kubectl get foos -A -o json | python3 -c '
import json, sys
p = sys.argv[1] + "-"
n = 0
for f in json.load(sys.stdin)["items"]:
    if not f["metadata"]["namespace"].startswith(p): continue
    st = f.get("status", {})
    if st.get("observedGeneration") == f["metadata"]["generation"]: n += 1
print(n)' "$prefix")
		[ "$done" -ge "$n" ] && break
		sleep 1
	done
	[ "$done" -ge "$n" ] || fail "$done of $n Foos have a status after $(( $(date +%s) - start ))s"
	local deps
	deps=$(kubectl get deploy -A --no-headers 2>/dev/null | grep -c "^$prefix-")
	[ "$deps" = "$n" ] || fail "$deps Deployments for $n Foos"
	echo "    $n Foos in $n namespaces reconciled in $(( $(date +%s) - start ))s; daemon RSS $(awk '/VmRSS/ {print $2, $3}' "/proc/$(cat "$E2E_LOGS/lim-many.pid")/status")"
	kill -0 "$(cat "$E2E_LOGS/lim-many.pid")" || fail "the daemon died"
}
