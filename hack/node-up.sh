#!/usr/bin/env bash
# Start a real Kubernetes node on this machine, joined to the local control plane:
# containerd + runc with a CNI bridge, and a kubelet built from the pinned
# Kubernetes version. The Node is "real-node", labelled and tainted
# sample-controller.local/real-node=true (NoSchedule), so only pods that tolerate
# it (hack/node/kustomization.yaml) run here; Foos' nginx pods stay on kwok.
#
# Confinement: the bridge ($NODE_BRIDGE, $NODE_SUBNET) exists only here, nothing is
# masqueraded, and a rule drops anything forwarded between the bridge and any other
# interface. Pods reach the API server (bound to 127.0.0.1) through the `kubernetes`
# Service address by one DNAT rule on the bridge. The kubelet's cgroup root is
# beneath this script's own memory cgroup, so pods' memory stays inside it. Every
# change to the host is recorded in $NODE_RECORD before it is made;
# hack/node-down.sh undoes them all, and this script first undoes what an earlier,
# killed run left behind.
#
# Starts the control plane (hack/local-up.sh) when it is not up, builds the kubelet
# and the image once (cached outside the tree), imports the image. Writes
# .local/node/env. Running it again while the node is up does nothing.
set -euo pipefail
. "$(dirname "$0")/node/lib.sh"
. "$CSC_ROOT/hack/versions.env"

t0=$(date +%s)

# ---- What the node needs from this machine: say exactly what is missing.
[ "$(id -u)" = 0 ] || node_die "must run as root: it makes a bridge, iptables rules, cgroups and mounts (run it with sudo)"
for t in containerd containerd-shim-runc-v2 ctr runc iptables ip kubectl; do
	command -v "$t" >/dev/null || node_die "missing $t (make deps installs containerd runc containernetworking-plugins iptables iproute2)"
done
for p in bridge host-local loopback; do
	[ -x "/usr/lib/cni/$p" ] || node_die "missing CNI plugin /usr/lib/cni/$p (apt-get install containernetworking-plugins)"
done
grep -qw overlay /proc/filesystems || node_die "kernel has no overlay filesystem (containerd's overlayfs snapshotter needs it)"
[ -n "$(cgroup_hierarchies)" ] || node_die "no cgroup hierarchy is mounted under /sys/fs/cgroup"
iptables -t nat -S >/dev/null 2>&1 || node_die "iptables nat table unavailable: $(iptables -t nat -S 2>&1 | head -n 1)"

