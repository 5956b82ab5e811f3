# shellcheck shell=bash
# Sourced by tests/envtest/run.sh: sample-controller against envtest (etcd and
# kube-apiserver, no controller-manager), as the unprivileged user run.sh picked.
#
#   t_sample_controller   ckube-envtest start deploy/crd.yaml, the daemon on its
#                         kubeconfig, then: a Foo gets its Deployment (replicas, the
#                         controller ownerReference with the Foo's uid), status and a
#                         Synced event; spec.replicas 1 -> 3 and the Deployment
#                         follows; a deleted Deployment is recreated; the Foo deleted,
#                         the daemon leaves its Deployment alone (no garbage collector
#                         here: that is the controller-manager's) and exits 0 on SIGTERM.
#
# Needs from run.sh: $work, $parent, as_user, cli_run. The daemon is
# $SAMPLE_CONTROLLER (make envtest-test: the ASan build), else bin/sample-controller.
# No pod ever runs (no scheduler, no kubelet): the Foo's Ready stays False.

sc_bin="${SAMPLE_CONTROLLER:-$root/bin/sample-controller}"

# sc_until SECONDS COMMAND...: COMMAND until it succeeds, every 0.1 s.
sc_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}

sc_k() { as_user env KUBECONFIG="$sc_kc" kubectl -n default "$@"; }
sc_jp() { sc_k get "$1" -o jsonpath="$2"; }
sc_eq() { [ "$(sc_jp "$1" "$2")" = "$3" ]; }

# The Deployment as newDeployment says, with replicas $1, controlled by the Foo.
sc_deploy_ok() {
	local uid
	uid=$(sc_jp foo/envtest-foo '{.metadata.uid}') && [ -n "$uid" ] || return 1
	sc_eq deploy/envtest-web '{.spec.replicas}/{.metadata.labels.controller}/{.spec.template.spec.containers[0].image}' \
		"$1/envtest-foo/nginx:latest" &&
		sc_eq deploy/envtest-web '{.metadata.ownerReferences[0].apiVersion}/{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].uid}/{.metadata.ownerReferences[0].controller}/{.metadata.ownerReferences[0].blockOwnerDeletion}' \
			"samplecontroller.k8s.io/v1alpha1/Foo/envtest-foo/$uid/true/true"
}

# The Foo's status for generation $1: observed, Ready=False (no pod runs here).
sc_status_ok() {
	sc_eq foo/envtest-foo '{.metadata.generation}/{.status.observedGeneration}/{.status.availableReplicas}' "$1/$1/0" &&
		sc_eq foo/envtest-foo '{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}' \
			"False/DeploymentProgressing"
}

sc_foo_gone() { ! sc_k get foo envtest-foo; }

sc_steps() {
	sc_k apply -f - >/dev/null <<'YAML' || return 1
apiVersion: samplecontroller.k8s.io/v1alpha1
kind: Foo
metadata: {name: envtest-foo}
spec: {deploymentName: envtest-web, replicas: 1}
YAML
	sc_until 10 sc_deploy_ok 1 || { echo "no Deployment envtest-web as newDeployment says (1 replica)"; return 1; }
	sc_until 10 sc_status_ok 1 || { echo "Foo status: $(sc_jp foo/envtest-foo '{.status}')"; return 1; }
	sc_until 10 sc_eq events '{.items[?(@.involvedObject.name=="envtest-foo")].reason}' Synced ||
		{ echo "no Synced event: $(sc_jp events '{.items[*].reason}')"; return 1; }

	sc_k patch foo envtest-foo --type merge -p '{"spec":{"replicas":3}}' >/dev/null || return 1
	sc_until 10 sc_deploy_ok 3 || { echo "the Deployment did not follow to 3: $(sc_jp deploy/envtest-web '{.spec.replicas}')"; return 1; }
	sc_until 10 sc_status_ok 2 || { echo "Foo status after the scale: $(sc_jp foo/envtest-foo '{.status}')"; return 1; }

	local old
	old=$(sc_jp deploy/envtest-web '{.metadata.uid}')
	sc_k delete deploy envtest-web >/dev/null || return 1
	sc_until 10 sc_deploy_ok 3 || { echo "the deleted Deployment was not recreated"; return 1; }
	[ "$(sc_jp deploy/envtest-web '{.metadata.uid}')" != "$old" ] || { echo "the Deployment was not deleted"; return 1; }

	# Deleted, the Foo is gone at once (no finalizer); its Deployment stays: only
	# the controller-manager's garbage collector would delete it.
	sc_k delete foo envtest-foo >/dev/null || return 1
	sc_until 10 sc_foo_gone || { echo "the Foo was not deleted"; return 1; }
	sleep 0.5
	sc_eq deploy/envtest-web '{.spec.replicas}' 3 || { echo "the Foo's Deployment changed after its deletion"; return 1; }
}

t_sample_controller() {
	[ -x "$sc_bin" ] || { echo "no sample-controller at $sc_bin (SAMPLE_CONTROLLER)"; return 1; }
	local out rc=0 pid pidfile="$parent/sample-controller.pid"
	out=$(cli_run start deploy/crd.yaml 2>"$work/err") || { cat "$work/err"; return 1; }
	sc_kc=${out#export KUBECONFIG=}
	as_user sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$pidfile" "$sc_bin" --kubeconfig "$sc_kc" \
		--metrics-bind-address=0 --health-probe-bind-address=0 --metrics-secure=false -v=2 \
		>"$work/sc.log" 2>&1 &
	local job=$!
	sc_until 5 test -s "$pidfile" || { echo "sample-controller did not start"; rc=1; }
	pid=$(cat "$pidfile" 2>/dev/null)
	[ $rc = 0 ] && { sc_steps || rc=1; }
	# SIGTERM: a clean shutdown exits 0 (an ASan finding or a leak would not).
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
	local code=0
	wait "$job" || code=$?
	[ "$code" = 0 ] || { echo "sample-controller exited $code after SIGTERM"; rc=1; }
	rm -f "$pidfile"
	cli_run stop || rc=1
	if [ $rc != 0 ]; then
		echo "sample-controller's last log lines:"
		tail -n 20 "$work/sc.log"
	fi
	return $rc
}
