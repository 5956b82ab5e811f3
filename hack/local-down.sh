#!/usr/bin/env bash
# Stop exactly the processes hack/local-up.sh started (by recorded PID, checked
# against its command line) and remove the local state.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ -d "$LOCAL_DIR" ] || exit 0
# A real node joined to this control plane goes first (it holds mounts, cgroups and
# iptables rules, some of them under $LOCAL_DIR).
if grep -qsx "dir $LOCAL_DIR/node" /run/csc-node/record || [ -d "$LOCAL_DIR/node" ]; then
	bash "$CSC_ROOT/hack/node-down.sh" || true
fi
for c in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
	stop_component "$c"
done
rm -rf "$LOCAL_DIR"
log "local-down: stopped and removed $LOCAL_DIR"
