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
	# reportingComponent: set by both Event APIs (source is core/v1-only; the recorder
	# writes events.k8s.io/v1 where the server serves it).
	grep -q configmap-hash <<<"$(kubectl -n "$ns" get events --field-selector reason=HashUpdated -o jsonpath='{.items[*].reportingComponent}')" ||
		fail "events not from component configmap-hash"
	stop_controller cmhash
	kubectl delete namespace "$ns" --wait=false >/dev/null
}

greeting_msg() { jp "$1" cm/"$2"-greeting '{.data.message}'; }
greeting_is() { [ "$(greeting_msg "$1" "$2")" = "$3" ] && [ "$(jp "$1" greeting/"$2" '{.status.message}')" = "$3" ]; }

t_example_greeting_crd() {
	local ns uid
	kubectl apply -f "$E2E_ROOT/examples/greeting/crd.yaml" >/dev/null
	kubectl wait --for=condition=Established --timeout=60s crd/greetings.example.ckube.io >/dev/null
	ns=$(new_ns ex-greet)
	SC_BIN="$EX_BIN/greeting" start_controller greeting --kubeconfig "$KUBECONFIG" --namespace "$ns"
	kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: example.ckube.io/v1alpha1
kind: Greeting
metadata: {name: ada}
spec: {name: Ada}
YAML
	until_ok 30 greeting_is "$ns" ada "Hello, Ada!" || fail "ConfigMap/status: $(greeting_msg "$ns" ada) / $(jp "$ns" greeting/ada '{.status.message}')"
	uid=$(jp "$ns" greeting/ada '{.metadata.uid}')
	test "$(jp "$ns" cm/ada-greeting '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].uid}/{.metadata.ownerReferences[0].controller}')" = "Greeting/$uid/true" ||
		fail "ConfigMap not owned by the Greeting"
	test "$(jp "$ns" cm/ada-greeting '{.metadata.managedFields[0].manager}/{.metadata.managedFields[0].operation}')" = "greeting/Apply" ||
		fail "ConfigMap not written by server-side apply as greeting"
	# The spec changes: both follow.
	kubectl -n "$ns" patch greeting ada --type merge -p '{"spec":{"name":"Grace"}}' >/dev/null
	until_ok 30 greeting_is "$ns" ada "Hello, Grace!" || fail "did not follow spec.name"
	# Drift and deletion of the owned ConfigMap are repaired.
	kubectl -n "$ns" patch cm ada-greeting --type merge -p '{"data":{"message":"tampered"}}' >/dev/null
	until_ok 30 greeting_is "$ns" ada "Hello, Grace!" || fail "drift not repaired"
	kubectl -n "$ns" delete cm ada-greeting >/dev/null
	until_ok 30 greeting_is "$ns" ada "Hello, Grace!" || fail "deleted ConfigMap not recreated"
	# The Greeting goes: the garbage collector takes its ConfigMap.
	kubectl -n "$ns" delete greeting ada >/dev/null
	until_ok 60 bash -c "! kubectl -n $ns get cm ada-greeting" || fail "ConfigMap not collected"
	stop_controller greeting
	kubectl delete namespace "$ns" --wait=false >/dev/null
}

webapp_ready() { # webapp_ready NS NAME REPLICAS: Ready=True for this generation
	[ "$(jp "$1" webapp/"$2" '{.status.conditions[?(@.type=="Ready")].status}')" = True ] &&
		[ "$(jp "$1" webapp/"$2" '{.status.readyReplicas}')" = "$3" ] &&
		[ "$(jp "$1" webapp/"$2" '{.status.observedGeneration}')" = "$(jp "$1" webapp/"$2" '{.metadata.generation}')" ]
}
svc_ports() { jp "$1" svc/"$2" '{range .spec.ports[*]}{.name}:{.port}:{.targetPort} {end}'; }

