# shellcheck shell=bash
# Sourced by tests/envtest/run.sh: sample-controller as N active replicas splitting
# the Foos by namespace (--shards-by=namespace, docs/sharding.md), on a server with
# ShardedListAndWatch on and again with it off (client-side filtering).
#
#   t_sharded_on / t_sharded_off   $SHARDED_FOOS Foos (3000) in $SHARDED_NS namespaces
#       (60, named app-1 ... app-60), then 3 replicas: every Foo converges; each
#       replica's caches hold exactly the Foos and Deployments of its buckets (its
#       informer metrics, and its cache dump, key by key, against the hash), about
#       1/3 of them each (the bucket boundaries follow the namespaces' hashes), the
#       buckets tile the hash space, the informers run server-side (gate on) or
#       client-side (off). Then, with Foos patched all along: kill -9 of a replica,
#       SIGTERM of another (exit 0), scale 3 -> 5 -> 2 -> 3, a kube-apiserver restart;
#       the time from each death to every bucket owned again is printed. At the end
#       everything converges again and the overlap oracle (tests/envtest/oracle.py)
#       finds no two replicas reconciling one key at once. Every reconcile takes 20 ms
#       longer (CKUBE_TESTING_RECONCILE_DELAY_MS), so handovers meet reconciles in
#       flight.
#   t_sharded_joins / t_sharded_unsafe   replicas joining under load, reconciles of
#       3 s always in flight: no overlap (under ThreadSanitizer when
#       $SAMPLE_CONTROLLER_TSAN is set); and the same with the handover's wait
#       skipped (CKUBE_TESTING_SKIP_HANDOVER_WAIT=1): the oracle finds overlaps.
#
# Needs from run.sh: $work, $parent, as_user, cli_run; sc_until from
# sample_controller.sh.

sh_bin="${SAMPLE_CONTROLLER:-$root/bin/sample-controller}"
sh_foos="${SHARDED_FOOS:-3000}"
sh_nns="${SHARDED_NS:-60}"
sh_buckets=16

sh_k() { as_user env KUBECONFIG="$sh_kc" kubectl "$@"; }
sh_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sh_now() { date +%s.%N; }
sh_since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(sh_now)"; }

# sh_start N: replica N, its pid in $sh_dir/rN.pid, its metrics and probes on rN.port.
sh_start() {
	local n=$1 port
	port=$(sh_port)
	echo "$port" >"$sh_dir/r$n.port"
	as_user env CKUBE_TESTING_RECONCILE_DELAY_MS="$sh_delay" \
		${sh_unsafe:+CKUBE_TESTING_SKIP_HANDOVER_WAIT=1} \
		sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$sh_dir/r$n.pid" "$sh_bin" \
		--kubeconfig "$sh_kc" --metrics-bind-address="127.0.0.1:$port" \
		--health-probe-bind-address="127.0.0.1:$port" --metrics-secure=false \
		--shards-by=namespace --shards=$sh_buckets --leader-elect-resource-namespace=shard-leases \
		--shards-lease-duration=6s --shards-renew-deadline=4s --shards-retry-period=1s \
		--kube-api-qps=200 --kube-api-burst=400 --workers=4 \
		--reconcile-log="$sh_dir/reconciles.log" --cache-dump-file="$sh_dir/m$n.dump" \
		-v=2 >>"$sh_dir/r$n.log" 2>&1 &
	sh_job[$n]=$!
	sc_until 5 test -s "$sh_dir/r$n.pid" || { echo "replica $n did not start"; return 1; }
	sh_live+=("$n")
}

# sh_stop SIGNAL N...: signals the replicas and waits for them; SIGTERM must exit 0.
sh_stop() {
	local sig=$1 n rc=0 code keep x
	shift
	for n in "$@"; do kill "-$sig" "$(cat "$sh_dir/r$n.pid")"; done
	for n in "$@"; do
		code=0
		wait "${sh_job[$n]}" 2>/dev/null || code=$?
		if [ "$sig" = TERM ] && [ "$code" != 0 ]; then
			echo "replica $n exited $code after SIGTERM"; tail -n 5 "$sh_dir/r$n.log"; rc=1
		fi
		keep=()
		for x in "${sh_live[@]}"; do [ "$x" = "$n" ] || keep+=("$x"); done
		sh_live=("${keep[@]}")
	done
	return $rc
}

