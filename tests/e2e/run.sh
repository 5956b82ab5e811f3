#!/usr/bin/env bash
# Run the integration suites and every tests/e2e/test_*.sh against the real local
# control plane. Starts it if it is not running and stops it afterwards if it
# was started here. Prints "N passed, N failed" at the end.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
started=0
if ! { [ -f .local/env ] && KUBECONFIG=.local/kubeconfig kubectl get --raw /readyz >/dev/null 2>&1; }; then
	bash hack/local-up.sh || { echo "e2e: could not start the local control plane" >&2; exit 1; }
	started=1
fi
cleanup() { if [ "$started" = 1 ] && [ -z "${E2E_KEEP_CLUSTER:-}" ]; then bash hack/local-down.sh; fi; }
trap cleanup EXIT

passed=0; failed=0; skipped=0; failures=()
B="${B:-build}"

# Shell e2e tests: each t_* function in each file given is one test.
run_files() {
	local f fn fns start rc
	for f in "$@"; do
		[ -e "$f" ] || continue
		[ -n "$only" ] && [[ "$f" != *"$only"* ]] && continue
		fns=$(bash -c ". '$f'; declare -F" | awk '{print $3}' | grep '^t_' || true)
		for fn in $fns; do
			start=$(date +%s)
			# Not inside an `if`: bash ignores set -e in a condition, even in functions.
			# The ERR trap names the command that failed when a test ends without a message.
			(cd "$root" && . "$f" && set -eE &&
				trap 'echo "    (failed: line ${LINENO}: ${BASH_COMMAND})" >&2' ERR && "$fn") \
				>"/tmp/e2e-$fn.log" 2>&1
			rc=$?
			# A failed test may leave its daemons running: they would hold leases and
			# write into the next test's namespaces. Reap them.
			for pf in "${E2E_LOGS:-$root/.local/e2e-logs}"/*.pid; do
				[ -e "$pf" ] || continue
				kill -9 "$(cat "$pf")" 2>/dev/null || true
				rm -f "$pf"
			done
			[ -z "${CSC_TIMES:-}" ] || echo "$(( $(date +%s) - start )) e2e $(basename "$f" .sh) $fn" >>"$CSC_TIMES"
			if [ "$rc" = 0 ]; then
				echo "  ok    $(basename "$f" .sh) $fn ($(( $(date +%s) - start ))s)"
				passed=$((passed + 1))
			else
				echo "  FAIL  $(basename "$f" .sh) $fn ($(( $(date +%s) - start ))s)"
				grep -a 'FAIL:\|(failed:' "/tmp/e2e-$fn.log" | head -n 5
				sed 's/^/        /' "/tmp/e2e-$fn.log" | tail -n 40
				failed=$((failed + 1)); failures+=("$fn")
			fi
		done
	done
}
only="${E2E_ONLY:-}"

# 1. The control plane itself, while it is fresh.
echo "== control plane"
run_files tests/e2e/test_cluster.sh

# 2. C integration suites (check), sanitized, against the real API server. They
# need the Foo CRD.
if ls tests/integration/test_*.c >/dev/null 2>&1 && [ -z "$only" ]; then
	echo "== integration suites"
	kubectl --kubeconfig "$root/.local/kubeconfig" apply -f deploy/crd.yaml >/dev/null &&
		kubectl --kubeconfig "$root/.local/kubeconfig" wait --for=condition=Established \
			--timeout=60s crd/foos.samplecontroller.k8s.io >/dev/null
	istart=$(date +%s)
	make --no-print-directory integration B="$B" KUBECONFIG="$root/.local/kubeconfig"
	irc=$?
	[ -z "${CSC_TIMES:-}" ] || echo "$(( $(date +%s) - istart )) e2e integration-suites" >>"$CSC_TIMES"
	if [ "$irc" = 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1)); failures+=("integration suites")
	fi
fi

# 3. The daemon end to end. The API Priority and Fairness test spends minutes
# waiting for the daemon's backoff to grow (its own FlowSchema and priority level,
# its own service account: nothing the others touch), so it runs beside them, with
# its logs and PID files in a directory of its own; its lines are printed after.
# It needs the API server to keep running (a restart drops the request that holds
# its priority level's only seat, and its daemon is then let through), so the
# files that restart or compact it (those using hack/local-ctl.sh) run first.
echo "== sample-controller end to end"
e2e_files=$(ls tests/e2e/test_*.sh | grep -v test_cluster.sh)
disrupting=$(grep -l 'local-ctl' $e2e_files | tr '\n' ' ' || true)
run_files $disrupting
bg_tests=""
if [ -z "$only" ] || [[ test_apf.sh == *"$only"* ]]; then
	bg_tests=tests/e2e/test_apf.sh
	mkdir -p "$root/.local/e2e-logs/bg"
	rm -f /tmp/e2e-bg.out /tmp/e2e-bg.result
	(
		export E2E_LOGS="$root/.local/e2e-logs/bg"
		passed=0 failed=0 failures=()
		run_files $bg_tests >/tmp/e2e-bg.out 2>&1
		echo "$passed $failed ${failures[*]}" >/tmp/e2e-bg.result
	) &
	bg_pid=$!
fi
run_files $(for f in $e2e_files; do
	case " $disrupting $bg_tests " in *" $f "*) ;; *) echo "$f" ;; esac
done)
if [ -n "$bg_tests" ]; then
	wait "$bg_pid"
	cat /tmp/e2e-bg.out
	read -r bp bf bfails </tmp/e2e-bg.result || { bp=0 bf=1 bfails="background tests"; }
	passed=$((passed + bp)) failed=$((failed + bf))
	[ -n "${bfails:-}" ] && failures+=($bfails)
	# Their daemon logs join the others for the credential scan at the end.
	for f in "$root"/.local/e2e-logs/bg/*.log; do [ -e "$f" ] && mv "$f" "$root/.local/e2e-logs/bg-$(basename "$f")"; done
fi

# The node's undo record (host-wide, not under .local), named where node-up names it.
node_record=$(bash -c '. hack/node/lib.sh && echo "$NODE_RECORD"')

# host_same WHAT: the host is as it was before node-up (one test).
host_same() {
	bash hack/node/host-state.sh >/tmp/e2e-host-after.txt
	if diff -u /tmp/e2e-host-before.txt /tmp/e2e-host-after.txt >/tmp/e2e-host-diff.txt; then
		echo "  ok    $1"
		passed=$((passed + 1))
	else
		echo "  FAIL  $1: host state left behind:"
		sed 's/^/        /' /tmp/e2e-host-diff.txt | head -n 40
		failed=$((failed + 1)); failures+=("$1")
	fi
}
# A node-up killed (SIGKILL) once containerd runs, as by a CI timeout: the next
# node-up undoes what it left and comes up; node-down then restores the host.
node_killed_halfway() {
	local pid i ok=1 why=""
	rm -f /tmp/e2e-node-again.log
	bash hack/node-up.sh >/tmp/e2e-node-killed.log 2>&1 &
	pid=$!
	# Not bounded by a guess at how long the steps before containerd take on a
	# loaded machine: until containerd is recorded or that node-up has ended.
	for i in $(seq 1 1800); do
		grep -qs '^proc containerd ' "$node_record" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -qs '^proc containerd ' "$node_record" ||
		why="the first node-up never started containerd (log: /tmp/e2e-node-killed.log)"
	kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	if [ -z "$why" ]; then
		if ! bash hack/node-up.sh >/tmp/e2e-node-again.log 2>&1; then
			why="the second node-up failed (log: /tmp/e2e-node-again.log)"
		elif ! grep -q 'undoing what an earlier run left behind' /tmp/e2e-node-again.log; then
			why="the second node-up did not undo the killed run's changes (log: /tmp/e2e-node-again.log)"
		fi
	fi
	if [ -n "$why" ]; then
		echo "  FAIL  node-up after a killed node-up: $why"
		echo "        ---- killed run"; tail -n 10 /tmp/e2e-node-killed.log | sed 's/^/        /'
		[ -f /tmp/e2e-node-again.log ] && { echo "        ---- second run"; tail -n 30 /tmp/e2e-node-again.log | sed 's/^/        /'; }
		failed=$((failed + 1)); failures+=("node-up after a killed node-up")
		ok=0
	fi
	bash hack/node-down.sh >/tmp/e2e-node-down.log 2>&1 || ok=0
	[ "$ok" = 1 ] && host_same "node-up after a killed node-up cleaned up and came up; node-down restored the host"
}

# A mount left under the node's directory (as a kubelet that bind-mounted its root
# leaves one): node-up refuses to start on it, naming it; node-down removes it,
# naming it; the host is then as before.
node_stray_mount() {
	local m="$root/.local/node/kubelet/pod-resources" why=""
	mkdir -p "$m" && mount -t tmpfs -o size=1m csc-stray "$m" || { why="could not make the stray mount"; }
	if [ -z "$why" ]; then
		if bash hack/node-up.sh >/tmp/e2e-node-stray.log 2>&1; then
			why="node-up started on top of a stray mount (log: /tmp/e2e-node-stray.log)"
		elif ! grep -q "mounts remain.*$m" /tmp/e2e-node-stray.log; then
			why="node-up failed without naming the stray mount $m (log: /tmp/e2e-node-stray.log)"
		fi
	fi
	bash hack/node-down.sh >/tmp/e2e-node-stray-down.log 2>&1 ||
		why="${why:+$why; }node-down failed (log: /tmp/e2e-node-stray-down.log)"
	grep -q "unmounted $m" /tmp/e2e-node-stray-down.log ||
		why="${why:+$why; }node-down did not name the mount it removed (log: /tmp/e2e-node-stray-down.log)"
	if [ -n "$why" ]; then
		echo "  FAIL  node-up refuses a stray mount, node-down removes it: $why"
		tail -n 10 /tmp/e2e-node-stray.log /tmp/e2e-node-stray-down.log 2>/dev/null | sed 's/^/        /'
		failed=$((failed + 1)); failures+=("stray mount")
		return
	fi
	host_same "node-up refused a stray mount under the node's directory, naming it; node-down removed it"
}

# 4. The controller deployed as a pod under a real kubelet (hack/node-up.sh), from
# deploy/ through hack/node/. Needs root (bridge, iptables, cgroups, mounts).
echo "== deployed on a real node"
node_tests=$(grep -cE '^t_[a-z0-9_]+\(\)' tests/e2e/node_deploy.sh)
if [ -n "$only" ] && [[ node_deploy != *"$only"* ]]; then
	:
elif [ "$(id -u)" != 0 ]; then
	echo "  skip  node_deploy ($node_tests tests): not root; hack/node-up.sh needs root for its bridge, iptables rules, cgroups and mounts"
	skipped=$((skipped + node_tests))
else
	start=$(date +%s)
	# What the host looks like without the node: node-down must restore exactly it.
	# A node that an earlier, killed run left (from this clone or another: the
	# undo record is host-wide) is not part of that host: it is undone first, as
	# node-up would, or the snapshot would hold it and a clean node-down would read
	# as a difference.
	if [ ! -f .local/node/env ] && [ -f "$node_record" ]; then
		echo "  note  an earlier run left a node behind: undoing it before the host snapshot"
		bash hack/node-down.sh >/tmp/e2e-node-stale-down.log 2>&1 ||
			{ echo "  note  that node-down failed (log: /tmp/e2e-node-stale-down.log)"; }
	fi
	[ -f .local/node/env ] || bash hack/node/host-state.sh >/tmp/e2e-host-before.txt
	if bash hack/node-up.sh >/tmp/e2e-node-up.log 2>&1; then
		[ -z "${CSC_TIMES:-}" ] || echo "$(( $(date +%s) - start )) e2e node-up" >>"$CSC_TIMES"
		echo "  node up in $(( $(date +%s) - start ))s ($(tail -n 1 /tmp/e2e-node-up.log | sed 's/^[0-9:]* //'))"
		run_files tests/e2e/node_deploy.sh
		if [ -z "${E2E_KEEP_NODE:-}" ]; then
			if ! bash hack/node-down.sh >/tmp/e2e-node-down.log 2>&1; then
				echo "  FAIL  node-down"; tail -n 20 /tmp/e2e-node-down.log
				failed=$((failed + 1)); failures+=("node-down")
			elif [ -f /tmp/e2e-host-before.txt ]; then
				bash hack/node/host-state.sh >/tmp/e2e-host-after.txt
				host_same "node-down restored the host (iptables, links, sysctls, mounts, cgroups, paths, processes)"
				node_killed_halfway
				node_stray_mount
			fi
		fi
	else
		echo "  FAIL  node-up ($(( $(date +%s) - start ))s)"
		tail -n 40 /tmp/e2e-node-up.log | sed 's/^/        /'
		failed=$((failed + 1)); failures+=("node-up")
	fi
fi

# 5. Last: every daemon log the runs above wrote is scanned for credentials.
echo "== logs"
run_files tests/e2e/last_secrets.sh
echo "e2e: ${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" = 0 ]
