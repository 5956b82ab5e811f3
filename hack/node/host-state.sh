#!/usr/bin/env bash
# Print the host state that hack/node-up.sh may change, normalised so that two
# snapshots compare with diff: iptables rules and chains (v4 and v6, no counters),
# links, the sysctls it or the kubelet set, mount points, cgroup directories under
# this shell's memory cgroup path in every hierarchy, the host paths it may create,
# and processes that name its containerd socket. tests/e2e/run.sh takes one before
# node-up and one after node-down and fails on any difference.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
for tool in iptables-save ip6tables-save; do
	command -v "$tool" >/dev/null || continue
	echo "== $tool"
	# A table with nothing but its built-in chains at policy ACCEPT is the same
	# host as no table at all (on a machine where iptables never ran, the first
	# rule creates the table and removing the rule leaves it empty): left out.
	$tool 2>/dev/null | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' | awk '
		/^\*/ { name = $0; n = 0; empty = 1; next }
		/^COMMIT/ { if (!empty) { print name; for (i = 0; i < n; i++) print body[i]; print } next }
		{ body[n++] = $0; if ($0 !~ /^:(PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) ACCEPT *$/) empty = 0 }'
done
echo "== links"
ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort
echo "== sysctls"
for s in "${NODE_SYSCTLS[@]}"; do
	f="/proc/sys/${s//.//}"
	[ -f "$f" ] && echo "$s=$(cat "$f")"
done
echo "== mounts"
awk '{ print $5 }' /proc/self/mountinfo | sort
echo "== cgroups"
cg="$(own_memory_cgroup)"
for h in $(cgroup_hierarchies); do
	for level in $(path_levels "$cg"); do
		[ -d "$h$level" ] && echo "$h$level"
	done
	[ -d "$h$cg" ] && find "$h$cg" -mindepth 1 -type d 2>/dev/null | sort
done
echo "== paths"
for p in "${NODE_HOST_PATHS[@]}" "$NODE_RUN" "$NODE_DIR"; do
	[ -e "$p" ] && echo "$p"
done
echo "== processes"
for d in /proc/[0-9]*; do
	cmd="$({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null)" || continue
	case "$cmd" in *"$NODE_RUN"* | *"$NODE_DIR"*) echo "${cmd%% *}" ;; esac
done | sort
