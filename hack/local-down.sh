#!/usr/bin/env bash
# Stop exactly the processes hack/local-up.sh started (by recorded PID, checked
# against its command line) and remove the local state.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ -d "$LOCAL_DIR" ] || exit 0
for c in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
	stop_component "$c"
done
rm -rf "$LOCAL_DIR"
log "local-down: stopped and removed $LOCAL_DIR"
