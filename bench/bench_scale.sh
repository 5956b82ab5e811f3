#!/usr/bin/env bash
# The sample-controller and its three peers at scale, up to SCALE_STEPS' last count of
# Foos (default "0 1000 10000"; "0 1000 10000 100000" with BENCH_FULL=1), each Foo
# with its Deployment, in one namespace:
#
#   bash bench/bench_scale.sh [c|go|cr|rs ...]   (default: c go cr rs)
#
# The control plane is ckube-envtest's etcd + kube-apiserver (its own, on free ports;
# the local control plane of bench_controller.sh is not touched). No
# controller-manager runs, so a Deployment makes no ReplicaSet and no Pods: at
# 100,000 those would swamp two cores, and nothing becomes available. "Done" is
# when every Foo has its Deployment (wait_ready.py --owned).
#
# Per step (a count of Foos):
#   1. load (the C daemon alone): the Foos up to the count are created
#      (bench/mkfoos.py, 16 threads) while the C daemon runs; the time from the
#      first create until every Foo has its Deployment (bound by the control
#      plane: the daemon's client limit is SCALE_QPS) and until its work queue is
#      empty (workqueue_depth), the daemon's CPU meanwhile, and its RSS, RssAnon
#      and PSS at rest SCALE_SETTLE s later. At the last
#      step also: CPU and Foo writes (the API server's count) over SCALE_STEADY
#      seconds with two informer resyncs, and the reaction latency of a burst of
#      100 Foos created at once (bench/reaction.py).
#   2. fresh start, every controller in turn: a new process with everything present;
#      time until "Started workers" (caches synced), CPU in its first 30 s, and its
#      peak RSS (VmHWM) and RSS/RssAnon/PSS at 30 s. The Go original writes every
#      Foo's status on every sync; what each peer does at start is part of its figure.
# Then, at the last count:
#   3. reaction during a restart: every Deployment is deleted while the controller
#      is stopped (so every Foo needs a write: its Deployment), the controller
#      starts, and SCALE_NEW new Foos are created one at a time 0.5 s apart from
#      1 s after the start; their reaction latencies (p50, max) until SCALE_REACT_TIMEOUT.
#      The C daemon runs it with its priority queue (the default) and with
#      --priority-queue=false; controller-runtime has its own priority queue (v0.23's
#      default); the Go original and kube-rs work in FIFO order.
#   4. streaming against paged initial lists, the API server's side: the C daemon
#      starts with KUBE_FEATURE_WatchListClient=true and =false, twice each,
#      alternately; the kube-apiserver's CPU seconds until the daemon's caches are
#      synced and its peak RSS above its RSS before (VmHWM reset through
#      /proc/PID/clear_refs), and the daemon's own time, CPU and peak.
#
# Prints the tables, writes $OUT/scale.csv (one row per figure) and, with gnuplot,
# $OUT/scale-rss.png (RSS against Foos, log scale) and $OUT/scale-restart.png.
# Asserts nothing about speed; exits non-zero only if a step could not be run.
#
# Environment: SCALE_STEPS, SCALE_QPS (1000) and SCALE_BURST (2000): every
# controller's client limits; SCALE_STEADY (60), SCALE_SETTLE (10), SCALE_NEW (10),
# SCALE_REACT_TIMEOUT (120), SCALE_READY_TIMEOUT (3600), BENCH_OUT; SC_BIN,
# GO_SC_BIN, CR_SC_BIN, RS_SC_BIN as in bench_controller.sh.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

[ $# -gt 0 ] || set -- c go cr rs
impls=("$@")
for impl in "${impls[@]}"; do
	case "$impl" in c | go | cr | rs) ;; *)
		echo "usage: $0 [c|go|cr|rs ...]" >&2
		exit 2
		;;
	esac
done
if [ "${BENCH_FULL:-0}" = 1 ]; then
	STEPS=${SCALE_STEPS:-0 1000 10000 100000}
else
	STEPS=${SCALE_STEPS:-0 1000 10000}