sh_metrics() { curl -sf --max-time 2 "http://127.0.0.1:$(cat "$sh_dir/r$1.port")/metrics"; }
sh_owned() { sh_metrics "$1" | awk '$1 == "ckube_shard_buckets_owned" { print $2 }'; }
# Every bucket owned by the live replicas, each with at least $1 (default 0).
sh_all_owned() {
	local n sum=0 o min=${1:-0}
	for n in ${sh_live[*]}; do
		o=$(sh_owned "$n") && [ -n "$o" ] || return 1
		[ "$o" -ge "$min" ] || return 1
		sum=$((sum + o))
	done
	[ "$sum" = $sh_buckets ]
}
# sh_time_owned WHAT T0 [MIN]: waits for every bucket to be owned, prints the time.
sh_time_owned() {
	local n
	if ! sc_until 60 sh_all_owned "${3:-0}"; then
		echo "$1: buckets not all owned within 60s (each at least ${3:-0}):"
		for n in ${sh_live[*]}; do echo "  replica $n owns $(sh_owned "$n" || echo '?')"; done
		return 1
	fi
	echo "sharded $sh_gate: $1: all $sh_buckets buckets owned $(sh_since "$2")s after"
}

sh_converged() {
	sh_k get foos -A -o json >"$sh_dir/foos.json" 2>/dev/null &&
		sh_k get deploy -A -o json >"$sh_dir/deploys.json" 2>/dev/null &&
		python3 tests/envtest/sharded_check.py converged "$sh_dir/foos.json" "$sh_dir/deploys.json" >"$sh_dir/converged.out"
}
# sh_wait_converged SECONDS WHAT T0
sh_wait_converged() {
	local deadline=$((SECONDS + $1))
	until sh_converged; do
		[ $SECONDS -lt $deadline ] || { cat "$sh_dir/converged.out"; return 1; }
		sleep 1
	done
	echo "sharded $sh_gate: $(head -n 1 "$sh_dir/converged.out") ($2, $(sh_since "$3")s after)"
}
# The caches as sharded_check.py wants them, within $1 seconds (the boundaries move
# to where the namespaces' hashes fall a few rounds after the replicas start).
sh_check_caches() {
	local deadline=$((SECONDS + $1))
	until sh_check_caches_once >"$sh_dir/caches.out" 2>&1; do
		[ $SECONDS -lt $deadline ] || { cat "$sh_dir/caches.out"; return 1; }
		sleep 1
	done
	cat "$sh_dir/caches.out"
}
# Each replica's metrics and its cache dump (SIGUSR1, --cache-dump-file): the
# objects it caches, checked against its buckets one by one.
sh_check_caches_once() {
	local n files=()
	for n in ${sh_live[*]}; do
		rm -f "$sh_dir/m$n.dump"
		sh_metrics "$n" >"$sh_dir/m$n.txt" || { echo "no metrics from replica $n"; return 1; }
		kill -USR1 "$(cat "$sh_dir/r$n.pid")"
		sc_until 10 test -e "$sh_dir/m$n.dump" || { echo "replica $n wrote no cache dump"; return 1; }
		files+=("$sh_dir/m$n.txt")
	done
	python3 tests/envtest/sharded_check.py caches "$sh_gate" "$sh_dir/foos.json" "${files[@]}" |
		sed "s/^/sharded $sh_gate: /"
	return "${PIPESTATUS[0]}"
}

