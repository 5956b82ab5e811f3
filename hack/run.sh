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
# /metrics is HTTPS for allowed callers only (--metrics-secure): a ServiceAccount
# bound to deploy/'s metrics-reader role to scrape it with.
kubectl apply -f "$CSC_ROOT/deploy/base/metrics-rbac.yaml" >/dev/null
kubectl -n default create serviceaccount metrics-scraper --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl create clusterrolebinding sample-controller-metrics-scraper \
	--clusterrole=sample-controller-metrics-reader --serviceaccount=default:metrics-scraper \
	--dry-run=client -o yaml | kubectl apply -f - >/dev/null
cat >&2 <<MSG

  The controller runs below (Ctrl-C stops it). In another terminal:
    export KUBECONFIG=$KUBECONFIG
    kubectl get foos
    kubectl describe foo example-foo
    kubectl get deploy example-foo
    kubectl patch foo example-foo --type merge -p '{"spec":{"replicas":3}}'
  Metrics (HTTPS, self-signed certificate, a token allowed to get /metrics):
    curl -k -H "Authorization: Bearer \$(kubectl -n default create token metrics-scraper)" https://127.0.0.1:8443/metrics
  Probes (plain HTTP): curl http://127.0.0.1:8081/readyz?verbose
  (RUN_ARGS=--metrics-secure=false serves plain http://127.0.0.1:8080/metrics instead.)

MSG
exec "$CSC_ROOT/bin/sample-controller" --kubeconfig "$KUBECONFIG" -v=2 ${RUN_ARGS:-}