node_ready() {
	[ "$(KUBECONFIG="$LOCAL_DIR/kubeconfig" kubectl get node "$NODE_NAME" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
if [ -f "$NODE_RECORD" ] && node_proc_pid kubelet >/dev/null && node_proc_pid containerd >/dev/null &&
	[ -f "$NODE_DIR/env" ] && node_ready; then
	node_log "already running (node $NODE_NAME)"
	exit 0
fi
if [ -f "$NODE_RECORD" ]; then
	node_log "undoing what an earlier run left behind"
	bash "$CSC_ROOT/hack/node-down.sh"
fi

# A mount left under our directories (by a run this script did not record) would
# be inherited by the new kubelet: refuse, naming it, rather than start on it
# (before the undo trap below is set: a refusal changes nothing, not even that
# mount).
left="$(mounts_under "$NODE_DIR"; mounts_under "$NODE_RUN")"
[ -z "$left" ] || node_die "mounts remain from an earlier node under $NODE_DIR or $NODE_RUN: $(echo $left) (run make node-down)"

# ---- The control plane, the kubelet binary and the images (all cached).
bash "$CSC_ROOT/hack/local-up.sh"
# shellcheck source=/dev/null
. "$LOCAL_DIR/env"
[ "${NODE_SUPPORT:-0}" = 1 ] || node_die "the running control plane was started without node support (older hack/local-up.sh): make cluster-down, then retry"
BIN="$(bash "$CSC_ROOT/hack/build-k8s.sh" | tail -n 1)"
[ -x "$BIN/kubelet" ] || node_die "missing $BIN/kubelet"
IMAGE_DIR="$CSC_ROOT/build/image"
bash "$CSC_ROOT/hack/image.sh" >&2

# ---- From here on every change is recorded; a failure undoes what was done.
trap 'rc=$?; if [ $rc != 0 ]; then
	echo "node-up: failed (exit $rc); last lines of the node logs:" >&2
	for f in "$NODE_DIR"/logs/*.log; do [ -f "$f" ] && { echo "---- $f" >&2; tail -n 25 "$f" >&2; }; done
	[ -n "${NODE_KEEP_ON_FAIL:-}" ] || bash "$CSC_ROOT/hack/node-down.sh" >&2 || true
fi' EXIT

mkdir -p "$NODE_RUN"
: >"$NODE_RECORD"
record dir "$NODE_DIR"
record dir "$NODE_RUN/containerd"
mkdir -p "$NODE_DIR"/{logs,pki,cni/net.d,cni/ipam,containerd/root,kubelet,pod-logs,volume-plugins}
chmod 700 "$NODE_DIR"

# Host paths the parts make on their own (lib.sh): removed on the way down if new.
for p in "${NODE_HOST_PATHS[@]}"; do
	[ -e "$p" ] || record path "$p"
done
# Network namespaces the CNI makes for pod sandboxes (none of ours exist yet).
# shellcheck disable=SC2046
record netns /var/run/netns $(ls /var/run/netns 2>/dev/null)

# ---- PKI: the kubelet's client certificate (Node authorizer identity).
PKI="$LOCAL_DIR/pki"
openssl req -newkey rsa:2048 -nodes -keyout "$NODE_DIR/pki/kubelet.key" \
	-subj "/O=system:nodes/CN=system:node:$NODE_NAME" -out "$NODE_DIR/pki/kubelet.csr" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
	>"$NODE_DIR/pki/kubelet.ext"
openssl x509 -req -in "$NODE_DIR/pki/kubelet.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
	-days 30 -extfile "$NODE_DIR/pki/kubelet.ext" -out "$NODE_DIR/pki/kubelet.crt" 2>/dev/null
chmod 600 "$NODE_DIR/pki/kubelet.key"
cat >"$NODE_DIR/kubelet.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$API_SERVER", certificate-authority: "$PKI/ca.crt"}
users:
- name: kubelet
  user: {client-certificate: "$NODE_DIR/pki/kubelet.crt", client-key: "$NODE_DIR/pki/kubelet.key"}
contexts:
- name: kubelet
  context: {cluster: local, user: kubelet}
current-context: kubelet
YAML

# ---- cgroups: the kubelet's root beneath our own memory cgroup. The cgroupfs
# driver uses the same path in every hierarchy, and the kubelet refuses a root
# that does not exist, so it is made in each one (cpuset needs cpus/mems copied
# down each new level before anything can join it).
CGROUP_ROOT="$(own_memory_cgroup)"
CGROUP_ROOT="${CGROUP_ROOT%/}/kubepods-root"
for h in $(cgroup_hierarchies); do
	for level in $(path_levels "$CGROUP_ROOT"); do
		path="$h$level"
		parent="$(dirname "$path")"
		[ -d "$path" ] && continue
		record cgroup "$path"
		mkdir "$path"
		for f in cpuset.cpus cpuset.mems; do
			if [ -f "$parent/$f" ] && [ -f "$path/$f" ] && [ -z "$(cat "$path/$f")" ]; then
				cat "$parent/$f" >"$path/$f"
			fi
		done
	done
done

# ---- Network: the bridge, the Service DNAT, the confinement rules.
record link "$NODE_BRIDGE"
ip link add "$NODE_BRIDGE" type bridge 2>/dev/null ||
	node_die "cannot create a bridge: $(ip link add "$NODE_BRIDGE" type bridge 2>&1) (kernel without bridge support?)"
ip addr add "$NODE_IP/${NODE_SUBNET#*/}" dev "$NODE_BRIDGE"
ip link set "$NODE_BRIDGE" up
# 127.0.0.1 as a DNAT target for packets that arrive on the bridge, and on it only.
echo 1 >"/proc/sys/net/ipv4/conf/$NODE_BRIDGE/route_localnet"
# The bridge plugin (isGateway) turns on forwarding, the kubelet sets its kernel
# tunables: remember them all now, restore them on the way down.
for s in "${NODE_SYSCTLS[@]}"; do
	remember_sysctl "$s"
done

record ipt iptables nat "$CHAIN_DNAT"
iptables -t nat -N "$CHAIN_DNAT"
iptables -t nat -A "$CHAIN_DNAT" -d "$SERVICE_IP/32" -p tcp --dport 443 \
	-m comment --comment "csc-node: kubernetes Service -> local API server" \
	-j DNAT --to-destination "127.0.0.1:$API_PORT"
iptables -t nat -A PREROUTING -i "$NODE_BRIDGE" -j "$CHAIN_DNAT"
for tool in iptables ip6tables; do
	command -v "$tool" >/dev/null || continue
	$tool -t filter -S >/dev/null 2>&1 || continue
	record ipt "$tool" filter "$CHAIN_FWD"
	$tool -t filter -N "$CHAIN_FWD"
	$tool -t filter -A "$CHAIN_FWD" -i "$NODE_BRIDGE" ! -o "$NODE_BRIDGE" \
		-m comment --comment "csc-node: nothing leaves this machine" -j DROP
	$tool -t filter -A "$CHAIN_FWD" -o "$NODE_BRIDGE" ! -i "$NODE_BRIDGE" \
		-m comment --comment "csc-node: nothing enters the node from outside" -j DROP
	$tool -t filter -I FORWARD 1 -j "$CHAIN_FWD"
done

cat >"$NODE_DIR/cni/net.d/10-csc-node.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "csc-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NODE_DIR/cni/ipam",
        "ranges": [[{"subnet": "$NODE_SUBNET", "gateway": "$NODE_IP", "rangeStart": "${NODE_IP%.*}.10"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
JSON

# ---- containerd (CRI) with runc, on a private socket, root and state.
PAUSE_IMAGE=csc.local/pause:3.10
STREAM_PORT=$(free_port)
cat >"$NODE_DIR/containerd/config.toml" <<TOML
version = 2
root = "$NODE_DIR/containerd/root"
state = "$NODE_RUN/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$NODE_RUN/containerd.ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # No CAP_SYS_RESOURCE in this VM: runc must not try to lower oom_score_adj.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "$STREAM_PORT"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni/net.d"
    max_conf_num = 1
TOML

# Undone newest first: containers' processes, then shims, then their mounts.
record mounts "$NODE_RUN"
record mounts "$NODE_DIR"
record shims "$CONTAINERD_SOCK"
for h in $(cgroup_hierarchies); do record cgroup-procs "$h$CGROUP_ROOT"; done
node_log "starting containerd ($(containerd --version | awk '{print $3}'))"
start_node_proc containerd containerd --config "$NODE_DIR/containerd/config.toml"
record containerd-tasks
for _ in $(seq 1 100); do
	ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1 && break
	node_proc_pid containerd >/dev/null || node_die "containerd exited: $(tail -n 5 "$NODE_DIR/logs/containerd.log")"
	sleep 0.1
done
ctr --address "$CONTAINERD_SOCK" version >/dev/null 2>&1 || node_die "containerd not answering on $CONTAINERD_SOCK"

# Images: the controller image and the sandbox (pause) image, from the OCI archives.
for a in sample-controller-c pause; do
	[ -f "$IMAGE_DIR/$a.oci.tar" ] || node_die "missing $IMAGE_DIR/$a.oci.tar (make image)"
	node_import_image "$IMAGE_DIR/$a.oci.tar" >/dev/null
done
VERSION="$(cat "$CSC_ROOT/VERSION")"
IMAGE="docker.io/library/sample-controller-c:$VERSION"
# (Listed once: `ctr ... | grep -q` would fail under pipefail when grep exits early.)
images="$(ctr --address "$CONTAINERD_SOCK" -n k8s.io images ls -q)"
for i in "$IMAGE" "$PAUSE_IMAGE"; do
	grep -qx "$i" <<<"$images" || node_die "image $i not in containerd after import (has: $(echo $images))"
done

# ---- The kubelet.
KUBELET_PORT=$(free_port)
KUBELET_HEALTHZ_PORT=$(free_port)
cat >"$NODE_DIR/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# Serves only on the node's bridge address (the API server reaches it there).
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
# Hybrid cgroup v1 here; pods beneath this script's own memory cgroup.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
registerNode: true
registerWithTaints:
- {key: $NODE_LABEL, value: "true", effect: NoSchedule}
# No DNS server runs: pods reach the API server by the Service address. The
# address is in the Service range (ClusterFirst pods need one); nothing answers
# there, and nothing sent to it leaves the machine.
clusterDNS: [10.0.0.10]
clusterDomain: cluster.local
resolvConf: ""
podLogsDir: $NODE_DIR/pod-logs
volumePluginDir: $NODE_DIR/volume-plugins
maxPods: 20
serializeImagePulls: false
# Images come from archives imported here, not from a registry: never collect them,
# and never evict pods for this development disk's usage.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
shutdownGracePeriod: 0s
YAML

# Chains the kubelet will add: snapshot what exists before it starts.
for tool in iptables ip6tables; do
	command -v "$tool" >/dev/null || continue
	for table in filter nat mangle; do
		# shellcheck disable=SC2046
		$tool -t "$table" -S >/dev/null 2>&1 &&
			record ipt-kubelet "$tool" "$table" $($tool -t "$table" -S | awk '$1 == "-N" { print $2 }')
	done
done
# The kubelet's root directory must be on a shared mount. When it is not, the
# kubelet bind-mounts it on itself at start, while another of its goroutines
# renames the pod-resources socket into place beneath it; a rename whose two paths
# are looked up on either side of that new mount fails with EXDEV ("invalid
# cross-device link") and the kubelet exits. It is made one here, before the
# kubelet starts, so that the kubelet mounts nothing there (undone by the
# "mounts $NODE_DIR" record above).
mount --bind "$NODE_DIR/kubelet" "$NODE_DIR/kubelet"
mount --make-rshared "$NODE_DIR/kubelet"
grep -E " $NODE_DIR/kubelet [^ ]+ [^-]*shared:" /proc/self/mountinfo >/dev/null ||
	node_die "$NODE_DIR/kubelet is not a shared mount after mount --make-rshared"
node_log "starting kubelet $KUBE_VERSION on $NODE_IP:$KUBELET_PORT (cgroup root $CGROUP_ROOT)"
start_node_proc kubelet "$BIN/kubelet" --config "$NODE_DIR/kubelet.yaml" \
	--kubeconfig "$NODE_DIR/kubelet.kubeconfig" --root-dir "$NODE_DIR/kubelet" \
	--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --node-labels "$NODE_LABEL=true" --v 1

for _ in $(seq 1 240); do
	node_ready && break
	node_proc_pid kubelet >/dev/null || node_die "kubelet exited"
	sleep 0.5
done
node_ready || node_die "node $NODE_NAME not Ready after 120s"

cat >"$NODE_DIR/env" <<ENV
# Written by hack/node-up.sh: source it in tests.
NODE_NAME=$NODE_NAME
NODE_IP=$NODE_IP
NODE_BRIDGE=$NODE_BRIDGE
KUBELET_PORT=$KUBELET_PORT
KUBELET_HEALTHZ_PORT=$KUBELET_HEALTHZ_PORT
CONTAINERD_SOCK=$CONTAINERD_SOCK
CGROUP_ROOT=$CGROUP_ROOT
NODE_IMAGE=$IMAGE
ENV
trap - EXIT
node_log "node $NODE_NAME Ready in $(($(date +%s) - t0))s (logs: $NODE_DIR/logs/)"
