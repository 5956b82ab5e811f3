# Shared by hack/node-up.sh and hack/node-down.sh: names, paths and the undo record
# of the real node (containerd + runc + CNI bridge + kubelet).
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

NODE_NAME=real-node
NODE_LABEL=sample-controller.local/real-node
# The node's own network exists only on this machine: a bridge with a private
# /24, no masquerade, and a rule that drops anything forwarded off it.
NODE_BRIDGE=cscbr0
NODE_SUBNET=10.200.0.0/24
NODE_IP=10.200.0.1
# The `kubernetes` Service address (first address of local-up.sh's
# --service-cluster-ip-range); pods reach the API server through it.
SERVICE_IP=10.0.0.1
# Everything the node makes lives under NODE_DIR (configs, containerd's root, the
# kubelet's root, pod logs) except what needs a short path: unix sockets and
# containerd's state (shim sockets live there, and sun_path is 108 bytes).
NODE_DIR="$LOCAL_DIR/node"
NODE_RUN=/run/csc-node
# The undo record: one line per change made to the host, appended *before* the
# change is made, so that a run killed halfway is still undone completely.
# In /run because everything it records (sysctls, chains, links, mounts,
# cgroups, processes) also disappears on reboot.
NODE_RECORD="$NODE_RUN/record"
CONTAINERD_SOCK="$NODE_RUN/containerd.sock"
# The iptables chains this node adds (kubelet's own are recorded by diff).
CHAIN_FWD=CSC-NODE-FORWARD
CHAIN_DNAT=CSC-NODE-DNAT
# Host paths containerd, runc, CNI or the kubelet create outside our directories
# even when told otherwise (removed on the way down if they did not exist before).
NODE_HOST_PATHS=(/var/lib/cni /var/run/netns /run/netns /var/lib/kubelet /var/log/pods
	/var/log/containers /usr/libexec/kubernetes /etc/kubernetes /opt/cni /etc/cni/net.d
	/run/containerd /var/lib/containerd /run/runc /var/lib/nerdctl)
# Sysctls the kubelet (its kernel tunables) and the bridge plugin (forwarding) set.
NODE_SYSCTLS=(net.ipv4.ip_forward vm.overcommit_memory kernel.panic kernel.panic_on_oops
	net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables)

node_log() { log "$(basename "$0" .sh): $*"; }
node_die() {
	echo "$(basename "$0" .sh): $*" >&2
	exit 1
}

# record KIND ARGS...: append one undo entry.
record() {
	mkdir -p "$NODE_RUN"
	printf '%s\n' "$*" >>"$NODE_RECORD"
}

# remember_sysctl NAME: record NAME's current value (once), to be restored on the
# way down; the kubelet and the bridge plugin are the ones that change them.
remember_sysctl() {
	local f="/proc/sys/${1//.//}"
	[ -f "$f" ] || return 0
	grep -q "^sysctl $1 " "$NODE_RECORD" 2>/dev/null || record sysctl "$1" "$(cat "$f")"
}

# The memory cgroup this script runs in (hybrid v1: the only delegated
# controller). Pods go beneath it so that their memory stays inside it.
own_memory_cgroup() {
	local line
	line="$(grep -E '^[0-9]+:memory:' /proc/self/cgroup || true)"
	if [ -z "$line" ]; then
		# cgroup v2 only: the unified path.
		line="$(grep -E '^0::' /proc/self/cgroup)"
	fi
	echo "${line#*:*:}"
}

# cgroup_hierarchies: every mounted cgroup hierarchy directory (v1 controllers,
# named hierarchies and the unified v2 tree).
cgroup_hierarchies() {
	awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts | sort -u
}

# path_levels /a/b/c: /a, /a/b, /a/b/c (one per line).
path_levels() {
	local p="" part
	IFS=/ read -ra parts <<<"${1#/}"
	for part in "${parts[@]}"; do
		[ -n "$part" ] || continue
		p="$p/$part"
		echo "$p"
	done
}

# mounts_under DIR: mount points at or below DIR, deepest first.
mounts_under() {
	awk -v d="$1" '{ gsub(/\\040/, " ", $5); if ($5 == d || index($5, d "/") == 1) print $5 }' \
		/proc/self/mountinfo | awk '{ print length($0) " " $0 }' | sort -rn | cut -d' ' -f2-
}

# umount_under DIR: unmount every mount point at or below DIR, deepest first,
# naming each one (a mount left under the kubelet's root makes the next kubelet
# fail, so what was removed is worth a line in the log).
umount_under() {
	local m
	while read -r m; do
		[ -n "$m" ] || continue
		if umount "$m" 2>/dev/null; then
			node_log "unmounted $m"
		elif umount -l "$m" 2>/dev/null; then
			node_log "unmounted $m (lazily: it was busy)"
		else
			node_log "could not unmount $m"
		fi
	done < <(mounts_under "$1")
}

# check_no_mounts: fail, naming them, if any mount remains under our directories.
check_no_mounts() {
	local left
	left="$(mounts_under "$NODE_DIR"; mounts_under "$NODE_RUN")"
	[ -z "$left" ] || node_die "mounts remain under $NODE_DIR or $NODE_RUN: $(echo $left)"
}

# node_import_image ARCHIVE: import an OCI archive of hack/image.sh into the node's
# containerd (namespace k8s.io, the kubelet's) and print the name containerd lists it
# under, the archive's io.containerd.image.name annotation (hack/image.sh writes it);
# fails when containerd does not list that name afterwards. The import unpacks it into
# the snapshotter (overlayfs) too: its files exist on disk before a pod starts
# (bench/bench_node.sh drops the page cache between the two).
node_import_image() {
	local a="$1" name images
	[ -f "$a" ] || node_die "missing $a (bash hack/image.sh)"
	name="$(python3 -c '
import json, sys, tarfile
index = json.load(tarfile.open(sys.argv[1]).extractfile("index.json"))
print(index["manifests"][0]["annotations"]["io.containerd.image.name"])' "$a")" ||
		node_die "$a names no image (no io.containerd.image.name in its index.json)"
	ctr --address "$CONTAINERD_SOCK" -n k8s.io images import --all-platforms "$a" >/dev/null
	# (Listed once: `ctr ... | grep -q` would fail under pipefail when grep exits early.)
	images="$(ctr --address "$CONTAINERD_SOCK" -n k8s.io images ls -q)"
	grep -qxF "$name" <<<"$images" || node_die "image $name not in containerd after importing $a"
	echo "$name"
}

# proc_starttime PID: field 22 of /proc/PID/stat, to recognise our process
# after a restart of this script (PIDs are reused).
proc_starttime() {
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $20 }'
}

# start_node_proc NAME CMD...: start CMD detached, log to $NODE_DIR/logs/NAME.log,
# record its PID and start time.
start_node_proc() {
	local name="$1" pid
	shift
	mkdir -p "$NODE_DIR/logs"
	setsid "$@" >>"$NODE_DIR/logs/$name.log" 2>&1 </dev/null &
	pid=$!
	record proc "$name" "$pid" "$(proc_starttime "$pid")"
	echo "$pid" >"$NODE_DIR/$name.pid"
}

# node_proc_pid NAME: the PID of our NAME if it is still the process we started.
node_proc_pid() {
	local line pid st
	line="$(grep "^proc $1 " "$NODE_RECORD" 2>/dev/null | tail -n 1)" || return 1
	[ -n "$line" ] || return 1
	set -- $line
	pid="$3" st="$4"
	[ "$(proc_starttime "$pid")" = "$st" ] || return 1
	echo "$pid"
}
