#!/usr/bin/env bash
# Benchmark of the sample-controller daemon on the real local control plane, side by
# side with its peers under the same workload: Kubernetes' Go original and the same
# controller written with controller-runtime (Go) and with kube-rs (Rust), from
# bench/peers/. Prints figures; asserts nothing about speed.
#
#   bash bench/bench_controller.sh [c|go|cr|rs|both ...]   (default: c go cr rs)
#
#   c    the C daemon (bin/sample-controller)
#   go   Kubernetes' Go original, k8s.io/sample-controller (bench/build_go_controller.sh)
#   cr   the controller-runtime peer (bench/build_cr_controller.sh)
#   rs   the kube-rs peer (bench/build_rs_controller.sh)
#   both c and go
# They run one after the other in the order given, and the table has their columns
# in that order.
#
# Per controller, in a namespace of its own that it alone watches:
#   - idle RSS once its caches are synced (empty namespace);
#   - for each count in BENCH_COUNTS, Foos (1 replica each) are created on top of the
#     previous ones with `kubectl create -f` on multi-document files; the time from the
#     first create until every Foo reports status.availableReplicas == spec.replicas
#     (all the controllers maintain it; the C one's Ready=True condition is timed
#     too), then the RSS once all are ready;
#   - CPU seconds (utime+stime from /proc/<pid>/stat) over a steady window with
#     resyncs at the last count, and the Foo writes the API server counted in that
#     window. Every Foo is synced again every 30 s: by the informers' 30 s resync
#     period (C, Go, controller-runtime), by a 30 s requeue after each sync for
#     kube-rs, whose watchers have no resync.
#   - reaction latency at the last count, under its load: from a Foo's ADDED event to
#     its Deployment's ADDED event, both seen by one watcher (bench/reaction.py) and
#     timestamped locally: BENCH_SINGLES Foos created one at a time, 1.5 s apart, then
#     a burst of BENCH_BURST_FOOS Foos in one `kubectl create`;
#   - a restart with every object present: the controller is stopped and a fresh
#     process started in the same namespace; time to "Started workers" and its peak
#     RSS (VmHWM) through the initial list, the figure that decides a memory limit.
#   - reaction during a restart: the controller stopped, BENCH_BACKLOG Foos are
#     created (each needs its Deployment: work for every one), a fresh process is
#     started and one new Foo created 1 s later: that Foo's reaction latency (a
#     priority queue serves it before the re-listed backlog, a FIFO after it), and
#     the time until the backlog is done. The C daemon runs it twice, with its
#     priority queue (the default) and with --priority-queue=false.
# Memory is read three ways: RSS; RssAnon (its heap and stacks: what the process
# itself allocated, without the shared libraries' and binary's pages); PSS from
# smaps_rollup (RSS with shared pages divided among the processes that map them).
# Then it stops the controller, deletes the namespace and waits until it is gone
# before the next one starts: no two run at the same time.
#
# The last column divides the C daemon's figure by the best (lowest) peer's: below 1
# the C daemon uses less. Data files and plots (gnuplot, installed from Debian when
# missing) of RSS against Foos and of reaction latency go to BENCH_OUT.
#
# Environment:
#   BENCH_QUICK=1            1,000 Foos and a 60 s window (what `make bench` runs)
#   BENCH_COUNTS             cumulative Foo counts (default "1000 10000"; quick "1000")
#   BENCH_STEADY_SECONDS     steady window (default 600; quick 60)
#   BENCH_QPS, BENCH_BURST   client-side limits of every controller (200, 400;
#                            kube-rs has no limiter of its own: the peer adds one)
#   BENCH_CHUNK              Foos per kubectl file (500)
#   BENCH_PARALLEL           kubectl processes creating at once (2)
#   BENCH_SETTLE             seconds between "all ready" and reading RSS (15)
#   BENCH_READY_TIMEOUT      seconds allowed per count for all to be ready (2400)
#   SC_BIN                   the C daemon (default bin/sample-controller; run make)
#   GO_SC_BIN                the Go original (default: bench/build_go_controller.sh)
#   CR_SC_BIN                the controller-runtime peer (default: bench/build_cr_controller.sh)
#   RS_SC_BIN                the kube-rs peer (default: bench/build_rs_controller.sh)
#   BENCH_SINGLES            Foos created one at a time for reaction latency (20)
#   BENCH_BURST_FOOS         Foos in the burst for reaction latency (100)
#   BENCH_BACKLOG            Foos created while stopped, for the reaction during a
#                            restart (default: the last count)
#   BENCH_LOGS               controller logs (default .local/bench-logs)
#   BENCH_OUT                data files and PNG plots (default build/bench-out)
# Needs the local control plane (bash hack/local-up.sh); bench/run.sh starts it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

