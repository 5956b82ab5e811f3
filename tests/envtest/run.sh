#!/usr/bin/env bash
# envtest on the real etcd and kube-apiserver (make envtest-test), as an unprivileged
# user: nobody through setpriv when run as root, else the caller.
#
#   start/stop     <ckube/envtest.h>: start with deploy/crd.yaml, a Foo created through
#                  a client made from the returned config, stop; no PID, no directory
#                  left (envtest_test basic). The first start runs with the binaries'
#                  pages evicted from the page cache (cold), the next ones warm.
#   bad input      missing binary, a fixed port in use, a CRD the server refuses, two
#                  CRDs whose names conflict, a document that is not a CRD, a missing
#                  CRD path: one line naming it, nothing left running or on disk
#   crash          the test process killed with SIGKILL mid-run: its servers die with
#                  it, and the next start removes its directory; a directory whose owner
#                  died while its servers still run: the next start stops them
#   sample-controller  the daemon on a ckube-envtest kubeconfig: a Foo's Deployment,
#                  status and event, a scale, a deleted Deployment recreated, the Foo
#                  deleted; a clean exit on SIGTERM (tests/envtest/sample_controller.sh)
#   examples       each examples/<name>/envtest_test.c (EXAMPLE_ENVTESTS: name=program
#                  pairs, from the Makefile), run in the example's directory
#   shard          KEP-5866 shard selectors on a server with ShardedListAndWatch on
#                  and off (tests/envtest/shard_test.c, $SHARD_TEST)
#   sharding       three replicas splitting buckets on Leases: join, boundaries moved to
#                  the namespaces' hashes (balance, move), stop, kill
#                  (tests/envtest/sharding_test.c, $SHARDING_TEST)
#   sharded        sample-controller as 3..5 active replicas (--shards-by): caches,
#                  convergence, handover times and the overlap oracle, gate on/off
#                  (tests/envtest/sharded.sh)
#   command        ckube-envtest start prints `export KUBECONFIG=...` and returns with
#                  the servers running; stop stops them and removes the files; its
#                  errors exit 1 with one line and leave nothing behind
#
# Needs the binaries: CKUBE_ENVTEST_ASSETS, else hack/build-k8s.sh envtest (the build
# cache; builds them once). Prints "N passed, N failed" and the start times.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
test_bin="${ENVTEST_TEST:?ENVTEST_TEST names the envtest_test program}"
cli="$root/bin/ckube-envtest"
passed=0 failed=0

