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

# ---- bad input, through the library.
case_run "missing binary" "$test_bin" fail "$parent" \
	"no executable etcd in /nonexistent (the assets directory given); run \`ckube-envtest assets\`" \
	--assets /nonexistent
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -c 'import socket,sys,time
s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(120)' "$port" &
holder=$!
sleep 0.3
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
t0=$SECONDS
as_user "$test_bin" crash "$parent" >"$work/crash" 2>&1 &
crasher=$!
for _ in $(seq 100); do grep -q '^pid' "$work/crash" 2>/dev/null && [ "$(grep -c '^pid' "$work/crash")" = 2 ] && break; sleep 0.1; done
crash_dir=$(awk '/^dir/ { print $2 }' "$work/crash")
crash_pids=$(awk '/^pid/ { print $2 }' "$work/crash")
# The test process itself, as it said.
kill -9 "$(awk '/^self/ { print $2 }' "$work/crash")"
wait "$crasher" 2>/dev/null
(
	set -e
	[ -n "$crash_dir" ] && [ -d "$crash_dir" ] || { echo "no directory from the crashed run"; cat "$work/crash"; false; }
	# Their parent-death signal: the servers stop with the test.
	for _ in $(seq 100); do
		left=0
		for p in $crash_pids; do alive "$p" && left=1; done
		[ $left = 0 ] && break
		sleep 0.1
	done
	[ $left = 0 ] || { echo "servers of the killed test still run: $crash_pids"; false; }
	as_user "$test_bin" basic "$parent" deploy/crd.yaml
	[ ! -e "$crash_dir" ] || { echo "the next start did not remove $crash_dir"; false; }
) >"$work/out" 2>&1 && ok "crash: cleaned by the next start ($((SECONDS - t0))s)" || bad "crash: cleaned by the next start"

# A directory whose owner died while its servers run (they outlived it: detached,
# or the signal was lost): the next start stops them, by PID, and removes it.
t0=$SECONDS
(
	set -e
	as_user env CKUBE_ENVTEST_STATE_DIR="$parent" "$cli" start >/dev/null
	d=$(cat "$parent/current")
	pids=$(awk '$1 != "owner" { print $2 }' "$d/pids")
	# An owner that is gone: a finished process's PID.
	sh -c 'exit 0' &
	dead=$!
	wait $dead
	sed -i "s/^owner .*/owner $dead 1/" "$d/pids"
	as_user "$test_bin" basic "$parent" deploy/crd.yaml
	[ ! -e "$d" ] || { echo "$d is still there"; false; }
	for p in $pids; do ! alive "$p" || { echo "server $p of $d still runs"; false; }; done
	rm -f "$parent/current"
) >"$work/out" 2>&1 && ok "stale: servers of a dead owner stopped ($((SECONDS - t0))s)" ||
	bad "stale: servers of a dead owner stopped"

# ---- the command.
state="$parent"
cli_run() { as_user env CKUBE_ENVTEST_STATE_DIR="$state" "$cli" "$@"; }
t0=$SECONDS
(
	set -e
	out=$(cli_run start deploy/crd.yaml 2>"$work/err") || { cat "$work/err"; false; }
	[[ "$out" =~ ^export\ KUBECONFIG=$parent/ckube-envtest\.[A-Za-z0-9]+/kubeconfig$ ]] ||
		{ echo "start printed: $out"; false; }
	d=$(cat "$parent/current")
	pids=$(awk '$1 != "owner" { print $2 }' "$d/pids")
	for p in $pids; do alive "$p" || { echo "server $p not running after start returned"; false; }; done
	# The kubeconfig works for kubectl, and the CRD is there.
	as_user env KUBECONFIG="${out#export KUBECONFIG=}" kubectl get foos -A >/dev/null ||
		{ echo "kubectl get foos failed"; false; }
	if cli_run start 2>"$work/err"; then echo "a second start did not refuse"; false; fi
	grep -q "already running" "$work/err" || { cat "$work/err"; false; }
	cli_run stop
	for p in $pids; do ! alive "$p" || { echo "server $p still runs after stop"; false; }; done
	[ ! -e "$d" ] && [ ! -e "$parent/current" ] || { echo "files left after stop"; false; }
) >"$work/out" 2>&1 && ok "command: start, kubectl, stop ($((SECONDS - t0))s)" || bad "command: start, kubectl, stop"

# cli_fail NAME WANT ARGS...: exit 1, one line on stderr containing WANT, nothing left.
cli_fail() {
	local name="$1" want="$2"
	shift 2
	(
		set -e
		local rc=0
		cli_run start "$@" >"$work/stdout" 2>"$work/err" || rc=$?
		[ "$rc" = 1 ] || { echo "exit $rc, want 1"; false; }
		[ "$(wc -l <"$work/err")" = 1 ] || { echo "not one line:"; cat "$work/err"; false; }
		grep -qF -- "$want" "$work/err" || { echo "no \"$want\" in:"; cat "$work/err"; false; }
		[ ! -s "$work/stdout" ] || { echo "printed on stdout:"; cat "$work/stdout"; false; }
		nothing_left
	) >"$work/out" 2>&1 && ok "command: $name" || bad "command: $name"
}
cli_fail "missing binary" "no executable etcd in /nonexistent" --assets /nonexistent
python3 -c 'import socket,sys,time
s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(120)' "$port" &
holder=$!
sleep 0.3
cli_fail "port in use" "127.0.0.1:$port, kube-apiserver's port, is in use" --api-port "$port"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
cli_fail "CRD not Established" "NamesAccepted is False" --crd-timeout 10s tests/envtest/crd-conflict.yaml
rm -f "$parent/current"

echo "envtest: start (deploy/crd.yaml, until the CRD is served): ${times[*]}; stop: ${stops[*]}"
echo "envtest: $passed passed, $failed failed"
[ "$failed" = 0 ]
