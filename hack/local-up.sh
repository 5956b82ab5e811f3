#!/usr/bin/env bash
# Start a real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver (TLS,
# RBAC, token + client-certificate authentication), kube-controller-manager,
# kube-scheduler and kwok with one fake Node, so Deployments get Ready pods.
#
# Writes .local/kubeconfig (contexts "token" and "cert"), .local/env (ports,
# paths, tokens for tests), PIDs under .local/pids, logs under .local/logs.
# Running it again while the cluster is up does nothing. hack/local-down.sh stops it.
#
# CSC_FEATURE_GATES="Name=true,..." adds kube-apiserver feature gates (e.g.
# ShardedListAndWatch=true for KEP-5866's sharded list and watch); recorded in
# .local/env as FEATURE_GATES. Unset (the default cluster) adds none. A running
# cluster started with other gates is restarted with these.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$CSC_ROOT/hack/versions.env"

FEATURE_GATES="${CSC_FEATURE_GATES:-}"
if [ -n "$FEATURE_GATES" ] &&
	! [[ "$FEATURE_GATES" =~ ^[A-Za-z0-9]+=(true|false)(,[A-Za-z0-9]+=(true|false))*$ ]]; then
	echo "local-up: CSC_FEATURE_GATES=\"$FEATURE_GATES\" is not Name=true|false[,Name=true|false...]" >&2
	exit 2
fi

KCFG="$LOCAL_DIR/kubeconfig"

all_alive() {
	local c
	for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
		pid_alive "$c" || return 1
	done
}
running_gates() { sed -n 's/^FEATURE_GATES=//p' "$LOCAL_DIR/env"; }
if [ -f "$LOCAL_DIR/env" ] && all_alive && [ "$(running_gates)" = "$FEATURE_GATES" ]; then
	if KUBECONFIG="$KCFG" kubectl get --raw /readyz >/dev/null 2>&1; then
		log "local-up: already running (KUBECONFIG=$KCFG)"
		exit 0
	fi
fi
# Leftovers of a crashed run: stop what is ours, start clean.
if [ -d "$LOCAL_DIR" ]; then
	bash "$CSC_ROOT/hack/local-down.sh" >/dev/null 2>&1 || true
fi

t0=$(date +%s)
BIN="$(bash "$CSC_ROOT/hack/build-k8s.sh" | tail -n 1)"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
	[ -x "$BIN/$b" ] || { echo "local-up: missing $BIN/$b" >&2; exit 1; }
done
command -v kubectl >/dev/null || { echo "local-up: kubectl is not installed" >&2; exit 1; }

mkdir -p "$PID_DIR" "$LOG_DIR" "$CMD_DIR" "$LOCAL_DIR/pki" "$LOCAL_DIR/etcd"
# On any failure below, stop what was started (the log tail is printed first).
trap 'rc=$?; if [ $rc != 0 ]; then bash "$CSC_ROOT/hack/local-down.sh" >/dev/null 2>&1 || true; fi' EXIT
chmod 700 "$LOCAL_DIR"
PKI="$LOCAL_DIR/pki"

ETCD_PORT=$(free_port); ETCD_PEER_PORT=$(free_port); API_PORT=$(free_port)
KCM_PORT=$(free_port); SCHED_PORT=$(free_port); KWOK_PORT=$(free_port)

# ---- PKI: one CA, a serving cert for 127.0.0.1, an admin client cert, SA keys.
gen_cert() { # name subject [san]
	local name="$1" subj="$2" san="${3:-}"
	openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subj" \
		-out "$PKI/$name.csr" 2>/dev/null
	local ext="$PKI/$name.ext"
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [ -n "$san" ]; then
			echo "extendedKeyUsage=serverAuth"
			echo "subjectAltName=$san"
		else
			echo "extendedKeyUsage=clientAuth"
		fi
	} >"$ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
		-CAcreateserial -days 30 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
}
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" \
	-days 30 -subj "/CN=csc-local-ca" 2>/dev/null
gen_cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
gen_cert admin "/O=system:masters/CN=cert-admin"
# The API server's identity towards kubelets (logs, exec, port-forward).
gen_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

