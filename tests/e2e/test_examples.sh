# The examples/ controllers, built on libckube like any user's (ASan build), end to
# end on the real control plane. Test vectors of configmap-hash come from running
# its client-go twin (examples/configmap-hash/go) against the same objects.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

EX_BIN="$E2E_ROOT/build/asan/bin"

cm_hash() { jp "$1" cm/app-config '{.metadata.annotations.example\.ckube\.io/hash}'; }
cm_hash_is() { [ "$(cm_hash "$1")" = "$2" ]; }

t_example_configmap_hash() {
	local ns
	ns=$(new_ns ex-cmhash)
	SC_BIN="$EX_BIN/configmap-hash" start_controller cmhash --kubeconfig "$KUBECONFIG" --namespace "$ns"
	kubectl -n "$ns" create secret generic app-secret --from-literal=password=s3cr3t --from-literal=user=admin >/dev/null
	kubectl -n "$ns" create configmap app-config --from-literal=b.txt=world --from-literal=a.txt=hello >/dev/null
	kubectl -n "$ns" create configmap unmanaged --from-literal=x=y >/dev/null
	kubectl -n "$ns" label configmap unmanaged other=1 >/dev/null
	# Labelled only: the ConfigMap's data alone.
	kubectl -n "$ns" label configmap app-config example.ckube.io/hash=true >/dev/null
	until_ok 30 cm_hash_is "$ns" fnv64a:17ef236d3c310a62 || fail "hash of the data alone: $(cm_hash "$ns")"
	# Naming the Secret: its data joins the hash.
	kubectl -n "$ns" annotate configmap app-config example.ckube.io/secret=app-secret >/dev/null
	until_ok 30 cm_hash_is "$ns" fnv64a:1ae5bdb89dc9974d || fail "hash with the secret: $(cm_hash "$ns")"
	# A change of the Secret alone is followed.
	kubectl -n "$ns" patch secret app-secret --type=merge -p '{"stringData":{"password":"changed"}}' >/dev/null
	until_ok 30 cm_hash_is "$ns" fnv64a:4913fba91f840943 || fail "hash after the secret changed: $(cm_hash "$ns")"
	# The Secret deleted: back to the data alone.
	kubectl -n "$ns" delete secret app-secret >/dev/null
	until_ok 30 cm_hash_is "$ns" fnv64a:17ef236d3c310a62 || fail "hash after the secret was deleted: $(cm_hash "$ns")"
	[ -z "$(jp "$ns" cm/unmanaged '{.metadata.annotations}')" ] || fail "an unlabelled ConfigMap was annotated"
	until_ok 20 bash -c "kubectl -n $ns get events --field-selector reason=HashUpdated,involvedObject.name=app-config -o name | grep -q ." ||
		fail "no HashUpdated event"
	kubectl -n "$ns" get events --field-selector reason=HashUpdated -o jsonpath='{.items[*].source.component}' | grep -q configmap-hash ||
		fail "events not from component configmap-hash"
	stop_controller cmhash
	kubectl delete namespace "$ns" --wait=false >/dev/null
}
