#!/usr/bin/env bash
# Stop the real node that hack/node-up.sh started and undo every change it made to
# this machine, from its undo record ($NODE_RECORD), newest first: the kubelet,
# containerd's containers and shims, containerd, the kubelet's iptables chains and
# ours, the bridge, sysctls, mounts, network namespaces, cgroups and directories.
# Processes are stopped by recorded PID (checked against their start time), never
# by name. Safe to run again, and after a killed node-up.
#
#   hack/node-down.sh            also deletes the Node object when the API is up
set -uo pipefail
. "$(dirname "$0")/node/lib.sh"

[ "$(id -u)" = 0 ] || node_die "must run as root (it undoes iptables, sysctls, mounts and cgroups)"

# The Node object: without it the control plane does not wait for a dead kubelet.
if [ -f "$LOCAL_DIR/kubeconfig" ]; then
	KUBECONFIG="$LOCAL_DIR/kubeconfig" timeout 20 kubectl delete node "$NODE_NAME" \
		--ignore-not-found --wait=false >/dev/null 2>&1 || true
fi

if [ ! -f "$NODE_RECORD" ]; then
	# Nothing recorded, but a directory may remain (a run killed before its first
	# record): never rm -rf through a mount point.
	umount_under "$NODE_DIR"
	umount_under "$NODE_RUN"
	rm -rf "$NODE_DIR"
	check_no_mounts
	exit 0
fi

stop_pid() { # stop_pid NAME PID STARTTIME
	local name="$1" pid="$2" st="$3" i
	[ "$(proc_starttime "$pid")" = "$st" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 1 150); do
		[ "$(proc_starttime "$pid")" = "$st" ] || { node_log "stopped $name (pid $pid)"; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	node_log "killed $name (pid $pid) after 15s"
}

# Processes inside a cgroup tree we created (the pods' containers): ours by
# construction, found by PID through cgroup.procs.
kill_cgroup_procs() {
	local f pid
	while read -r f; do
		while read -r pid; do
			[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
		done <"$f"
	done < <(find "$1" -name cgroup.procs 2>/dev/null)
}

# Shims containerd started for us: they re-parent to init, and name our
# containerd's socket on their command line.
kill_shims() {
	local d pid cmd
	for d in /proc/[0-9]*; do
		pid="${d#/proc/}"
		cmd="$({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null)" || continue
		case "$cmd" in *containerd-shim*"-address $1 "*) kill -KILL "$pid" 2>/dev/null && node_log "killed shim pid $pid" ;; esac
	done
}

# ipt_chain_del TABLE CHAIN: remove every rule that jumps to CHAIN, then CHAIN.
ipt_chain_del() {
	local tool="$1" table="$2" chain="$3" rule
	$tool -t "$table" -S 2>/dev/null | grep -E -- "-j $chain( |$)" | while read -r rule; do
		# "-A FORWARD ... -j X" -> "-D FORWARD ... -j X"
		eval "$tool -t $table -D ${rule#-A }" 2>/dev/null || true
	done
	$tool -t "$table" -F "$chain" 2>/dev/null || true
	$tool -t "$table" -X "$chain" 2>/dev/null || true
}

tac "$NODE_RECORD" | while read -r kind a b c rest; do
	case "$kind" in
	proc) stop_pid "$a" "$b" "$c" ;;
	containerd-tasks)
		# While containerd still runs: stop every container and sandbox it holds.
		if [ -S "$CONTAINERD_SOCK" ]; then
			for t in $(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
				ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
			done
			sleep 0.5
			for t in $(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
				ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true
			done
		fi
		;;
	shims) kill_shims "$a" ;;
	cgroup-procs) kill_cgroup_procs "$a" ;;
	ipt-kubelet)
		# Chains that appeared while the kubelet ran ($a = tool, $b = table,
		# rest = the chains that existed before it started): the kubelet's.
		before=" $c $rest "
		for ch in $($a -t "$b" -S 2>/dev/null | awk '$1 == "-N" { print $2 }'); do
			case "$before" in *" $ch "*) continue ;; esac
			case "$ch" in KUBE-*) ipt_chain_del "$a" "$b" "$ch" && node_log "removed kubelet chain $a $b $ch" ;; esac
		done
		;;
	ipt) ipt_chain_del "$a" "$b" "$c" ;;
	link) ip link del "$a" 2>/dev/null && node_log "removed link $a" ;;
	sysctl) echo "$b" >"/proc/sys/${a//.//}" 2>/dev/null && node_log "restored $a=$b" ;;
	mounts) umount_under "$a" ;;
	netns)
		# Network namespaces created after node-up started ($b... = those before).
		before=" $b $c $rest "
		for f in "$a"/*; do
			[ -e "$f" ] || continue
			case "$before" in *" $(basename "$f") "*) continue ;; esac
			umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null || true
			rm -f "$f"
		done
		;;
	cgroup)
		# Depth-first: a cgroup directory can only be removed once it has no children.
		if [ -d "$a" ]; then
			kill_cgroup_procs "$a"
			find "$a" -depth -type d -exec rmdir {} \; 2>/dev/null
			[ -d "$a" ] && node_log "could not remove cgroup $a" || true
		fi
		;;
	path)
		# A host path that did not exist before node-up (made by containerd/kubelet/CNI).
		if [ -e "$a" ]; then
			umount_under "$a"
			rm -rf "$a"
		fi
		;;
	dir)
		umount_under "$a"
		rm -rf "$a"
		;;
	esac
done

# Sockets containerd leaves behind, and the record itself.
umount_under "$NODE_RUN"
rm -rf "$NODE_RUN"
rm -rf "$NODE_DIR"
check_no_mounts
node_log "node $NODE_NAME stopped; host state restored"