rand_token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
ADMIN_TOKEN=$(rand_token); KCM_TOKEN=$(rand_token); SCHED_TOKEN=$(rand_token)
LIMITED_TOKEN=$(rand_token)
# token,user,uid,"group1,group2"
cat >"$PKI/tokens.csv" <<CSV
$ADMIN_TOKEN,token-admin,uid-admin,"system:masters"
$KCM_TOKEN,system:kube-controller-manager,uid-kcm
$SCHED_TOKEN,system:kube-scheduler,uid-sched
$LIMITED_TOKEN,limited-user,uid-limited
CSV
chmod 600 "$PKI"/*.key "$PKI/tokens.csv"

b64() { base64 -w0 <"$1"; }
write_token_kubeconfig() { # file token
	cat >"$1" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: u
  user:
    token: $2
contexts:
- name: local
  context: {cluster: local, user: u}
current-context: local
YAML
	chmod 600 "$1"
}
write_token_kubeconfig "$LOCAL_DIR/kcm.kubeconfig" "$KCM_TOKEN"
write_token_kubeconfig "$LOCAL_DIR/scheduler.kubeconfig" "$SCHED_TOKEN"
write_token_kubeconfig "$LOCAL_DIR/kwok.kubeconfig" "$ADMIN_TOKEN"
cat >"$KCFG" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: token-admin
  user:
    token: $ADMIN_TOKEN
- name: cert-admin
  user:
    client-certificate-data: $(b64 "$PKI/admin.crt")
    client-key-data: $(b64 "$PKI/admin.key")
contexts:
- name: token
  context: {cluster: local, user: token-admin, namespace: default}
- name: cert
  context: {cluster: local, user: cert-admin, namespace: default}
current-context: token
YAML
chmod 600 "$KCFG"

# ---- Component command lines (kept so hack/local-ctl.sh can restart one).
cat >"$CMD_DIR/etcd.sh" <<SH
exec "$BIN/etcd" --name local --data-dir "$LOCAL_DIR/etcd" \\
  --listen-client-urls http://127.0.0.1:$ETCD_PORT --advertise-client-urls http://127.0.0.1:$ETCD_PORT \\
  --listen-peer-urls http://127.0.0.1:$ETCD_PEER_PORT --initial-advertise-peer-urls http://127.0.0.1:$ETCD_PEER_PORT \\
  --initial-cluster local=http://127.0.0.1:$ETCD_PEER_PORT --log-level warn --quota-backend-bytes 8589934592
SH
cat >"$CMD_DIR/kube-apiserver.sh" <<SH
exec "$BIN/kube-apiserver" --etcd-servers http://127.0.0.1:$ETCD_PORT \\
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port $API_PORT \\
  --cert-dir "$LOCAL_DIR/pki" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \\
  --client-ca-file "$PKI/ca.crt" --token-auth-file "$PKI/tokens.csv" \\
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --anonymous-auth=false \\
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \\
  --kubelet-preferred-address-types InternalIP \\
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \\
  --service-account-issuer https://kubernetes.default.svc.cluster.local \\
  --service-cluster-ip-range 10.0.0.0/24 --endpoint-reconciler-type none \\
  --allow-privileged=true \\
  ${FEATURE_GATES:+--feature-gates "$FEATURE_GATES" }--profiling=false --v 1
SH
cat >"$CMD_DIR/kube-controller-manager.sh" <<SH
exec "$BIN/kube-controller-manager" --kubeconfig "$LOCAL_DIR/kcm.kubeconfig" \\
  --authentication-kubeconfig "$LOCAL_DIR/kcm.kubeconfig" --authorization-kubeconfig "$LOCAL_DIR/kcm.kubeconfig" \\
  --bind-address 127.0.0.1 --secure-port $KCM_PORT --leader-elect=false \\
  --flex-volume-plugin-dir "$LOCAL_DIR/flexvolume" \\
  --controllers '*,-csrsigning,-csrapproving' \\
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" --use-service-account-credentials \\
  --concurrent-deployment-syncs 10 --concurrent-replicaset-syncs 10 --concurrent-gc-syncs 40 \\
  --kube-api-qps 500 --kube-api-burst 1000 --v 1
SH
cat >"$CMD_DIR/kube-scheduler.sh" <<SH
exec "$BIN/kube-scheduler" --kubeconfig "$LOCAL_DIR/scheduler.kubeconfig" \\
  --authentication-kubeconfig "$LOCAL_DIR/scheduler.kubeconfig" --authorization-kubeconfig "$LOCAL_DIR/scheduler.kubeconfig" \\
  --bind-address 127.0.0.1 --secure-port $SCHED_PORT --leader-elect=false \\
  --kube-api-qps 500 --kube-api-burst 1000 --v 1
SH
cat >"$CMD_DIR/kwok.sh" <<SH
exec "$BIN/kwok" --kubeconfig "$LOCAL_DIR/kwok.kubeconfig" --config "$BIN/kwok-stages.yaml" --node-lease-duration-seconds 40 \\
  --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \\
  --manage-nodes-with-label-selector "" --disregard-status-with-annotation-selector kwok.x-k8s.io/status=custom \\
  --disregard-status-with-label-selector "" --cidr 10.64.0.0/16 --node-ip 10.63.0.1 \\
  --server-address 127.0.0.1:$KWOK_PORT
SH

cat >"$LOCAL_DIR/env" <<ENV
# Written by hack/local-up.sh: source it in tests.
KUBE_VERSION=$KUBE_VERSION
LOCAL_KUBECONFIG=$KCFG
LOCAL_BIN=$BIN
API_SERVER=https://127.0.0.1:$API_PORT
API_PORT=$API_PORT
ETCD_URL=http://127.0.0.1:$ETCD_PORT
CA_FILE=$PKI/ca.crt
LIMITED_TOKEN=$LIMITED_TOKEN
# Node authorizer and kubelet client certificate: hack/node-up.sh can join a kubelet.
NODE_SUPPORT=1
# kube-apiserver's extra --feature-gates (CSC_FEATURE_GATES); empty = the defaults.
FEATURE_GATES=$FEATURE_GATES
ENV
# The admin token lives only in the kubeconfig (600); tests read it from there.

wait_for() { # name seconds command...
	local name="$1" secs="$2"
	shift 2
	local i
	for i in $(seq 1 $((secs * 5))); do
		pid_alive "$name" || fail_component "$name" "process exited"
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.2
	done
	fail_component "$name" "not ready after ${secs}s"
}

log "local-up: starting etcd on 127.0.0.1:$ETCD_PORT"
start_component etcd
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

log "local-up: starting kube-apiserver on https://127.0.0.1:$API_PORT"
start_component kube-apiserver
wait_for kube-apiserver 90 curl -sf --cacert "$PKI/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
	"https://127.0.0.1:$API_PORT/readyz"

log "local-up: starting kube-controller-manager, kube-scheduler, kwok"
start_component kube-controller-manager
start_component kube-scheduler
start_component kwok
wait_for kube-controller-manager 60 curl -skf "https://127.0.0.1:$KCM_PORT/healthz"
wait_for kube-scheduler 60 curl -skf "https://127.0.0.1:$SCHED_PORT/healthz"

export KUBECONFIG="$KCFG"
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-0
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
status:
  allocatable: {cpu: "1000", memory: 4Ti, pods: "20000"}
  capacity: {cpu: "1000", memory: 4Ti, pods: "20000"}
YAML
wait_for kwok 60 bash -c "kubectl get node kwok-node-0 -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -q True"
# Pods need the namespace's default ServiceAccount (made by the controller-manager).
wait_for kube-controller-manager 60 kubectl -n default get serviceaccount default

t1=$(date +%s)
log "local-up: control plane ready in $((t1 - t0))s (Kubernetes $KUBE_VERSION)"
cat >&2 <<MSG

  export KUBECONFIG=$KCFG     # contexts: token (default), cert
  kubectl get nodes
  logs: $LOG_DIR/      stop: make cluster-down

MSG