# The Foos, spread evenly over the namespaces $sh_prefix1 ... (prefix "app-": names
# that differ only at the end, which FNV-1a puts next to each other; "" : random
# names, spread evenly); created four namespaces at a time.
sh_make_foos() {
	local i j per=$(((sh_foos + sh_nns - 1) / sh_nns)) made=0 ns pids=() p rc=0
	sh_k create namespace shard-leases >/dev/null || return 1
	sh_names=()
	for i in $(seq 1 "$sh_nns"); do
		ns="app-$i"
		[ -n "$sh_prefix" ] || ns="r$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
		sh_names+=("$ns")
		{
			printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n' "$ns"
			for j in $(seq 1 "$per"); do
				[ $((made + j)) -le "$sh_foos" ] || break
				printf -- '---\napiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n'
				printf 'metadata: {name: foo-%d, namespace: %s}\n' "$j" "$ns"
				printf 'spec: {deploymentName: web-%d, replicas: 1}\n' "$j"
			done
		} >"$sh_dir/ns-$i.yaml"
		made=$((made + per))
	done
	for i in $(seq 1 "$sh_nns"); do
		sh_k create -f "$sh_dir/ns-$i.yaml" >/dev/null &
		pids+=($!)
		if [ ${#pids[@]} = 4 ]; then
			for p in "${pids[@]}"; do wait "$p" || rc=1; done
			pids=()
		fi
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return $rc
}

# Patches random Foos' replicas, about $sh_churn_rate a second, until
# $sh_dir/churn.stop exists; through a kubectl proxy (a kubectl per patch costs more
# CPU than the controllers).
sh_churn() {
	local i j r port url
	port=$(sh_port)
	rm -f "$sh_dir/proxy.pid"
	# Its own pid recorded: $! would be the subshell around it, and killing that
	# leaves kubectl running.
	as_user env KUBECONFIG="$sh_kc" sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$sh_dir/proxy.pid" \
		kubectl proxy --port="$port" >/dev/null 2>&1 &
	local job=$! proxy
	sc_until 5 test -s "$sh_dir/proxy.pid" || return 1
	proxy=$(cat "$sh_dir/proxy.pid")
	sc_until 10 curl -sf "http://127.0.0.1:$port/readyz" || { kill "$proxy"; return 1; }
	url="http://127.0.0.1:$port/apis/samplecontroller.k8s.io/v1alpha1/namespaces"
	while [ ! -e "$sh_dir/churn.stop" ]; do
		i=$((RANDOM % sh_nns)) j=$((RANDOM % ${sh_churn_per:-3} + 1)) r=$((RANDOM % 4 + 1))
		curl -s -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' \
			--data "{\"spec\":{\"replicas\":$r}}" "$url/${sh_names[$i]}/foos/foo-$j"
		sleep "$(awk -v r="$sh_churn_rate" 'BEGIN { printf "%.3f", 1 / r }')"
	done
	kill "$proxy"
	wait "$job" 2>/dev/null
}

# Restarts kube-apiserver with the same command line (etcd keeps the data), and
# records the new process where ckube-envtest stop finds it.
sh_restart_apiserver() {
	local d pids old cmd new start
	d=$(dirname "$sh_kc")
	pids="$d/pids"
	old=$(awk '$1 == "kube-apiserver" { print $2 }' "$pids")
	[ -n "$old" ] || { echo "no kube-apiserver in $pids"; return 1; }
	cmd=()
	mapfile -d '' cmd <"/proc/$old/cmdline"
	kill -TERM "$old"
	sc_until 30 sh -c '! kill -0 "$1"' sh "$old" || { echo "kube-apiserver $old did not stop"; return 1; }
	as_user sh -c 'echo $$ >"$1"; shift; exec setsid "$@"' sh "$sh_dir/apiserver.pid" "${cmd[@]}" \
		>>"$d/kube-apiserver.log" 2>&1 </dev/null &
	sc_until 5 test -s "$sh_dir/apiserver.pid" || return 1
	new=$(cat "$sh_dir/apiserver.pid")
	start=$(awk '{ print $22 }' "/proc/$new/stat")
	sed -i "s/^kube-apiserver .*/kube-apiserver $new $start/" "$pids"
	sc_until 60 sh_k get --raw /readyz || { echo "kube-apiserver did not come back"; return 1; }
}

sh_setup() {
	local out
	sh_gate=$1
	sh_dir="$parent/sharded-$sh_gate"
	as_user mkdir -p "$sh_dir" || return 1
	sh_live=()
	out=$(cli_run start ${2:+-feature-gates "$2"} deploy/crd.yaml 2>"$work/err") ||
		{ cat "$work/err"; return 1; }
	sh_kc=${out#export KUBECONFIG=}
}

sh_teardown() {
	local rc=0 n
	[ -e "$sh_dir/churn.stop" ] || : >"$sh_dir/churn.stop"
	wait "$sh_churn_pid" 2>/dev/null
	for n in ${sh_live[*]}; do kill -9 "$(cat "$sh_dir/r$n.pid")" 2>/dev/null; done
	cli_run stop || rc=1
	return $rc
}

sh_scenario() {
	[ -x "$sh_bin" ] || { echo "no sample-controller at $sh_bin"; return 1; }
	sh_make_foos || { echo "creating the Foos failed"; return 1; }
	local t0
	t0=$(sh_now)
	sh_start 1 && sh_start 2 && sh_start 3 || return 1
	sh_time_owned "3 replicas started" "$t0" 1 || return 1
	sh_wait_converged 300 "3 replicas started" "$t0" || return 1
	sh_check_caches 60 || return 1

	sh_churn &
	sh_churn_pid=$!
	t0=$(sh_now); sh_stop TERM 1 || return 1
	sh_time_owned "SIGTERM of a replica (exit 0)" "$t0" || return 1
	t0=$(sh_now); sh_start 4 || return 1
	sh_time_owned "a replica joining (each owning some)" "$t0" 1 || return 1
	t0=$(sh_now); sh_stop KILL 2 || return 1
	sh_time_owned "kill -9 of a replica" "$t0" || return 1
	t0=$(sh_now); sh_start 5 && sh_start 6 && sh_start 7 || return 1
	sh_time_owned "scale 2 -> 5 (each owning some)" "$t0" 1 || return 1
	t0=$(sh_now); sh_stop TERM 5 6 7 || return 1
	sh_time_owned "scale 5 -> 2" "$t0" || return 1
	t0=$(sh_now); sh_start 8 || return 1
	sh_time_owned "scale 2 -> 3 (each owning some)" "$t0" 1 || return 1
	t0=$(sh_now); sh_restart_apiserver || return 1
	echo "sharded $sh_gate: kube-apiserver restarted, ready again $(sh_since "$t0")s after its SIGTERM"
	sh_time_owned "kube-apiserver restart" "$t0" 1 || return 1
	: >"$sh_dir/churn.stop"
	wait "$sh_churn_pid"
	sh_wait_converged 120 "the churn stopped" "$(sh_now)" || return 1
	sh_check_caches 60 || return 1
	# shellcheck disable=SC2086
	sh_stop TERM ${sh_live[*]} || return 1
	python3 tests/envtest/oracle.py "$sh_dir/reconciles.log" | sed "s/^/sharded $sh_gate: /"
	[ "${PIPESTATUS[0]}" = 0 ]
}

sh_run() {
	local rc=0
	sh_delay=20 sh_unsafe= sh_prefix=app- sh_churn_rate=20
	sh_setup "$@" || return 1
	sh_scenario || rc=1
	if [ $rc != 0 ]; then
		for f in "$sh_dir"/r*.log; do echo "== $f"; tail -n 8 "$f"; done
	fi
	sh_teardown || rc=1
	return $rc
}

t_sharded_on() { sh_run on ShardedListAndWatch=true; }
t_sharded_off() { sh_run off; }

# Joins under load: one Foo in each of 30 namespaces with random names (spread over
# the buckets), reconciles of 3 s under churn, so every replica always has four in
# flight; replicas join (2 -> 5), each join making the others hand buckets over.
# sh_joins safe: the handover waits for them (0 overlaps); sh_joins unsafe: the oracle
# can fail, buckets released while their reconciles still run
# (CKUBE_TESTING_SKIP_HANDOVER_WAIT=1): overlaps found.
sh_joins() {
	local rc=0 i out
	sh_delay=3000 sh_prefix= sh_churn_per=1 sh_churn_rate=20
	sh_unsafe=
	[ "$1" = safe ] || sh_unsafe=1
	local sh_foos=30 sh_nns=30
	sh_setup "$1" ShardedListAndWatch=true || return 1
	sh_make_foos || rc=1
	sh_start 1 && sh_start 2 || rc=1
	sh_churn &
	sh_churn_pid=$!
	sleep 5
	for i in 3 4 5; do
		[ $rc = 0 ] || break
		sh_start "$i" || rc=1
		sleep 5
	done
	: >"$sh_dir/churn.stop"
	wait "$sh_churn_pid"
	# shellcheck disable=SC2086
	sh_stop TERM ${sh_live[*]} || rc=1
	out=$(python3 tests/envtest/oracle.py "$sh_dir/reconciles.log")
	echo "sharded joins ($1): $out" | head -n 3
	if [ "$1" = safe ]; then
		[[ "$out" =~ \ 0\ overlaps ]] || rc=1
	else
		[[ "$out" =~ \ ([1-9][0-9]*)\ overlaps ]] || { echo "the oracle found no overlap"; rc=1; }
	fi
	sh_teardown || rc=1
	return $rc
}

# The safe run's replicas are the ThreadSanitizer build when there is one
# (SAMPLE_CONTROLLER_TSAN): handovers race workers, the loop and the coordinator; a
# race report makes a replica exit non-zero on SIGTERM.
t_sharded_joins() {
	local sh_bin="${SAMPLE_CONTROLLER_TSAN:-$sh_bin}"
	sh_joins safe
}
t_sharded_unsafe() { sh_joins unsafe; }
