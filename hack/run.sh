#!/usr/bin/env bash
# make run: start the local control plane unless KUBECONFIG points elsewhere,
# install the CRD and the example Foo, and run the controller in the foreground.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
if [ -z "${KUBECONFIG:-}" ]; then
	bash "$CSC_ROOT/hack/local-up.sh"
	export KUBECONFIG="$LOCAL_DIR/kubeconfig"
fi
kubectl apply -f "$CSC_ROOT/deploy/crd.yaml"
kubectl wait --for=condition=Established --timeout=60s crd/foos.samplecontroller.k8s.io >/dev/null
kubectl apply -f "$CSC_ROOT/deploy/example-foo.yaml"
cat >&2 <<MSG

  The controller runs below (Ctrl-C stops it). In another terminal:
    export KUBECONFIG=$KUBECONFIG
    kubectl get foos
    kubectl describe foo example-foo
    kubectl get deploy example-foo
    kubectl patch foo example-foo --type merge -p '{"spec":{"replicas":3}}'

MSG
exec "$CSC_ROOT/bin/sample-controller" --kubeconfig "$KUBECONFIG" -v=2 ${RUN_ARGS:-}