work="$(mktemp -d /tmp/ckube-envtest-test.XXXXXX)"
cleanup() {
	# Whatever a failed case left: only processes naming this run's directory.
	local p
	for p in $(pgrep -f "$work/" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# ---- who runs the tests, and the binaries where that user can read them.
. "$root/tests/envtest/user.sh"
envtest_user_setup "$work" || exit 1
user=$envtest_user src=$envtest_src assets=$envtest_assets
parent="$work/envs"
mkdir "$parent"
[ "$user" = nobody ] && chown nobody:nogroup "$parent"

ok() { echo "  ok    envtest $1"; passed=$((passed + 1)); }
# check NAME FUNCTION: FUNCTION's output in $work/out; each of its steps returns 1 on
# failure (set -e would be ignored: the function's status is tested).
check() {
	local name="$1" fn="$2" t0=$SECONDS
	if "$fn" >"$work/out" 2>&1; then ok "$name ($((SECONDS - t0))s)"; else bad "$name"; fi
}
bad() {
	echo "  FAIL  envtest $1"
	sed 's/^/        /' "$work/out" | tail -n 30
	failed=$((failed + 1))
}
# case NAME COMMAND...: runs COMMAND as the user, output in $work/out.
case_run() {
	local name="$1"; shift
	local t0=$SECONDS
	if as_user "$@" >"$work/out" 2>&1; then
		ok "$name ($((SECONDS - t0))s)"
	else
		bad "$name"
	fi
}
alive() { [ -r "/proc/$1/stat" ] && ! awk '{ sub(/.*\) /, ""); exit ($1 == "Z" ? 0 : 1) }' "/proc/$1/stat"; }
nothing_left() { # nothing in $parent, no process naming it
	local n
	n=$(find "$parent" -mindepth 1 -maxdepth 1 -name 'ckube-envtest.*' | wc -l)
	[ "$n" = 0 ] || { echo "left in $parent: $(ls "$parent")"; return 1; }
	! pgrep -f "$parent/" >/dev/null || { echo "still running: $(pgrep -af "$parent/")"; return 1; }
}

echo "== envtest as $user (binaries: $src)"

# ---- start/stop, cold then warm.
# Cold: from a fresh copy of the binaries whose pages are then dropped from the page
# cache (the originals' pages cannot be: other servers may have them mapped).
cold="$work/cold"
mkdir "$cold"
cp "$assets/etcd" "$assets/kube-apiserver" "$cold/"
chmod 755 "$cold"
python3 -c 'import os,sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.fdatasync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' \
	"$cold/etcd" "$cold/kube-apiserver"
times=()
case_run "start/stop cold" env CKUBE_ENVTEST_ASSETS="$cold" "$test_bin" basic "$parent" deploy/crd.yaml
times+=("cold $(awk '/^start_ms/ { print $2 }' "$work/out")ms")
stops=("$(awk '/^stop_ms/ { print $2 }' "$work/out")ms")
rm -rf "$cold"
for i in 1 2 3; do
	case_run "start/stop warm" "$test_bin" basic "$parent" deploy/crd.yaml
	times+=("warm $(awk '/^start_ms/ { print $2 }' "$work/out")ms")
	stops+=("$(awk '/^stop_ms/ { print $2 }' "$work/out")ms")
done

# ---- a free port taken between envtest's check and the server's bind: tried again
# with other ports. The first kube-apiserver says what Go says then, and exits.
t_port_race() {
	local fake="$work/race"
	mkdir "$fake"
	ln -s "$assets/etcd" "$fake/etcd"
	cat >"$fake/kube-apiserver" <<SH
#!/bin/sh
if [ ! -e "$fake/tried" ]; then
	: >"$fake/tried"
	echo 'E1207 run.go:72] "command failed" err="failed to create listener: failed to listen on 127.0.0.1:6443: listen tcp 127.0.0.1:6443: bind: address already in use"' >&2
	exit 1
fi
exec "$assets/kube-apiserver" "\$@"
SH
	chmod 755 "$fake/kube-apiserver"
	[ "$user" = nobody ] && chown nobody:nogroup "$fake"
	as_user env CKUBE_ENVTEST_ASSETS="$fake" "$test_bin" basic "$parent" deploy/crd.yaml || return 1
	[ -e "$fake/tried" ] || { echo "the failing kube-apiserver never ran"; return 1; }
	grep -q "a port was taken before the server bound it, trying others" "$work/out" ||
		{ echo "no retry was logged"; return 1; }
}
check "port taken before the bind: tried again" t_port_race

# ---- bad input, through the library.
case_run "missing binary" "$test_bin" fail "$parent" \
	"no executable etcd in /nonexistent (the assets directory given); run \`ckube-envtest assets\`" \
	--assets /nonexistent
# hold_port: a listener on a free port for 120 s, in $port, its process in $holder.
# The holder binds port 0 itself: a port found free and bound a moment later can be
# taken in between (any outgoing connection's ephemeral port), and then nothing was
# held and the start did not fail (seen once in a fresh-clone run).
hold_port() {
	local i
	: >"$work/held"
	python3 -c 'import socket,time
s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(120)' >"$work/held" &
	holder=$!
	for i in $(seq 1 200); do
		[ -s "$work/held" ] && break
		sleep 0.05
	done
	port=$(cat "$work/held")
}
hold_port
case_run "port in use" "$test_bin" fail "$parent" "127.0.0.1:$port, kube-apiserver's port, is in use" \
	--api-port "$port"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
case_run "CRD refused" "$test_bin" fail "$parent" \
	"tests/envtest/crd-bad-schema.yaml: document 1 (line 2): CustomResourceDefinition widgets.example.test:" \
	tests/envtest/crd-bad-schema.yaml
case_run "CRD names conflict" "$test_bin" fail "$parent" \
	"CustomResourceDefinition betas.example.test is not Established: NamesAccepted is False:" \
	tests/envtest/crd-conflict.yaml
case_run "not a CRD" "$test_bin" fail "$parent" \
	"not-a-crd.yaml: document 1 (line 3): apps/v1 Deployment is not an apiextensions.k8s.io/v1 CustomResourceDefinition" \
	tests/envtest/not-a-crd.yaml
case_run "missing CRD path" "$test_bin" fail "$parent" \
	"CRD path /nonexistent/crds: No such file or directory" /nonexistent/crds

# ---- a crash: the test killed with SIGKILL mid-run.
t_crash() {
	as_user "$test_bin" crash "$parent" >"$work/crash" 2>&1 &
	local crasher=$! i p left=1
	for i in $(seq 100); do
		[ "$(grep -c '^pid' "$work/crash" 2>/dev/null)" = 2 ] && break
		sleep 0.1
	done
	local crash_dir crash_pids
	crash_dir=$(awk '/^dir/ { print $2 }' "$work/crash")
	crash_pids=$(awk '/^pid/ { print $2 }' "$work/crash")
	# The test process itself, as it said.
	kill -9 "$(awk '/^self/ { print $2 }' "$work/crash")"
	wait "$crasher" 2>/dev/null
	[ -n "$crash_dir" ] && [ -d "$crash_dir" ] ||
		{ echo "no directory from the crashed run"; cat "$work/crash"; return 1; }
	# Their parent-death signal: the servers die with the test.
	for i in $(seq 100); do
		left=0
		for p in $crash_pids; do alive "$p" && left=1; done
		[ $left = 0 ] && break
		sleep 0.1
	done
	[ $left = 0 ] || { echo "servers of the killed test still run: $crash_pids"; return 1; }
	as_user "$test_bin" basic "$parent" deploy/crd.yaml || return 1
	[ ! -e "$crash_dir" ] || { echo "the next start did not remove $crash_dir"; return 1; }
}
check "crash: cleaned by the next start" t_crash

# A directory whose owner died while its servers run (they outlived it: detached,
# or the signal was lost): the next start stops them, by PID, and removes it.
t_stale() {
	as_user env CKUBE_ENVTEST_STATE_DIR="$parent" "$cli" start >/dev/null || return 1
	local d pids dead p
	d=$(cat "$parent/current")
	rm -f "$parent/current"
	pids=$(awk '$1 != "owner" { print $2 }' "$d/pids")
	# An owner that is gone: a finished process's PID.
	sh -c 'exit 0' &
	dead=$!
	wait $dead
	sed -i "s/^owner .*/owner $dead 1/" "$d/pids"
	as_user "$test_bin" basic "$parent" deploy/crd.yaml || return 1
	[ ! -e "$d" ] || { echo "$d is still there"; return 1; }
	for p in $pids; do ! alive "$p" || { echo "server $p of $d still runs"; return 1; }; done
}
check "stale: servers of a dead owner stopped" t_stale

# ---- the command.
cli_run() { as_user env CKUBE_ENVTEST_STATE_DIR="$parent" "$cli" "$@"; }
t_command() {
	local out d pids p
	out=$(cli_run start deploy/crd.yaml 2>"$work/err") || { cat "$work/err"; return 1; }
	[[ "$out" =~ ^export\ KUBECONFIG=$parent/ckube-envtest\.[A-Za-z0-9]+/kubeconfig$ ]] ||
		{ echo "start printed: $out"; return 1; }
	d=$(cat "$parent/current")
	pids=$(awk '$1 != "owner" { print $2 }' "$d/pids")
	[ -n "$pids" ] || { echo "no servers recorded"; return 1; }
	for p in $pids; do alive "$p" || { echo "server $p not running after start returned"; return 1; }; done
	# The kubeconfig works for kubectl, and the CRD is there.
	as_user env KUBECONFIG="${out#export KUBECONFIG=}" kubectl get foos -A >/dev/null ||
		{ echo "kubectl get foos failed"; return 1; }
	if cli_run start 2>"$work/err"; then echo "a second start did not refuse"; return 1; fi
	grep -q "already running" "$work/err" || { cat "$work/err"; return 1; }
	cli_run stop || return 1
	for p in $pids; do ! alive "$p" || { echo "server $p still runs after stop"; return 1; }; done
	[ ! -e "$d" ] && [ ! -e "$parent/current" ] || { echo "files left after stop"; return 1; }
}
check "command: start, kubectl, stop" t_command

# cli_fail WANT ARGS...: exit 1, one line on stderr containing WANT, nothing left.
cli_fail() {
	local want="$1" rc=0
	shift
	cli_run start "$@" >"$work/stdout" 2>"$work/err" || rc=$?
	[ "$rc" = 1 ] || { echo "exit $rc, want 1"; return 1; }
	[ "$(wc -l <"$work/err")" = 1 ] || { echo "not one line:"; cat "$work/err"; return 1; }
	grep -qF -- "$want" "$work/err" || { echo "no \"$want\" in:"; cat "$work/err"; return 1; }
	[ ! -s "$work/stdout" ] || { echo "printed on stdout:"; cat "$work/stdout"; return 1; }
	nothing_left
}
t_cli_missing() { cli_fail "no executable etcd in /nonexistent" --assets /nonexistent; }
check "command: missing binary" t_cli_missing
t_cli_port() {
	local holder port rc=0
	hold_port
	cli_fail "127.0.0.1:$port, kube-apiserver's port, is in use" --api-port "$port" || rc=1
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	return $rc
}
check "command: port in use" t_cli_port
t_cli_crd() { cli_fail "NamesAccepted is False" --crd-timeout 10s tests/envtest/crd-conflict.yaml; }
check "command: CRD not Established" t_cli_crd
# assets: the build script beside the program (here hack/, installed share/ckube/)
# answers with the cache directory; run as the caller, whose cache it is.
t_cli_assets() {
	local out
	out=$("$cli" assets) || return 1
	[ "$(tail -n 1 <<<"$out")" = "$src" ] || { echo "assets printed: $out, want $src"; return 1; }
	"$cli" start -h >/dev/null || { echo "start -h did not exit 0"; return 1; }
	local rc=0
	"$cli" bogus 2>/dev/null || rc=$?
	[ "$rc" = 2 ] || { echo "an unknown command exited $rc, want 2"; return 1; }
}
[ -z "${CKUBE_ENVTEST_ASSETS:-}" ] && check "command: assets, usage" t_cli_assets
# ---- a controller on it: sample-controller (tests/envtest/sample_controller.sh).
. "$root/tests/envtest/sample_controller.sh"
check "sample-controller: Foo -> Deployment, scale, recreate, delete" t_sample_controller
# ---- the examples' envtest-based tests (examples/<name>/envtest_test.c: a
# controller on a manager against envtest), from the example's directory.
for pair in ${EXAMPLE_ENVTESTS:-}; do
	case_run "example ${pair%%=*}" sh -c 'cd "$1" && exec "$2"' sh "examples/${pair%%=*}" "${pair#*=}"
done

t_all_gone() { nothing_left; }
check "nothing left in $parent" t_all_gone

# ---- shard selectors (KEP-5866): the hash and ranges agree with the server's, with
# ShardedListAndWatch on; the informers give the same subset with it off
# (tests/envtest/shard_test.c). Its figures are printed.
if [ -n "${SHARD_TEST:-}" ]; then
	for gate in on off; do
		case_run "shard selectors, gate $gate" "$SHARD_TEST" "$gate" "$parent" deploy/crd.yaml
		grep -E '^(configmaps|foos|gate|informer|[0-9]+ for)' "$work/out" | sed 's/^/        /'
	done
fi

# ---- sharding (<ckube/sharding.h>): three replicas split 16 buckets on Leases;
# join, the boundaries moved twice as namespaces appear (balance, economy, no
# overlap), stop (handover) and kill (expiry), with their times printed
# (tests/envtest/sharding_test.c).
if [ -n "${SHARDING_TEST:-}" ]; then
	case_run "sharding: 3 replicas, join/balance/move/stop/kill" "$SHARDING_TEST" "$parent"
	grep -E '^(join|balance|move|stop|kill|rejoin|overlap)' "$work/out" | sed 's/^/        /'
fi

# ---- sample-controller sharded over N active replicas (--shards-by=namespace), gate
# on and off, through kill -9, SIGTERM, scaling and an API server restart, with the
# overlap oracle; and the oracle's own failure when handovers skip the drain
# (tests/envtest/sharded.sh). Its figures are printed.
. "$root/tests/envtest/sharded.sh"
for t in on off joins unsafe; do
	check "sharded sample-controller ($t)" "t_sharded_$t"
	grep -E '^sharded' "$work/out" | sed 's/^/        /'
done

echo "envtest: start (deploy/crd.yaml, until the CRD is served): ${times[*]}; stop: ${stops[*]}"
echo "envtest: $passed passed, $failed failed"
[ "$failed" = 0 ]