[ $# -gt 0 ] || set -- c go cr rs
impls=()
for arg in "$@"; do
	case "$arg" in
	c | go | cr | rs) new=("$arg") ;;
	both) new=(c go) ;;
	*)
		echo "usage: $0 [c|go|cr|rs|both ...]   (default: c go cr rs)" >&2
		exit 2
		;;
	esac
	for impl in "${new[@]}"; do
		[[ " ${impls[*]} " == *" $impl "* ]] || impls+=("$impl")
	done
done
declare -A NAME=([c]=C [go]=Go [cr]=controller-rt [rs]=kube-rs)

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	COUNTS="${BENCH_COUNTS:-1000}"
	STEADY="${BENCH_STEADY_SECONDS:-60}"
else
	COUNTS="${BENCH_COUNTS:-1000 10000}"
	STEADY="${BENCH_STEADY_SECONDS:-600}"
fi
QPS="${BENCH_QPS:-200}"
BURST="${BENCH_BURST:-400}"
CHUNK="${BENCH_CHUNK:-500}"
PARALLEL="${BENCH_PARALLEL:-2}"
SETTLE="${BENCH_SETTLE:-15}"
READY_TIMEOUT="${BENCH_READY_TIMEOUT:-2400}"
LOGS="${BENCH_LOGS:-$root/.local/bench-logs}"
OUT="${BENCH_OUT:-$root/build/bench-out}"
SINGLES="${BENCH_SINGLES:-20}"
BURST_FOOS="${BENCH_BURST_FOOS:-100}"
BACKLOG="${BENCH_BACKLOG:-${COUNTS##* }}"
SC_BIN="${SC_BIN:-$root/bin/sample-controller}"
last_count="${COUNTS##* }"

[ -f .local/env ] || { echo "bench: no local control plane (.local/env); run bash hack/local-up.sh" >&2; exit 1; }
# shellcheck source=/dev/null
. .local/env
export KUBECONFIG="$LOCAL_KUBECONFIG"
kubectl get --raw /readyz >/dev/null 2>&1 || { echo "bench: the local API server is not ready" >&2; exit 1; }

for impl in "${impls[@]}"; do
	if [ "$impl" = c ] && [ ! -x "$SC_BIN" ]; then
		echo "bench: $SC_BIN is missing; run make" >&2
		exit 1
	fi
done
if [[ " ${impls[*]} " == *" go "* ]] && [ -z "${GO_SC_BIN:-}" ]; then
	GO_SC_BIN="$(bash bench/build_go_controller.sh | tail -n 1)"
fi
if [[ " ${impls[*]} " == *" cr "* ]] && [ -z "${CR_SC_BIN:-}" ]; then
	CR_SC_BIN="$(bash bench/build_cr_controller.sh | tail -n 1)"
fi
if [[ " ${impls[*]} " == *" rs "* ]] && [ -z "${RS_SC_BIN:-}" ]; then
	RS_SC_BIN="$(bash bench/build_rs_controller.sh | tail -n 1)"
fi