fi
QPS=${SCALE_QPS:-1000}
BURST=${SCALE_BURST:-2000}
STEADY=${SCALE_STEADY:-60}
SETTLE=${SCALE_SETTLE:-10}
NEW=${SCALE_NEW:-10}
REACT_TIMEOUT=${SCALE_REACT_TIMEOUT:-120}
READY_TIMEOUT=${SCALE_READY_TIMEOUT:-3600}
OUT=${BENCH_OUT:-$root/build/bench-out}/scale
SC_BIN=${SC_BIN:-$root/bin/sample-controller}
ENVTEST="$root/bin/ckube-envtest"
NS=scale
last=${STEPS##* }
declare -A NAME=([c]=C [go]=Go [cr]=controller-rt [rs]=kube-rs)

say() { printf '%s bench_scale: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
[ -x "$SC_BIN" ] && [ -x "$ENVTEST" ] || { say "build first (make all)"; exit 1; }
if [[ " ${impls[*]} " == *" go "* ]] && [ -z "${GO_SC_BIN:-}" ]; then
	GO_SC_BIN="$(bash bench/build_go_controller.sh | tail -n 1)" || exit 1
fi
if [[ " ${impls[*]} " == *" cr "* ]] && [ -z "${CR_SC_BIN:-}" ]; then
	CR_SC_BIN="$(bash bench/build_cr_controller.sh | tail -n 1)" || exit 1
fi
if [[ " ${impls[*]} " == *" rs "* ]] && [ -z "${RS_SC_BIN:-}" ]; then
	RS_SC_BIN="$(bash bench/build_rs_controller.sh | tail -n 1)" || exit 1
fi

mkdir -p "$OUT"
rm -rf "$OUT/run"
mkdir -p "$OUT/run/envs"
export CKUBE_ENVTEST_STATE_DIR="$OUT/run/envs"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
ctl_pid="" proxy="" bg=""

cleanup() {
	local p
	for p in $ctl_pid $proxy $bg; do kill -9 "$p" 2>/dev/null; done
	"$ENVTEST" stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# rec KIND IMPL COUNT FIGURE VALUE: one CSV row.
rec() { echo "$1,$2,$3,$4,$5" >>"$OUT/scale.csv"; }
count_of() { # count_of PATH: how many objects PATH lists (a page of one and the count of the rest)
	kubectl get --raw "/apis/$1?limit=1" 2>/dev/null |
		python3 -c 'import json,sys; l=json.load(sys.stdin); print(len(l["items"]) + int(l["metadata"].get("remainingItemCount", 0)))' 2>/dev/null ||
		echo -1
}
# wait_watching FILE: until reaction.py (bg) says it watches; 1 if it exited first.
wait_watching() {
	until grep -q watching "$1" 2>/dev/null; do
		kill -0 "$bg" 2>/dev/null || { say "reaction.py failed: $(cat "$1")"; return 1; }
		sleep 0.2
	done
}

envtest_up || { say "ckube-envtest start failed"; exit 1; }
kubectl create namespace "$NS" >/dev/null || exit 1
proxy_up || { say "kubectl proxy did not start"; exit 1; }
echo "kind,impl,foos,figure,value" >"$OUT/scale.csv"
say "kube-apiserver pid $apiserver_pid; $(nproc) cores; steps: $STEPS; client qps $QPS burst $BURST"

# ---------------------------------------------------------------- 1 and 2, per step
made=0 rc=0
for n in $STEPS; do
	if [ "$n" -gt "$made" ]; then
		log="$OUT/run/load-$n.log"
		mport=$(free_port)
		start_ctl c "$NS" "$log" --metrics-bind-address=127.0.0.1:$mport \
			--health-probe-bind-address=127.0.0.1:$mport --metrics-secure=false
		wait_started "$log" 600 || { say "the C daemon did not start: $(tail -n 3 "$log")"; exit 1; }
		c0=$(cpu_ticks "$ctl_pid")
		t0=$(now)
		python3 bench/wait_ready.py "$NS" "$n" "$t0" "$READY_TIMEOUT" --owned >"$OUT/run/owned.out" &
		bg=$!
		python3 bench/mkfoos.py "$PROXY" "$NS" - $((n - made)) 16 foo- $((made + 1)) >&2 ||
			{ say "creating the Foos failed"; exit 1; }
		created=$(elapsed "$t0")
		wait "$bg" || { say "not every Foo has its Deployment: $(cat "$OUT/run/owned.out")"; rc=1; }
		bg=""
		done_s=$(sed -n 's/.*owned=\([0-9.]*\).*/\1/p' "$OUT/run/owned.out")
		# At rest means an empty work queue: the keys queued at low priority wait
		# behind the load (resyncs, and the Foos whose status a peer's fresh start
		# at the step before rewrote: the Go original PUTs a status of
		# availableReplicas alone, and the daemon writes its conditions back).
		until [ "$(curl -sf --max-time 5 "http://127.0.0.1:$mport/metrics" |
			awk '/^workqueue_depth[{ ]/ { s += $NF; seen = 1 } END { print seen ? s : "none" }')" = 0 ]; do
			[ "$(elapsed "$t0" | cut -d. -f1)" -lt "$READY_TIMEOUT" ] || { say "the work queue never drained"; break; }
			sleep 1
		done
		drained=$(elapsed "$t0")
		loadcpu=$(ticks_to_s $(($(cpu_ticks "$ctl_pid") - c0)))
		sleep "$SETTLE"
		rec load c "$n" created_s "$created"
		rec load c "$n" done_s "${done_s:-}"
		rec load c "$n" drained_s "$drained"
		rec load c "$n" load_cpu_s "$loadcpu"
		rec load c "$n" rss_mib "$(status_mib "$ctl_pid" VmRSS)"
		rec load c "$n" rssanon_mib "$(status_mib "$ctl_pid" RssAnon)"
		rec load c "$n" pss_mib "$(pss_mib "$ctl_pid")"
		rec load c "$n" hwm_mib "$(status_mib "$ctl_pid" VmHWM)"
		say "[c] $n Foos: created in ${created}s, each with its Deployment after ${done_s:-?}s, queue empty after ${drained}s;" \
			"CPU ${loadcpu}s; at rest RSS $(status_mib "$ctl_pid" VmRSS) MiB (anon $(status_mib "$ctl_pid" RssAnon), PSS $(pss_mib "$ctl_pid"))"
		if [ "$n" = "$last" ]; then
			w0=$(foo_writes)
			c0=$(cpu_ticks "$ctl_pid")
			sleep "$STEADY"
			rec steady c "$n" cpu_s "$(ticks_to_s $(($(cpu_ticks "$ctl_pid") - c0)))"
			rec steady c "$n" foo_writes $(($(foo_writes) - w0))
			say "[c] steady ${STEADY}s: CPU $(ticks_to_s $(($(cpu_ticks "$ctl_pid") - c0)))s, $(($(foo_writes) - w0)) Foo writes"
			python3 bench/reaction.py "$NS" burst- 100 300 >"$OUT/run/react.out" &
			bg=$!
			wait_watching "$OUT/run/react.out" || exit 1
			python3 bench/mkfoos.py "$PROXY" "$NS" - 100 16 burst- >/dev/null
			wait "$bg"
			bg=""
			r=$(tail -n 1 "$OUT/run/react.out")
			rec burst c "$n" p50_ms "$(sed -n 's/.*p50=\([0-9]*\).*/\1/p' <<<"$r")"
			rec burst c "$n" max_ms "$(sed -n 's/.*max=\([0-9]*\).*/\1/p' <<<"$r")"
			say "[c] burst of 100 at $n: $r"
		fi
		stop_ctl
		made=$n
	fi
	for impl in "${impls[@]}"; do
		log="$OUT/run/start-$impl-$n.log"
		t0=$(now)
		start_ctl "$impl" "$NS" "$log"
		if ! wait_started "$log" 600; then
			say "[$impl] did not start at $n: $(tail -n 3 "$log")"
			rec start "$impl" "$n" synced_s failed
			stop_ctl
			rc=1
			continue
		fi
		synced=$(elapsed "$t0")
		# (parenthesised: in awk, printf's ">" is a redirection)
		sleep "$(awk -v t="$t0" -v n="$(now)" 'BEGIN { d = t + 30 - n; printf "%.2f", (d > 0 ? d : 0) }')"
		rec start "$impl" "$n" synced_s "$synced"
		rec start "$impl" "$n" cpu30_s "$(ticks_to_s "$(cpu_ticks "$ctl_pid")")"
		rec start "$impl" "$n" hwm_mib "$(status_mib "$ctl_pid" VmHWM)"
		rec start "$impl" "$n" rss_mib "$(status_mib "$ctl_pid" VmRSS)"
		rec start "$impl" "$n" rssanon_mib "$(status_mib "$ctl_pid" RssAnon)"
		rec start "$impl" "$n" pss_mib "$(pss_mib "$ctl_pid")"
		say "[$impl] fresh start at $n: synced ${synced}s, CPU $(ticks_to_s "$(cpu_ticks "$ctl_pid")")s in 30 s," \
			"peak $(status_mib "$ctl_pid" VmHWM) MiB, RSS $(status_mib "$ctl_pid" VmRSS) (anon $(status_mib "$ctl_pid" RssAnon), PSS $(pss_mib "$ctl_pid"))"
		stop_ctl
	done
done

# ---------------------------------------------------------------- 3: reaction during a restart
variants=()
for impl in "${impls[@]}"; do
	if [ "$impl" = c ]; then variants+=(c:prio c:fifo); else variants+=("$impl:"); fi
done
for v in "${variants[@]}"; do
	impl=${v%%:*} mode=${v#*:}
	label=$impl${mode:+-$mode}
	t0=$(now)
	# A delete-collection of 100,000 outlasts the API server's 60 s request timeout
	# (it answers 504 and stops): asked again until none is left.
	until [ "$(count_of "apps/v1/namespaces/$NS/deployments")" = 0 ]; do
		curl -s -o /dev/null --max-time 70 -X DELETE "$PROXY/apis/apps/v1/namespaces/$NS/deployments"
		[ "$(elapsed "$t0" | cut -d. -f1)" -lt 1800 ] || { say "Deployments still there after 30 min"; exit 1; }
	done
	foos=$(count_of "samplecontroller.k8s.io/v1alpha1/namespaces/$NS/foos")
	say "[$label] every Deployment deleted (${foos} Foos need one) in $(elapsed "$t0")s"
	python3 bench/reaction.py "$NS" "new-$label-" "$NEW" "$REACT_TIMEOUT" >"$OUT/run/react.out" &
	bg=$!
	wait_watching "$OUT/run/react.out" || exit 1
	log="$OUT/run/restart-$label.log"
	# shellcheck disable=SC2046
	start_ctl "$impl" "$NS" "$log" $([ "$mode" = fifo ] && echo --priority-queue=false)
	sleep 1
	for i in $(seq 1 "$NEW"); do
		python3 bench/mkfoos.py "$PROXY" "$NS" - 1 1 "new-$label-" "$i" >/dev/null
		sleep 0.5
	done
	wait "$bg"
	bg=""
	r=$(tail -n 1 "$OUT/run/react.out")
	rec restart "$label" "$foos" n "$(sed -n 's/^n=\([0-9]*\).*/\1/p' <<<"$r")"
	rec restart "$label" "$foos" p50_ms "$(sed -n 's/.*p50=\([0-9]*\).*/\1/p' <<<"$r")"
	rec restart "$label" "$foos" max_ms "$(sed -n 's/.*max=\([0-9]*\).*/\1/p' <<<"$r")"
	rec restart "$label" "$foos" missing "$(sed -n 's/.*missing=\([0-9]*\).*/\1/p' <<<"$r")"
	say "[$label] restart with $foos Foos to work on: $NEW new Foos: $r"
	stop_ctl
done

# ---------------------------------------------------------------- 4: streaming against paged
for mode in true false true false; do
	label=$([ $mode = true ] && echo streaming || echo paged)
	echo 5 >"/proc/$apiserver_pid/clear_refs" 2>/dev/null || say "cannot reset the API server's VmHWM"
	base=$(status_mib "$apiserver_pid" VmRSS)
	a0=$(cpu_ticks "$apiserver_pid")
	log="$OUT/run/list-$label.log"
	t0=$(now)
	CTL_ENV=KUBE_FEATURE_WatchListClient=$mode start_ctl c "$NS" "$log"
	wait_started "$log" 600 || { say "[$label] did not start"; rc=1; stop_ctl; continue; }
	synced=$(elapsed "$t0")
	acpu=$(ticks_to_s $(($(cpu_ticks "$apiserver_pid") - a0)))
	apeak=$(awk -v h="$(status_mib "$apiserver_pid" VmHWM)" -v b="$base" 'BEGIN { printf "%.1f", h - b }')
	rec list "$label" "$last" synced_s "$synced"
	rec list "$label" "$last" apiserver_cpu_s "$acpu"
	rec list "$label" "$last" apiserver_peak_above_mib "$apeak"
	rec list "$label" "$last" apiserver_rss_before_mib "$base"
	rec list "$label" "$last" ctl_cpu_s "$(ticks_to_s "$(cpu_ticks "$ctl_pid")")"
	rec list "$label" "$last" ctl_hwm_mib "$(status_mib "$ctl_pid" VmHWM)"
	say "[$label] synced in ${synced}s; kube-apiserver: ${acpu} CPU s, peak +${apeak} MiB over ${base};" \
		"the daemon: $(ticks_to_s "$(cpu_ticks "$ctl_pid")") CPU s, peak $(status_mib "$ctl_pid" VmHWM) MiB"
	stop_ctl
	sleep 5
done

# ---------------------------------------------------------------- tables and plots
python3 - "$OUT/scale.csv" "${impls[*]}" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
impls = sys.argv[2].split()
name = {"c": "C", "go": "Go", "cr": "controller-rt", "rs": "kube-rs"}
v = {}
for r in rows:
    v[(r["kind"], r["impl"], r["foos"], r["figure"])] = r["value"]
counts = sorted({int(r["foos"]) for r in rows if r["kind"] == "start"})
def get(*k):
    return v.get(tuple(str(x) for x in k), "") or "-"
print("Loading (C daemon; control-plane bound):")
print("%8s %10s %12s %14s %8s %9s %9s %9s" % ("Foos", "created s", "all owned s", "queue empty s", "CPU s", "RSS MiB", "anon MiB", "PSS MiB"))
for n in counts:
    if get("load", "c", n, "done_s") != "-":
        print("%8d %10s %12s %14s %8s %9s %9s %9s" % (n, get("load", "c", n, "created_s"), get("load", "c", n, "done_s"), get("load", "c", n, "drained_s"),
              get("load", "c", n, "load_cpu_s"), get("load", "c", n, "rss_mib"),
              get("load", "c", n, "rssanon_mib"), get("load", "c", n, "pss_mib")))
print()
for fig, title in (("hwm_mib", "Fresh start with everything present: peak RSS (VmHWM, MiB)"),
                   ("rss_mib", "... RSS at 30 s (MiB)"), ("rssanon_mib", "... RssAnon at 30 s (MiB)"),
                   ("synced_s", "... time to caches synced (s)"), ("cpu30_s", "... CPU in the first 30 s (s)")):
    print(title)
    print("%8s" % "Foos" + "".join("%15s" % name[i] for i in impls) + ("%15s" % "C / best peer" if "c" in impls and len(impls) > 1 else ""))
    for n in counts:
        vals = [get("start", i, n, fig) for i in impls]
        line = "%8d" % n + "".join("%15s" % x for x in vals)
        if "c" in impls and len(impls) > 1:
            try:
                peers = [float(get("start", i, n, fig)) for i in impls if i != "c"]
                line += "%15.2f" % (float(get("start", "c", n, fig)) / min(peers))
            except (ValueError, ZeroDivisionError):
                line += "%15s" % "-"
        print(line)
    print()
rs = [r for r in rows if r["kind"] == "restart"]
if rs:
    print("Reaction to new Foos during a restart with every Foo needing its Deployment:")
    print("%-14s %8s %4s %8s %8s %8s" % ("controller", "backlog", "n", "p50 ms", "max ms", "missing"))
    for label in dict.fromkeys(r["impl"] for r in rs):
        foos = next(r["foos"] for r in rs if r["impl"] == label)
        print("%-14s %8s %4s %8s %8s %8s" % (label, foos, get("restart", label, foos, "n"), get("restart", label, foos, "p50_ms"),
              get("restart", label, foos, "max_ms"), get("restart", label, foos, "missing")))
    print()
ls = [r for r in rows if r["kind"] == "list"]
if ls:
    print("Initial list, streaming against paged (C daemon; the kube-apiserver's side):")
    print("%-10s %8s %10s %16s %18s %12s %12s" % ("mode", "Foos", "synced s", "apiserver CPU s", "apiserver peak +MiB", "daemon CPU s", "daemon peak"))
    runs = {}
    for r in ls:
        runs.setdefault(r["impl"], {}).setdefault(r["figure"], []).append(r["value"])
    for mode, f in runs.items():
        for i in range(len(f["synced_s"])):
            print("%-10s %8s %10s %16s %18s %12s %12s" % (mode, next(r["foos"] for r in ls), f["synced_s"][i], f["apiserver_cpu_s"][i],
                  f["apiserver_peak_above_mib"][i], f["ctl_cpu_s"][i], f["ctl_hwm_mib"][i]))
PY

if ! command -v gnuplot >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null 2>&1 || say "no gnuplot: no plot"
fi
if command -v gnuplot >/dev/null; then
	python3 - "$OUT/scale.csv" "${impls[*]}" "$OUT" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
impls, out = sys.argv[2].split(), sys.argv[3]
for i in impls:
    with open("%s/scale-%s.dat" % (out, i), "w") as f:
        f.write("# foos(0 plotted as 100) hwm_mib rss_mib\n")
        pts = {}
        for r in rows:
            if r["kind"] == "start" and r["impl"] == i and r["figure"] in ("hwm_mib", "rss_mib"):
                pts.setdefault(int(r["foos"]), {})[r["figure"]] = r["value"]
        for n in sorted(pts):
            p = pts[n]
            if p.get("hwm_mib", "failed") != "failed" and "rss_mib" in p:
                f.write("%d %s %s\n" % (max(n, 100), p["hwm_mib"], p["rss_mib"]))
PY
	plots=""
	for i in "${impls[@]}"; do
		plots+="'$OUT/scale-$i.dat' using 1:3 with linespoints lw 2 title '${NAME[$i]}', "
	done
	hwm=""
	for i in "${impls[@]}"; do
		hwm+="'$OUT/scale-$i.dat' using 1:2 with linespoints lw 2 title '${NAME[$i]}', "
	done
	gnuplot <<-GP || say "gnuplot failed: no plot"
		set terminal pngcairo size 1100,440 noenhanced
		set output '$OUT/scale-rss.png'
		set multiplot layout 1,2 title "sample-controllers, fresh start with N Foos and their Deployments present ($(date -u +%Y-%m-%d), $commit, $(nproc) cores; 0 Foos drawn at 100)"
		set logscale xy
		set xlabel 'Foos'
		set grid
		set key top left
		set title 'RSS 30 s after the start (MiB)'
		plot ${plots%, }
		set title 'peak RSS (VmHWM) through the initial list (MiB)'
		plot ${hwm%, }
		unset multiplot
	GP
	[ -f "$OUT/scale-rss.png" ] && say "plot: $OUT/scale-rss.png"
	# The reaction during a restart: p50 and max per controller; a controller that
	# reacted to none drawn at the time limit, hatched.
	python3 - "$OUT/scale.csv" "$REACT_TIMEOUT" >"$OUT/scale-restart.dat" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["kind"] == "restart"]
limit_ms = float(sys.argv[2]) * 1000
v = {(r["impl"], r["figure"]): r["value"] for r in rows}
print("# label backlog p50_ms max_ms none(1 = reacted to none: drawn at the limit)")
for label in dict.fromkeys(r["impl"] for r in rows):
    foos = next(r["foos"] for r in rows if r["impl"] == label)
    n = v.get((label, "n"), "0") or "0"
    none = n in ("0", "")
    p50 = limit_ms if none else float(v.get((label, "p50_ms")) or limit_ms)
    mx = limit_ms if none else float(v.get((label, "max_ms")) or limit_ms)
    print('"%s" %s %.0f %.0f %d' % (label, foos, max(p50, 1), max(mx, 1), none))
PY
	if [ "$(grep -vc '^#' "$OUT/scale-restart.dat")" -gt 0 ]; then
		backlog=$(awk '!/^#/ { print $2; exit }' "$OUT/scale-restart.dat")
		# gnuplot refuses a series without a valid point: "none reacted to" only when some did not.
		none=""
		awk '!/^#/ && $5 == 1 { f = 1 } END { exit !f }' "$OUT/scale-restart.dat" &&
			none=", '' using (\$5 > 0 ? \$3 : 1/0) title 'none reacted to' fill pattern 4"
		rm -f "$OUT/scale-restart.png"
		if gnuplot <<-GP; then
			set terminal pngcairo size 900,440 noenhanced
			set output '$OUT/scale-restart.png'
			set title "new Foos created during a restart with $backlog Foos each needing a write\n($(date -u +%Y-%m-%d), $commit; none reacted to in ${REACT_TIMEOUT} s: drawn at the limit, hatched)"
			set logscale y
			set yrange [1:*]
			set ylabel 'reaction latency (ms)'
			set style data histograms
			set style histogram clustered gap 1
			set boxwidth 0.9
			set grid ytics
			set key top left
			plot '$OUT/scale-restart.dat' using (\$5 > 0 ? 1/0 : \$3):xtic(1) title 'p50' fill solid 0.6, \
			     '' using (\$5 > 0 ? 1/0 : \$4) title 'max' fill solid 0.3 $none
		GP
			say "plot: $OUT/scale-restart.png"
		else
			say "gnuplot failed: no restart plot"
		fi
	fi
fi
exit $rc
