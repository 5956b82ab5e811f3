#!/usr/bin/env bash
# Faults on demand for tests of the local control plane:
#   local-ctl.sh compact             compact etcd at its current revision (old RVs -> 410)
#   local-ctl.sh restart-apiserver   stop and start kube-apiserver, wait until ready
#   local-ctl.sh stop NAME | start NAME
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# shellcheck source=/dev/null
. "$LOCAL_DIR/env"

api_ready() {
	KUBECONFIG="$LOCAL_KUBECONFIG" kubectl get --raw /readyz >/dev/null 2>&1
}

case "${1:-}" in
compact)
	rev=$(curl -sf -X POST "$ETCD_URL/v3/kv/range" -d '{"key":"AA=="}' |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
	curl -sf -X POST "$ETCD_URL/v3/kv/compaction" -d "{\"revision\": \"$rev\", \"physical\": true}" >/dev/null
	echo "$rev"
	;;
restart-apiserver)
	stop_component kube-apiserver
	start_component kube-apiserver
	for _ in $(seq 1 300); do api_ready && exit 0; sleep 0.2; done
	fail_component kube-apiserver "not ready after restart"
	;;
stop) stop_component "$2" ;;
start) start_component "$2" ;;
*)
	echo "usage: $0 compact|restart-apiserver|stop NAME|start NAME" >&2
	exit 2
	;;
esac