mkdir -p "$LOGS" "$OUT"
# The repository as it was when the run started (others may commit meanwhile).
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
work="$(mktemp -d)"
ctl_pid="" ns="" rr_proxy="" rr_waiter=""

cleanup() {
	local p
	for p in $rr_proxy $rr_waiter; do kill "$p" 2>/dev/null || true; done
	if [ -n "$ctl_pid" ] && kill -0 "$ctl_pid" 2>/dev/null; then
		kill -TERM "$ctl_pid" 2>/dev/null || true
		sleep 2
		kill -KILL "$ctl_pid" 2>/dev/null || true
	fi
	if [ -n "$ns" ]; then
		kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
# mem KEY: RSS, RssAnon and PSS (MiB) of the controller into R[impl,KEY], R[impl,KEYanon],
# R[impl,KEYpss].
mem() {
	R[$impl,$1]=$(status_mib "$ctl_pid" VmRSS)
	R[$impl,${1}anon]=$(status_mib "$ctl_pid" RssAnon)
	R[$impl,${1}pss]=$(pss_mib "$ctl_pid")
}
mem_text() { echo "${R[$impl,$1]} MiB (anon ${R[$impl,${1}anon]}, PSS ${R[$impl,${1}pss]})"; }
# reaction KEY PREFIX COUNT single|burst: reaction latency of COUNT new Foos named
# PREFIX*, created one at a time 1.5 s apart or in one kubectl call, into
# R[impl,KEYp50], KEYp99, KEYmax (ms).
reaction() {
	local key="$1" prefix="$2" count="$3" mode="$4" i out files
	rm -f "$work"/foos-*.yaml "$work/react.out"
	python3 bench/reaction.py "$ns" "$prefix" "$count" 300 >"$work/react.out" &
	local watcher=$!
	for i in $(seq 1 120); do
		grep -q watching "$work/react.out" 2>/dev/null && break
		sleep 0.25
	done
	if [ "$mode" = single ]; then
		gen_foos 1 "$count" "$work" "$prefix" 1
		for f in $(find "$work" -name 'foos-*.yaml' | sort); do
			kubectl -n "$ns" create -f "$f" >/dev/null || echo "bench: kubectl create failed" >&2
			sleep 1.5
		done
	else
		gen_foos 1 "$count" "$work" "$prefix" "$count"
		kubectl -n "$ns" create -f "$work/foos-000000.yaml" >/dev/null || echo "bench: kubectl create failed" >&2
	fi
	wait "$watcher" || true
	out=$(tail -n 1 "$work/react.out")
	for i in p50 p99 max; do
		R[$impl,$key$i]=$(sed -n "s/.*$i=\([0-9]*\).*/\1/p" <<<"$out")
	done
	say "[$impl] reaction latency, $count Foos ($mode): $out"
}

declare -A R # R[impl,figure] = value


# restart_reaction LOG: the reaction to a new Foo while a restarted controller
# works through BACKLOG Foos created while it was stopped, into R[impl,rr<variant>]
# (ms) and R[impl,rrdone<variant>] (s until every Foo has its Deployment).
restart_reaction() {
	local log="$1" variants=(prio) v port total t0 watcher out i
	[ "$impl" = c ] && variants=(prio fifo)
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	kubectl proxy --port="$port" >/dev/null 2>&1 &
	rr_proxy=$!
	for i in $(seq 1 40); do curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.25; done
	for v in "${variants[@]}"; do
		[ -z "$ctl_pid" ] || stop_ctl
		python3 bench/mkfoos.py "http://127.0.0.1:$port" "$ns" - "$BACKLOG" 16 "bl$v-" >/dev/null ||
			echo "bench: creating the backlog failed" >&2
		total=$(($(kubectl -n "$ns" get foos --no-headers 2>/dev/null | wc -l) + 1))
		python3 bench/reaction.py "$ns" "new$v-" 1 600 >"$work/react.out" &
		watcher=$!
		for i in $(seq 1 120); do
			grep -q watching "$work/react.out" 2>/dev/null && break
			sleep 0.25
		done
		t0=$(now)
		python3 bench/wait_ready.py "$ns" "$total" "$t0" 600 --owned >"$work/rr.out" &
		rr_waiter=$!
		if [ "$v" = fifo ]; then
			start_ctl "$impl" "$ns" "$log.rr-$v" --priority-queue=false
		else
			start_ctl "$impl" "$ns" "$log.rr-$v"
		fi
		sleep 1
		rm -f "$work"/foos-*.yaml
		gen_foos 1 1 "$work" "new$v-" 1
		kubectl -n "$ns" create -f "$work/foos-000000.yaml" >/dev/null || echo "bench: kubectl create failed" >&2
		wait "$watcher" || true
		out=$(tail -n 1 "$work/react.out")
		R[$impl,rr$v]=$(sed -n 's/.*max=\([0-9]*\).*/\1/p' <<<"$out")
		wait "$rr_waiter" || true
		rr_waiter=""
		R[$impl,rrdone$v]=$(sed -n 's/.*owned=\([0-9.]*\).*/\1/p' "$work/rr.out")
		say "[$impl] restart with $BACKLOG Foos to work on ($v): a new Foo reacted to in $out;" \
			"all $total done after ${R[$impl,rrdone$v]:-?}s"
	done
	kill "$rr_proxy" 2>/dev/null
	wait "$rr_proxy" 2>/dev/null || true
	rr_proxy=""
}

run_impl() {
	local impl="$1" log t0 i n prev=0 out avail cond c0 c1 w0 w1 files
	ns="$(new_ns "bench-$impl")"
	log="$LOGS/$impl.log"
	say "[$impl] namespace $ns; log $log"

	t0=$(now)
	start_ctl "$impl" "$ns" "$log"
	for i in $(seq 1 240); do
		grep -q "Started workers" "$log" 2>/dev/null && break
		kill -0 "$ctl_pid" 2>/dev/null || { echo "bench: the $impl controller exited:" >&2; tail -n 20 "$log" >&2; return 1; }
		sleep 0.25
	done
	grep -q "Started workers" "$log" || { echo "bench: the $impl controller did not start workers" >&2; return 1; }
	R[$impl,start]=$(elapsed "$t0")
	sleep "$SETTLE"
	mem idle
	say "[$impl] synced in ${R[$impl,start]}s; idle RSS $(mem_text idle)"

	for n in $COUNTS; do
		rm -f "$work"/foos-*.yaml
		gen_foos $((prev + 1)) "$n" "$work"
		files=$(find "$work" -name 'foos-*.yaml' | sort)
		say "[$impl] creating foo-$((prev + 1)) .. foo-$n ($(echo "$files" | wc -l) files, $PARALLEL at once)"
		c0=$(cpu_ticks "$ctl_pid")
		t0=$(now)
		python3 bench/wait_ready.py "$ns" "$n" "$t0" "$READY_TIMEOUT" \
			$([ "$impl" = c ] && echo --condition) >"$work/ready.out" &
		local watcher=$!
		if ! echo "$files" | xargs -P "$PARALLEL" -n 1 kubectl -n "$ns" create -o name -f >/dev/null; then
			echo "bench: kubectl create failed" >&2
		fi
		R[$impl,create$n]=$(elapsed "$t0")
		wait "$watcher" || true
		out=$(cat "$work/ready.out")
		c1=$(cpu_ticks "$ctl_pid")
		avail=$(sed -n 's/.*avail=\([^ ]*\).*/\1/p' <<<"$out")
		cond=$(sed -n 's/.*cond=\([^ ]*\).*/\1/p' <<<"$out")
		R[$impl,ready$n]="$avail"
		R[$impl,cond$n]="${cond:-n/a}"
		R[$impl,loadcpu$n]=$(ticks_to_s $((c1 - c0)))
		say "[$impl] $n Foos: created in ${R[$impl,create$n]}s; all available after ${avail}s" \
			"(Ready=True: ${cond:-n/a}); controller CPU while loading ${R[$impl,loadcpu$n]}s"
		sleep "$SETTLE"
		mem "rss$n"
		say "[$impl] RSS at $n Foos: $(mem_text "rss$n")"
		prev=$n
	done

	say "[$impl] steady window: ${STEADY}s at $last_count Foos"
	w0=$(foo_writes)
	c0=$(cpu_ticks "$ctl_pid")
	sleep "$STEADY"
	c1=$(cpu_ticks "$ctl_pid")
	w1=$(foo_writes)
	R[$impl,steadycpu]=$(ticks_to_s $((c1 - c0)))
	R[$impl,steadywrites]=$((w1 - w0))
	R[$impl,steadyrss]=$(status_mib "$ctl_pid" VmRSS)
	R[$impl,hwm]=$(status_mib "$ctl_pid" VmHWM)
	say "[$impl] steady: ${R[$impl,steadycpu]} CPU s, ${R[$impl,steadywrites]} Foo writes, RSS ${R[$impl,steadyrss]} MiB, peak ${R[$impl,hwm]} MiB"

	reaction single lat-s- "$SINGLES" single
	reaction burst lat-b- "$BURST_FOOS" burst

	# A fresh process with every object already there: the initial list's peak.
	stop_ctl
	t0=$(now)
	start_ctl "$impl" "$ns" "$log.restart"
	for i in $(seq 1 1200); do
		grep -q "Started workers" "$log.restart" 2>/dev/null && break
		kill -0 "$ctl_pid" 2>/dev/null || break
		sleep 0.1
	done
	R[$impl,restartsync]=$(elapsed "$t0")
	sleep "$SETTLE"
	# A process that exited has no /proc to read: say why and leave its figures empty.
	if ! grep -q "Started workers" "$log.restart" || ! kill -0 "$ctl_pid" 2>/dev/null; then
		R[$impl,restartsync]="failed"
		echo "bench: the $impl controller did not come back after the restart:" >&2
		tail -n 20 "$log.restart" >&2
	else
		R[$impl,restarthwm]=$(status_mib "$ctl_pid" VmHWM)
		mem restart
		say "[$impl] restart with $((last_count + SINGLES + BURST_FOOS)) Foos present: synced in ${R[$impl,restartsync]}s;" \
			"peak RSS ${R[$impl,restarthwm]} MiB; then $(mem_text restart)"
	fi

	restart_reaction "$log"

	stop_ctl
	t0=$(now)
	kubectl delete namespace "$ns" --wait=false >/dev/null
	kubectl wait --for=delete "namespace/$ns" --timeout=1800s >/dev/null 2>&1 ||
		say "[$impl] namespace $ns still terminating after 30 min"
	say "[$impl] namespace deleted in $(elapsed "$t0")s"
	ns=""
}

say "counts: $COUNTS; steady window ${STEADY}s; client qps/burst $QPS/$BURST; $(nproc) cores"
kubectl apply -f deploy/crd.yaml >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/foos.samplecontroller.k8s.io >/dev/null
for impl in "${impls[@]}"; do
	run_impl "$impl"
done

# ---- Figures.
# version_of BINARY PREFIX: the rest of the line starting "PREFIX " in the VERSION
# file the build scripts write next to the binary ("?" without one).
version_of() {
	local f
	f="$(dirname "$1")/VERSION"
	[ -f "$f" ] && awk -v p="$2 " 'index($0, p) == 1 { print substr($0, length(p) + 1); exit }' "$f" | grep . ||
		echo "?"
}
echo
echo "sample-controller benchmark ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, Kubernetes $KUBE_VERSION)"
for impl in "${impls[@]}"; do
	case "$impl" in
	c) echo "  C:  $SC_BIN $("$SC_BIN" --version 2>/dev/null | awk '{print $NF}') (repository at $commit)" ;;
	go)
		echo "  Go: k8s.io/sample-controller $(version_of "$GO_SC_BIN" k8s.io/sample-controller)" \
			"with client-go $(version_of "$GO_SC_BIN" "client libraries" | awk '{print $1}'), $(go version | awk '{print $3}')" \
			"(main.go patched: qps/burst/namespace flags)"
		;;
	cr)
		echo "  controller-rt: sigs.k8s.io/controller-runtime $(version_of "$CR_SC_BIN" sigs.k8s.io/controller-runtime)" \
			"with client-go $(version_of "$CR_SC_BIN" k8s.io/client-go), $(version_of "$CR_SC_BIN" "go version" | awk '{print $1}')" \
			"(bench/peers/controller-runtime)"
		;;
	rs)
		echo "  kube-rs: kube $(version_of "$RS_SC_BIN" kube), k8s-openapi $(version_of "$RS_SC_BIN" k8s-openapi)," \
			"$(version_of "$RS_SC_BIN" rustc | awk '{print "rustc " $1}') (bench/peers/kube-rs; qps/burst: its own token bucket)"
		;;
	esac