t_example_webapp_crd() {
	local ns uid rv port puts runs o
	kubectl apply -f "$E2E_ROOT/examples/webapp/crd.yaml" >/dev/null
	kubectl wait --for=condition=Established --timeout=60s crd/webapps.example.ckube.io >/dev/null
	ns=$(new_ns ex-webapp)
	port=$(free_port)
	SC_BIN="$EX_BIN/webapp" start_controller webapp --kubeconfig "$KUBECONFIG" --namespace "$ns" \
		--metrics-bind-address="127.0.0.1:$port"
	kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: example.ckube.io/v1alpha1
kind: WebApp
metadata: {name: web}
spec: {image: "nginx:1.27", replicas: 2}
YAML
	# Its finalizer, a Deployment and a Service it controls, then Ready (kwok's node
	# makes the pods ready) with readyReplicas and observedGeneration.
	until_ok 30 webapp_ready "$ns" web 2 || fail "not Ready: $(jp "$ns" webapp/web '{.status}')"
	uid=$(jp "$ns" webapp/web '{.metadata.uid}')
	test "$(jp "$ns" webapp/web '{.metadata.finalizers[*]}')" = example.ckube.io/webapp || fail "finalizer"
	for o in deploy/web svc/web; do
		test "$(jp "$ns" "$o" '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].uid}/{.metadata.ownerReferences[0].controller}')" = "WebApp/$uid/true" ||
			fail "$o not controlled by the WebApp"
	done
	test "$(jp "$ns" deploy/web '{.spec.template.spec.containers[0].image}/{.spec.template.spec.containers[0].ports[0].containerPort}')" = "nginx:1.27/8080" ||
		fail "Deployment's container: $(jp "$ns" deploy/web '{.spec.template.spec.containers[0]}')"
	test "$(svc_ports "$ns" web)" = "http:80:8080 " || fail "Service ports: $(svc_ports "$ns" web)"
	# Nothing written while nothing changes: create-or-update finds the Deployment
	# (defaulted by the server) unchanged. A PUT of the same object would leave the
	# resourceVersion as it is: the controller's request count tells.
	rv=$(jp "$ns" deploy/web '{.metadata.resourceVersion}')
	puts=$(prom_value "127.0.0.1:$port" rest_client_resource_requests_total method=PUT resource=deployments)
	runs=$(prom_value "127.0.0.1:$port" controller_runtime_reconcile_total controller=webapp)
	kubectl -n "$ns" annotate svc web touched=1 >/dev/null # an owned object's event: a reconcile
	until_ok 10 prom_ge "127.0.0.1:$port" "$(awk -v r="$runs" 'BEGIN { print r + 1 }')" controller_runtime_reconcile_total controller=webapp ||
		fail "no reconcile after the Service changed"
	test "$(jp "$ns" deploy/web '{.metadata.resourceVersion}')" = "$rv" || fail "the Deployment was written without a change"
	test "$(prom_value "127.0.0.1:$port" rest_client_resource_requests_total method=PUT resource=deployments)" = "$puts" ||
		fail "the Deployment was PUT without a change ($puts before)"
	# A port added by hand (strategic merge: kubectl edit's) is taken away.
	kubectl -n "$ns" patch svc web -p '{"spec":{"ports":[{"name":"debug","port":9090,"targetPort":9090}]}}' >/dev/null
	until_ok 30 bash -c "[ \"\$(kubectl -n $ns get svc web -o jsonpath='{.spec.ports[*].name}')\" = http ]" ||
		fail "Service drift not repaired: $(svc_ports "$ns" web)"
	# The spec changes: the Deployment and the status follow.
	kubectl -n "$ns" patch webapp web --type merge -p '{"spec":{"replicas":3}}' >/dev/null
	until_ok 30 webapp_ready "$ns" web 3 || fail "did not follow spec.replicas: $(jp "$ns" webapp/web '{.status}')"
	test "$(jp "$ns" deploy/web '{.spec.replicas}')" = 3 || fail "Deployment replicas"
	# Deletion: the event, the finalizer released, the owned objects collected.
	kubectl -n "$ns" delete webapp web --wait=false >/dev/null
	until_ok 30 bash -c "! kubectl -n $ns get webapp web" || fail "WebApp still there: $(jp "$ns" webapp/web '{.metadata}')"
	until_ok 20 bash -c "kubectl -n $ns get events --field-selector reason=Deleted -o name | grep -q ." || fail "no Deleted event"
	until_ok 60 bash -c "! kubectl -n $ns get deploy web && ! kubectl -n $ns get svc web" || fail "Deployment/Service not collected"
	stop_controller webapp
	kubectl delete namespace "$ns" --wait=false >/dev/null
}
