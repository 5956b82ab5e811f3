# bench/lib.sh: what the benchmarks share, sourced by each that needs it
# (bench_controller, bench_scale, bench_sharded, bench_streaming, bench_cache,
# bench_record, bench_node). Figures come from
# /proc and from the API server's own metrics, never from the program measured.
#
# The caller sets, where it uses them: CLK_TCK is set here; KUBECONFIG; SC_BIN,
# GO_SC_BIN, CR_SC_BIN, RS_SC_BIN, QPS and BURST for start_ctl (QPS and BURST for
# ctl_flags); CHUNK for gen_foos; ENVTEST and CKUBE_ENVTEST_STATE_DIR for envtest_up.

CLK_TCK=$(getconf CLK_TCK)

# bench_cc OUT MAIN.c MODULE...: a benchmark program built -O2 from the library's
# sources (pkg/base and pkg/log always, then pkg/MODULE/*.c), so that it may call
# internal functions. One place for the flags and libraries: a module's new
# dependency (GnuTLS for pkg/base's x509) once broke two of these copies unseen.
bench_cc() {
	local out=$1 main=$2 m srcs=()
	shift 2
	for m in base log "$@"; do srcs+=(pkg/"$m"/*.c); done
	# shellcheck disable=SC2046
	cc -O2 -g -std=c11 -D_GNU_SOURCE -DCSC_VERSION=\"bench\" -Wall -Wextra -Wno-unused-parameter \
		-Iinclude -I. "$main" "${srcs[@]}" $(pkg-config --cflags libcurl yajl yaml-0.1 gnutls) \
		$(pkg-config --libs libcurl yajl yaml-0.1 gnutls) -lev -pthread -lm -o "$out"
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; } # seconds since $1 (a now)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
until_ok() { # until_ok SECONDS COMMAND...: 0 once COMMAND succeeds, 1 when the time is up
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.5
	done
}

# CPU ticks (utime + stime) of a process; the comm field may hold spaces, so cut
# everything up to the last ") " first: utime and stime are then fields 12 and 13.
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
ticks_to_s() { awk -v t="$1" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }'; }
status_mib() { awk -v k="$2:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; } # PID FIELD
pss_mib() { awk '$1 == "Pss:" { printf "%.1f", $2 / 1024 }' "/proc/$1/smaps_rollup"; }

# new_ns PREFIX: creates a namespace PREFIX-<8 random hex> and prints its name once its
# default ServiceAccount exists (pods need it). The same as tests/e2e/lib.sh's new_ns,
# which bench_apf.sh sources instead of this file.
new_ns() {
	local n
	n="$1-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	kubectl create namespace "$n" >/dev/null
	until_ok 60 kubectl -n "$n" get serviceaccount default >/dev/null 2>&1
	echo "$n"
}
# gen_foos FROM TO DIR [PREFIX [CHUNK]]: files of CHUNK ($CHUNK) Foos each, named
# PREFIX (foo-) FROM .. TO, each with a Deployment of the same name.
gen_foos() {
	awk -v from="$1" -v to="$2" -v dir="$3" -v prefix="${4:-foo-}" -v chunk="${5:-$CHUNK}" 'BEGIN {
		for (i = from; i <= to; i++) {
			f = sprintf("%s/foos-%06d.yaml", dir, int((i - from) / chunk))
			printf "---\napiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n" \
				"metadata:\n  name: %s%05d\nspec:\n  deploymentName: %s%05d\n" \
				"  replicas: 1\n", prefix, i, prefix, i > f
		}
	}'
}

# Foo writes (create/update/patch/delete, any subresource) the API server has
# served since it started, from its own metrics. Cluster-wide.
foo_writes() {
	kubectl get --raw /metrics 2>/dev/null | awk '
		/^apiserver_request_total\{/ && /resource="foos"/ && /verb="(POST|PUT|PATCH|DELETE)"/ { n += $NF }
		END { printf "%d", n }'
}

# envtest_up [ckube-envtest start flags...]: etcd + kube-apiserver of our own, with
# deploy/crd.yaml, exporting KUBECONFIG and setting apiserver_pid. The caller's EXIT
# trap runs "$ENVTEST" stop.
envtest_up() {
	local out
	out=$("$ENVTEST" start "$@" deploy/crd.yaml) || return 1
	export KUBECONFIG="${out#export KUBECONFIG=}"
	apiserver_pid=$(awk '$1 == "kube-apiserver" { p = $2 } END { print p }' \
		"$(cat "$CKUBE_ENVTEST_STATE_DIR/current")/pids" 2>/dev/null)
	kill -0 "$apiserver_pid" 2>/dev/null || { echo "no kube-apiserver pid in the envtest state" >&2; return 1; }
}
# proxy_up: a kubectl proxy for plain-HTTP scripts, setting proxy (its PID) and
# PROXY (its URL).
proxy_up() {
	local port
	port=$(free_port)
	kubectl proxy --port="$port" >/dev/null 2>&1 &
	proxy=$!
	PROXY="http://127.0.0.1:$port"
	until_ok 20 curl -sf -o /dev/null "$PROXY/readyz"
}

# ctl_flags IMPL NS: the flags every benchmark gives controller IMPL (c, go, cr or rs),
# one per line, besides where its API server is (--kubeconfig on the host; in a pod,
# bench_node.sh, the in-cluster configuration): only namespace NS, client-side
# QPS/BURST; the C daemon's metrics and health-probe servers off, as the peers serve
# neither (the Go original has none, controller-runtime's are off in the peer's code,
# kube-rs has none). Leader election is off in all (the C daemon's default; the peers
# have none). Two dashes: Go's flag package and the kube-rs peer take one or two.
ctl_flags() {
	printf '%s\n' --namespace "$2" --kube-api-qps "$QPS" --kube-api-burst "$BURST"
	[ "$1" != c ] || printf '%s\n' --metrics-bind-address=0 --health-probe-bind-address=0
}
# start_ctl IMPL NS LOG [more flags of the C daemon]: one controller (c, go, cr or
# rs) on namespace NS with ctl_flags, its output in LOG, its PID in ctl_pid. CTL_ENV
# holds environment assignments for it (KUBE_FEATURE_WatchListClient=false).
start_ctl() {
	local impl="$1" n="$2" log="$3" bin flags
	shift 3
	case "$impl" in
	c) bin="$SC_BIN" ;;
	go) bin="$GO_SC_BIN" ;;
	cr) bin="$CR_SC_BIN" ;;
	rs) bin="$RS_SC_BIN" ;;
	esac
	mapfile -t flags < <(ctl_flags "$impl" "$n")
	[ "$impl" = c ] || set -- # the extra flags are the C daemon's
	# shellcheck disable=SC2086
	env ${CTL_ENV:-} "$bin" --kubeconfig "$KUBECONFIG" "${flags[@]}" "$@" >"$log" 2>&1 &
	ctl_pid=$!
}
# stop_ctl: SIGTERM, up to 60 s for a clean exit, then SIGKILL.
stop_ctl() {
	local i
	[ -n "${ctl_pid:-}" ] || return 0
	kill -TERM "$ctl_pid" 2>/dev/null || true
	for i in $(seq 1 120); do
		kill -0 "$ctl_pid" 2>/dev/null || break
		sleep 0.5
	done
	kill -KILL "$ctl_pid" 2>/dev/null || true
	wait "$ctl_pid" 2>/dev/null || true
	ctl_pid=""
}
# wait_started LOG SECONDS: 0 once LOG says "Started workers" (every controller
# prints it once its caches are synced); 1 if ctl_pid exited or the time ran out.
wait_started() {
	local deadline=$((SECONDS + $2))
	until grep -q "Started workers" "$1" 2>/dev/null; do
		kill -0 "$ctl_pid" 2>/dev/null && [ $SECONDS -lt $deadline ] || return 1
		sleep 0.1
	done
}