done
echo "  all: 2 workers, Foos synced every 30 s, client qps/burst $QPS/$BURST, one namespace each, log level 0"
row() {
	printf '  %-46s' "$1"
	shift
	printf ' %14s' "$@"
	printf '\n'
}
val() { echo "${R[$1,$2]:--}"; }
isnum() { [[ "$1" =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
# ratio FIGURE: the C daemon's figure divided by the lowest peer figure ("-" when
# either is missing or the peer's is 0).
ratio() {
	local impl best="" c v
	c="$(val c "$1")"
	isnum "$c" || { echo "-"; return; }
	for impl in "${impls[@]}"; do
		[ "$impl" = c ] && continue
		v="$(val "$impl" "$1")"
		isnum "$v" || continue
		if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a < b) }'; then best="$v"; fi
	done
	if [ -z "$best" ] || awk -v b="$best" 'BEGIN { exit !(b == 0) }'; then echo "-"; return; fi
	awk -v a="$c" -v b="$best" 'BEGIN { printf "%.2f", a / b }'
}
with_ratio=0
[[ " ${impls[*]} " == *" c "* ]] && [ "${#impls[@]}" -gt 1 ] && with_ratio=1
# fig LABEL FIGURE: one row, the figure of each controller in run order, then C/best.
fig() {
	local label="$1" impl vals=()
	for impl in "${impls[@]}"; do vals+=("$(val "$impl" "$2")"); done
	[ "$with_ratio" = 1 ] && vals+=("$(ratio "$2")")
	row "$label" "${vals[@]}"
}
# figmem LABEL KEY: RSS, then RssAnon and PSS rows.
figmem() {
	fig "$1" "$2"
	fig "  of which anonymous, RssAnon (MiB)" "${2}anon"
	fig "  PSS (MiB)" "${2}pss"
}
names=()
for impl in "${impls[@]}"; do names+=("${NAME[$impl]}"); done
[ "$with_ratio" = 1 ] && names+=("C/best peer")
row "figure" "${names[@]}"
fig "time to caches synced, empty namespace (s)" start
figmem "idle RSS after sync (MiB)" idle
prev=0
for n in $COUNTS; do
	fig "create foo-$((prev + 1))..$n with kubectl (s)" "create$n"
	fig "  until all $n available (s, control-plane bound)" "ready$n"
	# Only the C daemon sets a Ready condition; the others' runs record n/a.
	fig "  until all $n Ready=True (s)" "cond$n"
	fig "  controller CPU while loading (s)" "loadcpu$n"
	figmem "RSS at $n Foos + Deployments (MiB)" "rss$n"
	prev=$n
done
fig "CPU over ${STEADY}s steady at $last_count Foos (s)" steadycpu
fig "  Foo writes in that window (cluster-wide)" steadywrites
fig "  RSS at the end of the window (MiB)" steadyrss
fig "peak RSS, VmHWM (MiB)" hwm
fig "reaction, $SINGLES single Foos at $last_count: p50 (ms)" singlep50
fig "  p99 (ms)" singlep99
fig "  max (ms)" singlemax
fig "reaction, burst of $BURST_FOOS Foos: p50 (ms)" burstp50
fig "  p99 (ms)" burstp99
fig "  max (ms)" burstmax
present=$((last_count + SINGLES + BURST_FOOS))
fig "restart, $present Foos present: to synced (s)" restartsync
fig "  peak RSS through the initial list (MiB)" restarthwm
figmem "  RSS after it settled (MiB)" restart
fig "restart with $BACKLOG Foos to work on: a new Foo's reaction (ms)" rrprio
fig "  C with --priority-queue=false (ms)" rrfifo
fig "  until all done (s)" rrdoneprio
fig "  C with --priority-queue=false (s)" rrdonefifo

# ---- Data files and plots.
{
	echo "# controller foos rss_mib rssanon_mib pss_mib   (bench/bench_controller.sh, $commit)"
	for impl in "${impls[@]}"; do
		echo "${NAME[$impl]} 0 $(val "$impl" idle) $(val "$impl" idleanon) $(val "$impl" idlepss)"
		for n in $COUNTS; do
			echo "${NAME[$impl]} $n $(val "$impl" "rss$n") $(val "$impl" "rss${n}anon") $(val "$impl" "rss${n}pss")"
		done
	done
} >"$OUT/rss.dat"
{
	echo "# controller single_p50 single_p99 burst_p50 burst_p99 (ms)   (bench/bench_controller.sh, $commit)"
	for impl in "${impls[@]}"; do
		echo "${NAME[$impl]} $(val "$impl" singlep50) $(val "$impl" singlep99) $(val "$impl" burstp50) $(val "$impl" burstp99)"
	done
} >"$OUT/latency.dat"
if ! command -v gnuplot >/dev/null; then
	say "installing gnuplot-nox from Debian for the plots"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 ||
		say "could not install gnuplot-nox: no plots (data files are in $OUT)"
fi
if command -v gnuplot >/dev/null; then
	stamp="$(date -u +%Y-%m-%d), commit $commit, $(nproc) cores, Kubernetes $KUBE_VERSION"
	plot_rss=""
	for impl in "${impls[@]}"; do
		nm="${NAME[$impl]}"
		plot_rss+="'$OUT/rss.dat' using (strcol(1) eq '$nm' ? \$2 : NaN):3 with linespoints lw 2 title '$nm RSS', "
		plot_rss+="'$OUT/rss.dat' using (strcol(1) eq '$nm' ? \$2 : NaN):4 with linespoints dt 2 title '$nm RssAnon', "
	done
	gnuplot <<-GP || say "gnuplot failed: no plots"
		set terminal pngcairo size 900,560 noenhanced
		set datafile missing '-'
		set output '$OUT/rss.png'
		set title "Controller memory against Foos (+ their Deployments), one namespace\n$stamp"
		set xlabel 'Foos'
		set ylabel 'MiB'
		set key top left
		set grid
		plot ${plot_rss%, }
		set output '$OUT/latency.png'
		set title "Reaction latency: Foo ADDED to its Deployment ADDED\n$stamp"
		set style data histogram
		set style histogram cluster gap 1
		set style fill solid 0.8 border -1
		set ylabel 'ms'
		set xlabel ''
		set key top left
		set yrange [0:*]
		plot '$OUT/latency.dat' using 2:xtic(1) title 'single p50', '' using 3 title 'single p99', \
		     '' using 4 title 'burst of $BURST_FOOS p50', '' using 5 title 'burst p99'
	GP
	[ -f "$OUT/rss.png" ] && say "plots: $OUT/rss.png $OUT/latency.png"
fi
