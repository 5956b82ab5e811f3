# sample-controller operability end to end, on the real local control plane:
# leader election (one leader, kill -9, SIGTERM release, network cut), /metrics,
# /healthz and /readyz (also under a flood of idle connections), logs (JSON
# format) and Event aggregation.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Short leader election timings; the lease lives in the test's own namespace.
LEASE_S=4 RENEW_S=3 RETRY_S=1
le_flags() { # le_flags LEASE_NAME
	echo --leader-elect --leader-elect-lease-duration=${LEASE_S}s \
		--leader-elect-renew-deadline=${RENEW_S}s --leader-elect-retry-period=${RETRY_S}s \
		--leader-elect-resource-name="$1" --leader-elect-resource-namespace="$NS"
}

# Everything a test starts is stopped by ops_cleanup, also when it fails half-way
# (the EXIT trap of the subshell the test runs in).
OPS_NAMES=()
OPS_PIDS=()
ops_cleanup() {
	local rc="$1" n p
	for n in "${OPS_NAMES[@]}"; do
		[ -f "$E2E_LOGS/$n.pid" ] || continue
		if [ "$rc" != 0 ]; then
			echo "--- last lines of $n.log" >&2
			tail -n 15 "$E2E_LOGS/$n.log" | cut -c1-400 >&2
		fi
		kill9_controller "$n"
	done
	for p in "${OPS_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ -n "${NS:-}" ] && kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1
	return 0
}
ops_setup() { # ops_setup NAME: namespace e2e-ops-NAME-xxxx in $NS, cleanup trap
	ensure_crd
	NS=$(new_ns "e2e-ops-$1")
	trap 'ops_cleanup $?' EXIT
}
ops_start() { # ops_start NAME ARGS...: start_controller, restricted to $NS
	local name="$1"; shift
	OPS_NAMES+=("$name")
	start_controller "$name" --namespace "$NS" "$@"
}

# soft_fail MSG: report a failure but let the test go on to check the rest (for
# independent properties); the test ends with soft_failures.
SOFT_FAILED=
soft_fail() { echo "    FAIL: $*" >&2; SOFT_FAILED=1; }
soft_failures() { test -z "$SOFT_FAILED"; }

# le_identity NAME: the identity a daemon runs leader election with (from its log).
le_identity() {
	python3 - "$E2E_LOGS/$1.log" <<'PY'
import json, re, sys
for line in open(sys.argv[1], errors="replace"):
    if "Attempting to acquire leader lease" not in line:
        continue
    try:
        print(json.loads(line)["identity"])
    except ValueError:
        print(re.search(r'identity="([^"]*)"', line).group(1))
    sys.exit(0)
sys.exit(1)
PY
}

is_leader() { test "$(prom_value "$1" leader_election_master_status)" = 1.0; }
either_leader() { is_leader "$1" || is_leader "$2"; }
code_is() { test "$(http_code "http://$1")" = "$2"; } # code_is HOST:PORT/PATH CODE
ready() { code_is "$1/readyz" 200; }
# Writes the daemon made: non-GET requests the API server accepted.
writes() {
	local v
	v=$(prom_value "$1" rest_client_requests_total 'method!=GET' 'code~2..') || return 1
	[ "$v" = absent ] && v=0.0
	echo "$v"
}
fsub() { python3 -c 'import sys; print("%.3f" % (float(sys.argv[1]) - float(sys.argv[2])))' "$1" "$2"; }
fle() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)' "$1" "$2"; }
created_for() { # created_for NAME FOO: the daemon's log says it created FOO's deployment
	grep -q "\"$2\"" <<<"$(grep 'Created deployment' "$E2E_LOGS/$1.log")"
}
deploy_exists() { kubectl -n "$1" get deploy "$2" >/dev/null 2>&1; }

# Two candidates: exactly one reconciles, the standby writes nothing and is ready;
# after kill -9 of the leader the standby takes over no earlier than the lease
# allows and no later than a lease duration plus jittered retries.
t_le_one_leader_and_kill9_takeover() {
	ops_setup le
	local pa pb L S A B
	pa=127.0.0.1:$(free_port); pb=127.0.0.1:$(free_port)
	# shellcheck disable=SC2046
	ops_start le-a --kubeconfig "$KUBECONFIG" --log-format=json --metrics-bind-address=$pa \
		--health-probe-bind-address=$pa $(le_flags ops-kill9)
	# shellcheck disable=SC2046
	ops_start le-b --kubeconfig "$KUBECONFIG" --log-format=json --metrics-bind-address=$pb \
		--health-probe-bind-address=$pb $(le_flags ops-kill9)
	until_ok 20 either_leader "$pa" "$pb" || fail "no leader_election_master_status 1 on either daemon"
	until_ok 10 ready "$pa" || fail "le-a never ready"
	until_ok 10 ready "$pb" || fail "le-b never ready"
	if is_leader "$pa"; then L=le-a S=le-b A=$pa B=$pb; else L=le-b S=le-a A=$pb B=$pa; fi
	test "$(prom_value "$B" leader_election_master_status)" = 0.0 || fail "standby's master_status is not 0"
	test "$(lease_holder "$NS" ops-kill9)" = "$(le_identity $L)" || fail "lease holder is not $L"
	# Standing by is ready.
	ready "$B" || fail "standby not ready"

	apply_foo "$NS" k1 kd1 1
	apply_foo "$NS" k2 kd2 2
	until_ok 30 deploy_exists "$NS" kd1 || fail "kd1 not created"
	until_ok 30 deploy_exists "$NS" kd2 || fail "kd2 not created"
	# A status write that does not wait for pods: observedGeneration.
	status_written() { test "$(jp "$NS" "foo/$1" '{.status.observedGeneration}')" = "$(jp "$NS" "foo/$1" '{.metadata.generation}')"; }
	until_ok 30 status_written k2 || fail "no status written for k2"
	created_for $L k1 && created_for $L k2 || fail "the leader did not log the creations"
	! grep -q 'Created deployment' "$E2E_LOGS/$S.log" || fail "the standby created deployments"
	test "$(writes "$B")" = 0.0 || fail "the standby wrote: $(writes "$B") accepted non-GET requests"
	test "$(prom_value "$B" controller_runtime_reconcile_total)" = 0.0 || fail "the standby reconciled"
	fle 3 "$(writes "$A")" || fail "the leader made fewer than 3 writes: $(writes "$A")"

	local t0 t1 dt
	t0=$(date +%s.%N)
	kill9_controller $L
	apply_foo "$NS" k3 kd3 1
	until_ok 20 grep -q '"Started leading"' "$E2E_LOGS/$S.log" || fail "$S did not take over after kill -9"
	t1=$(json_log_ts "$E2E_LOGS/$S.log" "Started leading")
	dt=$(fsub "$t1" "$t0")
	echo "    kill -9 -> takeover: ${dt}s (lease ${LEASE_S}s, retry ${RETRY_S}s)"
	# Earliest: the leader's last renewal (at most one retry period before the kill)
	# plus the lease duration. Latest: one jittered retry (client-go waits
	# retry * [1, 2.2)) to observe that renewal, the lease duration, one more jittered
	# retry to act, plus 1.5 s for a loaded machine.
	fle "$(python3 -c "print($LEASE_S - $RETRY_S - 0.3)")" "$dt" || fail "took over after ${dt}s: before the lease expired"
	fle "$dt" "$(python3 -c "print($LEASE_S + 2 * 2.2 * $RETRY_S + 1.5)")" || fail "took over only after ${dt}s"
	until_ok 30 deploy_exists "$NS" kd3 || fail "the new leader did not reconcile k3"
	until_ok 10 created_for $S k3 || fail "kd3 not created by $S"
	until_ok 10 is_leader "$B" || fail "new leader's master_status is not 1"
	test "$(lease_holder "$NS" ops-kill9)" = "$(le_identity $S)" || fail "lease holder is not $S"
	test "$(jp "$NS" lease/ops-kill9 '{.spec.leaseTransitions}')" -ge 1 || fail "leaseTransitions not incremented"
	stop_controller $S
}

# SIGTERM releases the lease (holder "", duration 1 s): the standby takes over at
# its next retry instead of a lease duration later.
t_le_sigterm_releases_lease() {
	ops_setup term
	local pa pb L S B
	pa=127.0.0.1:$(free_port); pb=127.0.0.1:$(free_port)
	# shellcheck disable=SC2046
	ops_start term-a --kubeconfig "$KUBECONFIG" --log-format=json --metrics-bind-address=$pa $(le_flags ops-term)
	# shellcheck disable=SC2046
	ops_start term-b --kubeconfig "$KUBECONFIG" --log-format=json --metrics-bind-address=$pb $(le_flags ops-term)
	until_ok 20 either_leader "$pa" "$pb" || fail "no leader"
	if is_leader "$pa"; then L=term-a S=term-b B=$pb; else L=term-b S=term-a B=$pa; fi
	until_ok 10 grep -q '"New leader elected"' "$E2E_LOGS/$S.log" || fail "standby never saw the leader"
	apply_foo "$NS" s1 sd1 1
	until_ok 30 created_for $L s1 || fail "leader did not reconcile s1"

	# Record every version of the Lease while the leader stops.
	local watch="$E2E_LOGS/ops-term-lease.watch"
	kubectl -n "$NS" get lease ops-term -w \
		-o jsonpath='{.spec.holderIdentity}/{.spec.leaseDurationSeconds}{"\n"}' >"$watch" 2>&1 &
	OPS_PIDS+=($!)
	until_ok 10 test -s "$watch" || fail "lease watch printed nothing"
	local t0 t1 dt
	t0=$(date +%s.%N)
	stop_controller $L || fail "the leader did not exit 0 on SIGTERM"
	until_ok 10 grep -q '"Started leading"' "$E2E_LOGS/$S.log" || fail "$S did not take over after SIGTERM"
	t1=$(json_log_ts "$E2E_LOGS/$S.log" "Started leading")
	dt=$(fsub "$t1" "$t0")
	echo "    SIGTERM -> takeover: ${dt}s (retry ${RETRY_S}s)"
	grep -qx '/1' "$watch" || fail "the lease was never released (holder \"\", 1 s): $(tr '\n' ' ' <"$watch")"
	# The standby's next try after the release: one jittered retry period, at most
	# 2.2 retry periods, plus 0.8 s for a loaded machine. Without the release it
	# could not be less than the lease duration minus one retry period.
	fle "$dt" "$(python3 -c "print(2.2 * $RETRY_S + 0.8)")" || fail "takeover after SIGTERM took ${dt}s"
	apply_foo "$NS" s2 sd2 1
	until_ok 30 created_for $S s2 || fail "the new leader did not reconcile s2"
	until_ok 5 is_leader "$B" || fail "new leader's master_status is not 1"
	stop_controller $S
	test "$(lease_holder "$NS" ops-term)" = "" || fail "the last leader did not release the lease"
}

# The leader loses its network (a TCP proxy stalls without closing): it must stop
# leading, and exit 1, before the standby can acquire the lease.
t_le_network_cut_stops_before_takeover() {
	ops_setup cut
	local pf="$E2E_LOGS/ops-cut.proxyport" kc="$E2E_LOGS/ops-cut.kubeconfig" proxy port pa pb
	rm -f "$pf"
	python3 "$E2E_ROOT/tests/e2e/tcpproxy.py" "127.0.0.1:$API_PORT" "$pf" &
	proxy=$!
	OPS_PIDS+=("$proxy")
	until_ok 10 test -s "$pf" || fail "proxy did not start"
	port=$(cat "$pf")
	kubeconfig_via "$kc" "https://127.0.0.1:$port"
	pa=127.0.0.1:$(free_port); pb=127.0.0.1:$(free_port)
	# The leader talks to the API server through the proxy only.
	# shellcheck disable=SC2046
	ops_start cut-a --kubeconfig "$kc" --log-format=json --metrics-bind-address=$pa $(le_flags ops-cut)
	until_ok 20 is_leader "$pa" || fail "cut-a did not become leader"
	# shellcheck disable=SC2046
	ops_start cut-b --kubeconfig "$KUBECONFIG" --log-format=json --metrics-bind-address=$pb $(le_flags ops-cut)
	until_ok 20 grep -q '"New leader elected"' "$E2E_LOGS/cut-b.log" || fail "cut-b never saw the leader"
	apply_foo "$NS" c1 cd1 1
	until_ok 30 created_for cut-a c1 || fail "cut-a did not reconcile c1"
	sleep 1.5 # a couple of renewals through the proxy

	# Every version of the Lease: the last renewTime the cut leader got through.
	local watch="$E2E_LOGS/ops-cut-lease.watch" ida
	ida=$(le_identity cut-a)
	kubectl -n "$NS" get lease ops-cut -w \
		-o jsonpath='{.spec.holderIdentity} {.spec.renewTime}{"\n"}' >"$watch" 2>&1 &
	OPS_PIDS+=($!)
	until_ok 10 test -s "$watch" || fail "lease watch printed nothing"

	local tcut ta tb tr left
	tcut=$(date +%s.%N)
	kill -USR1 "$proxy"
	until_ok 20 grep -q '"Started leading"' "$E2E_LOGS/cut-b.log" || fail "cut-b did not take over"
	ta=$(json_log_ts "$E2E_LOGS/cut-a.log" Stopping) || fail "cut-a did not log that it stopped leading"
	grep -q '"err":"leader election lost"' <<<"$(grep '"msg":"Stopping"' "$E2E_LOGS/cut-a.log")" ||
		fail "cut-a's stop does not say the election was lost"
	tb=$(json_log_ts "$E2E_LOGS/cut-b.log" "Started leading")
	# renewTime is written by the leader from its own clock (this host's) when it
	# sends the renewal: the start of its renew deadline.
	tr=$(python3 - "$watch" "$ida" <<'PY'
import sys
from datetime import datetime
last = None
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 2 and f[0] == sys.argv[2]:
        last = f[1]
ts = datetime.strptime(last.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
print("%.6f" % ts.timestamp())
PY
	) || fail "no renewal of cut-a in the lease watch"
	echo "    cut -> leader stops: $(fsub "$ta" "$tcut")s, cut -> standby acquires: $(fsub "$tb" "$tcut")s;" \
		"last renewal -> leader stops: $(fsub "$ta" "$tr")s"
	fle "$ta" "$tb" || soft_fail "the standby acquired $(fsub "$ta" "$tb")s before the cut leader stopped"
	# The leader gives up within the renew deadline of its last successful renewal
	# (0.3 s for scheduling), well before a standby may take over: the lease
	# duration after it observed that renewal, at the earliest.
	fle "$(fsub "$ta" "$tr")" "$(python3 -c "print($RENEW_S + 0.3)")" ||
		soft_fail "the cut leader stopped $(fsub "$ta" "$tr")s after its last renewal: the renew deadline is ${RENEW_S}s (lease ${LEASE_S}s)"
	# Nothing was reconciled by the old leader after it stopped.
	python3 - "$E2E_LOGS/cut-a.log" "$ta" <<'PY' || fail "cut-a reconciled after it stopped leading"
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["ts"] > float(sys.argv[2]) and o["msg"] in ("Created deployment", "Successfully synced",
                                                      "Updating deployment replicas"):
        sys.exit(1)
PY
	apply_foo "$NS" c2 cd2 1
	until_ok 30 created_for cut-b c2 || fail "the new leader did not reconcile c2"
	stop_controller cut-b
	# The old leader exits 1 on its own, in bounded time: the renew deadline, then
	# a shutdown whose slowest part is the event recorder's flush (10 s bound).
	left=$(python3 -c "import time; print(max(1, int($tcut + $RENEW_S + 10 + 3 - time.time() + 0.999)))")
	wait_exit cut-a "$left"
	test "$WAIT_RC" = 1 || soft_fail "cut-a after losing the lease: exit status $WAIT_RC, want 1 within $((RENEW_S + 13))s of the cut"
	soft_failures
}

# /metrics parses with the Prometheus text parser; the counters move as expected
# after a few reconciles and a failing one; no counter ever goes down.
t_metrics_parse_and_move() {
	ops_setup metrics
	local m snap1="$E2E_LOGS/ops-metrics.1.prom" snap2="$E2E_LOGS/ops-metrics.2.prom"
	m=127.0.0.1:$(free_port)
	ops_start metrics --kubeconfig "$KUBECONFIG" --metrics-bind-address=$m
	until_ok 20 prom_eq "$m" 2 informer_synced || fail "informers never synced (informer_synced)"
	# The exposition is what Prometheus scrapes: content type, HELP and TYPE for
	# every family, parseable by the reference parser.
	curl -sf -D "$E2E_LOGS/ops-metrics.headers" "http://$m/metrics" >"$snap1"
	grep -qi '^content-type: text/plain; version=0.0.4' "$E2E_LOGS/ops-metrics.headers" ||
		fail "content type: $(grep -i content-type "$E2E_LOGS/ops-metrics.headers")"
	"$PROM_PY" - "$snap1" <<'PY' || fail "/metrics is not valid exposition text"
import sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
fams = list(text_string_to_metric_families(text))
names = [f.name for f in fams]
assert len(names) == len(set(names)), "duplicate families"
for f in fams:
    assert f.type in ("counter", "gauge", "histogram", "summary"), (f.name, f.type)
    assert f.documentation, "no HELP for " + f.name
    for s in f.samples:
        if f.type == "histogram" and s.name.endswith("_bucket"):
            assert "le" in s.labels, s
# (rest_client_requests_total is checked below, once writes have completed: with the
# streaming list no request has completed yet at this point, watches count at their end.)
need = ["controller_runtime_reconcile_total", "workqueue_adds_total",
        "process_resident_memory_bytes", "informer_objects", "process_start_time_seconds"]
have = {s.name for f in fams for s in f.samples}
missing = [n for n in need if n not in have]
assert not missing, "missing: %s" % missing
PY
	local succ0 err0 adds0 post0 dur0
	succ0=$(prom_value "$m" controller_runtime_reconcile_total result=success)
	err0=$(prom_value "$m" controller_runtime_reconcile_total result=error)
	adds0=$(prom_value "$m" workqueue_adds_total name=Foos)
	post0=$(prom_value "$m" rest_client_requests_total method=POST code=201)
	[ "$post0" = absent ] && post0=0
	dur0=$(prom_value "$m" controller_runtime_reconcile_time_seconds_count)

	kubectl -n "$NS" create deployment foreign --image=busybox --replicas=1 >/dev/null
	apply_foo "$NS" m1 md1 1
	apply_foo "$NS" m2 md2 1
	apply_foo "$NS" m3 md3 1
	apply_foo "$NS" mbad foreign 1
	for d in md1 md2 md3; do until_ok 30 deploy_exists "$NS" $d || fail "$d not created"; done
	until_ok 30 prom_ge "$m" "$(python3 -c "print($succ0 + 3)")" controller_runtime_reconcile_total result=success ||
		fail "reconcile_total{result=success} did not grow by 3"
	until_ok 30 prom_ge "$m" "$(python3 -c "print($err0 + 1)")" controller_runtime_reconcile_total result=error ||
		fail "reconcile_total{result=error} did not grow for the Foo on a foreign Deployment"
	until_ok 20 prom_eq "$m" 4 informer_objects resource=deployments.apps ||
		fail "informer_objects{deployments.apps} = $(prom_value "$m" informer_objects resource=deployments.apps), want 4"
	until_ok 20 prom_eq "$m" 4 informer_objects resource=foos.samplecontroller.k8s.io ||
		fail "informer_objects{foos} = $(prom_value "$m" informer_objects resource=foos.samplecontroller.k8s.io), want 4"
	curl -sf "http://$m/metrics" >"$snap2"
	fle "$(python3 -c "print($adds0 + 4)")" "$(prom_value "$m" workqueue_adds_total name=Foos)" ||
		fail "workqueue_adds_total{Foos} did not grow by 4"
	fle "$(python3 -c "print($post0 + 3)")" "$(prom_value "$m" rest_client_requests_total method=POST code=201)" ||
		fail "rest_client_requests_total{POST,201} did not grow by 3 (three Deployments created)"
	fle 1 "$(prom_value "$m" rest_client_requests_total method=PUT code=200)" || fail "no status update counted (PUT 200)"
	fle "$(python3 -c "print($dur0 + 4)")" "$(prom_value "$m" controller_runtime_reconcile_time_seconds_count)" ||
		fail "reconcile_time_seconds_count did not grow by 4"
	fle 1 "$(prom_value "$m" workqueue_retries_total name=Foos)" || fail "no workqueue retry for the failing Foo"
	fle 1 "$(prom_value "$m" events_total outcome=posted)" || fail "no event counted as posted"
	fle 1000000 "$(prom_value "$m" process_resident_memory_bytes)" || fail "process_resident_memory_bytes implausible"
	# Every counter sample (and histogram count) of the first scrape is <= its value in the second.
	"$PROM_PY" - "$snap1" "$snap2" <<'PY' || fail "a counter went down between two scrapes"
import sys
from prometheus_client.parser import text_string_to_metric_families
def load(p):
    out = {}
    for f in text_string_to_metric_families(open(p).read()):
        for s in f.samples:
            if f.type == "counter" or s.name.endswith(("_count", "_bucket", "_sum")):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
bad = [(k, a[k], b.get(k)) for k in a if b.get(k) is None or b[k] < a[k]]
for x in bad:
    print("    went down or vanished:", x)
sys.exit(1 if bad else 0)
PY
	stop_controller metrics
}

# mint_token NAME SA: a `kubectl create token` token for service account SA of $NS,
# kept under $E2E_LOGS/minted-tokens so that the log scan looks for it too.
mint_token() {
	local dir="$E2E_LOGS/minted-tokens"
	mkdir -p "$dir"
	chmod 700 "$dir"
	kubectl -n "$NS" create token "$2" --duration=10m >"$dir/$1.token"
	cat "$dir/$1.token"
}

# /healthz and /readyz: before the caches can sync (a service account without any
# RBAC rights), after they sync (rights granted at run time), and as a standby
# under leader election.
t_probes_before_after_sync_and_standby() {
	ops_setup probes
	local p body kc="$E2E_LOGS/ops-probes.kubeconfig"
	kubectl -n "$NS" create serviceaccount norights >/dev/null
	kubeconfig_token "$kc" "$(mint_token probes norights)"
	p=127.0.0.1:$(free_port)
	ops_start probes --kubeconfig "$kc" --health-probe-bind-address=$p
	until_ok 20 code_is "$p/healthz" 200 || fail "healthz never 200"
	until_ok 20 grep -q 'Caches not synced yet' "$E2E_LOGS/probes.log" || fail "no 'Caches not synced yet' in the log"
	for _ in 1 2 3; do
		test "$(http_code "http://$p/readyz")" = 500 || fail "readyz before sync: $(http_code "http://$p/readyz"), want 500"
		test "$(http_code "http://$p/healthz")" = 200 || fail "healthz before sync: $(http_code "http://$p/healthz"), want 200"
		sleep 0.5
	done
	body=$(curl -s --max-time 5 "http://$p/readyz?verbose")
	grep -qF '[-]informers-synced failed' <<<"$body" || fail "readyz?verbose: $body"
	grep -qF '[+]leader-election ok' <<<"$body" || fail "readyz?verbose: $body"
	# The reason stays out of the unauthenticated endpoint (as in Kubernetes:
	# "reason withheld") and goes to the log.
	grep -q 'forbidden' <<<"$(grep 'Probe check failed' "$E2E_LOGS/probes.log")" || fail "the log does not say why readyz fails"
	# So does the check asked alone (security finding i).
	body=$(curl -s --max-time 5 "http://$p/readyz/informers-synced?verbose")
	[ "$body" = "internal server error: reason withheld" ] || fail "readyz/informers-synced: $body"
	grep -qF '[+]event-loop ok' <<<"$(curl -s --max-time 5 "http://$p/healthz?verbose")" || fail "healthz?verbose"
	# Rights granted while it runs: the informers recover and it becomes ready.
	kubectl -n "$NS" create role reader --verb=get,list,watch \
		--resource=foos.samplecontroller.k8s.io,deployments.apps >/dev/null
	kubectl -n "$NS" create rolebinding reader --role=reader --serviceaccount="$NS:norights" >/dev/null
	until_ok 60 code_is "$p/readyz" 200 || fail "readyz after sync: not 200"
	body=$(curl -s --max-time 5 "http://$p/readyz?verbose")
	grep -qF '[+]informers-synced ok' <<<"$body" || fail "readyz?verbose after sync: $body"
	test "$(http_code "http://$p/healthz")" = 200 || fail "healthz after sync"
	grep -q '"Caches synced"' "$E2E_LOGS/probes.log" || fail "no 'Caches synced' in the log"
	stop_controller probes

	# Two candidates: both ready, leader and standby alike.
	local pa pb
	pa=127.0.0.1:$(free_port); pb=127.0.0.1:$(free_port)
	# shellcheck disable=SC2046
	ops_start probes-a --kubeconfig "$KUBECONFIG" --metrics-bind-address=$pa --health-probe-bind-address=$pa $(le_flags ops-probes)
	# shellcheck disable=SC2046
	ops_start probes-b --kubeconfig "$KUBECONFIG" --metrics-bind-address=$pb --health-probe-bind-address=$pb $(le_flags ops-probes)
	until_ok 20 either_leader "$pa" "$pb" || fail "no leader"
	until_ok 10 ready "$pa" || fail "probes-a not ready"
	until_ok 10 ready "$pb" || fail "probes-b not ready"
	local sb=$pb
	is_leader "$pb" && sb=$pa
	is_leader "$sb" && fail "two leaders"
	body=$(curl -s --max-time 5 "http://$sb/readyz?verbose")
	grep -qF '[+]leader-election ok' <<<"$body" || fail "standby readyz?verbose: $body"
	test "$(http_code "http://$sb/healthz")" = 200 || fail "standby healthz"
	stop_controller probes-a
	stop_controller probes-b
}

# idle_flood SRC ADDR N READY: N connections from SRC to ADDR (HOST:PORT), each
# sending half a request line and then nothing, held until killed (the PID goes to
# OPS_PIDS); READY is written once all are connected.
idle_flood() {
	python3 - "$@" <<'PY' &
import socket, sys, time
src, addr, n, ready = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
host, port = addr.rsplit(":", 1)
socks = []
for _ in range(n):
    s = socket.socket()
    s.bind((src, 0))
    s.connect((host, int(port)))
    try:
        s.send(b"GET /healthz HT")
    except OSError:
        pass  # refused over the per-address limit: it still was a connection
    socks.append(s)
open(ready, "w").write("%d\n" % len(socks))
while True:
    time.sleep(60)
PY
	OPS_PIDS+=($!)
}

# Security finding a: any pod could make the liveness probe fail. 100 idle,
# half-sent connections from one address (127.0.0.2: any 127/8 source reaches
# loopback) to the probe port and as many to the metrics port; /healthz asked from
# another address (127.0.0.1, the kubelet's) is still answered within the kubelet's
# default probe timeout of 1 s, every time, and /metrics still is too.
t_probes_answer_under_idle_flood() {
	ops_setup flood
	local p m i code
	p=127.0.0.1:$(free_port); m=127.0.0.1:$(free_port)
	ops_start flood --kubeconfig "$KUBECONFIG" --health-probe-bind-address=$p --metrics-bind-address=$m
	until_ok 20 code_is "$p/healthz" 200 || fail "healthz never 200"
	idle_flood 127.0.0.2 "$p" 100 "$E2E_LOGS/flood-probes.ready"
	idle_flood 127.0.0.2 "$m" 100 "$E2E_LOGS/flood-metrics.ready"
	until_ok 20 test -s "$E2E_LOGS/flood-probes.ready" || fail "the flood of the probe port did not connect"
	until_ok 20 test -s "$E2E_LOGS/flood-metrics.ready" || fail "the flood of the metrics port did not connect"
	for i in 1 2 3 4 5; do
		code=$(curl -s -o /dev/null --max-time 1 -w '%{http_code}' "http://$p/healthz") || true
		[ "$code" = 200 ] || fail "probe $i: /healthz with 100 idle connections from 127.0.0.2: $code (000: no answer within 1 s)"
		sleep 0.5
	done
	code=$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://$m/metrics") || true
	[ "$code" = 200 ] || fail "/metrics with 100 idle connections from 127.0.0.2: $code"
	rm -f "$E2E_LOGS"/flood-*.ready
	stop_controller flood
}

# Logs: --log-format=json lines are JSON objects with ts, caller and msg. These
# runs at the highest verbosity (admin token, client certificate, minted service
# account token without rights, rejected token) are also the richest input of the
# secret scan, which runs after every other e2e test (tests/e2e/last_secrets.sh).
t_logs_json_at_high_verbosity() {
	ops_setup logs
	# shellcheck disable=SC2046
	ops_start logs-token --kubeconfig "$KUBECONFIG" --log-format=json -v=10 $(le_flags ops-logs)
	kubectl -n "$NS" create deployment foreign --image=busybox --replicas=1 >/dev/null
	apply_foo "$NS" l1 ld1 1
	apply_foo "$NS" lbad foreign 1
	until_ok 30 created_for logs-token l1 || fail "logs-token did not reconcile l1"
	until_ok 30 grep -q '"Error syncing; requeuing"' "$E2E_LOGS/logs-token.log" || fail "no sync error logged for lbad"
	stop_controller logs-token

	ops_start logs-cert --kubeconfig "$KUBECONFIG" --context cert --log-format=json -v=10
	apply_foo "$NS" l2 ld2 1
	until_ok 30 created_for logs-cert l2 || fail "logs-cert did not reconcile l2"
	stop_controller logs-cert

	local kc="$E2E_LOGS/ops-logs.kubeconfig"
	kubectl -n "$NS" create serviceaccount norights >/dev/null
	kubeconfig_token "$kc" "$(mint_token logs norights)"
	ops_start logs-sa --kubeconfig "$kc" --log-format=json -v=10
	until_ok 20 grep -q '"Caches not synced yet"' "$E2E_LOGS/logs-sa.log" || fail "logs-sa did not report the sync failure"
	stop_controller logs-sa
	# A token the API server rejects (its service account is gone): the 401 paths.
	kubectl -n "$NS" create serviceaccount gone >/dev/null
	kubeconfig_token "$kc" "$(mint_token logs-gone gone)"
	kubectl -n "$NS" delete serviceaccount gone >/dev/null
	ops_start logs-401 --kubeconfig "$kc" --log-format=json -v=10
	until_ok 20 grep -q 'Unauthorized' "$E2E_LOGS/logs-401.log" || fail "logs-401 did not report the rejected token"
	stop_controller logs-401

	python3 - "$E2E_LOGS"/logs-{token,cert,sa,401}.log <<'PY' ||
import json, re, sys, time
bad = 0
for path in sys.argv[1:]:
    n = 0
    for i, line in enumerate(open(path, errors="replace"), 1):
        n += 1
        try:
            o = json.loads(line)
        except ValueError as e:
            print("    %s:%d: not JSON (%s): %.120s" % (path, i, e, line))
            bad += 1
            continue
        why = None
        if not isinstance(o, dict):
            why = "not an object"
        elif not isinstance(o.get("ts"), (int, float)) or abs(o["ts"] - time.time()) > 3600:
            why = "ts missing or implausible"
        elif not isinstance(o.get("caller"), str) or not re.fullmatch(r"[\w.+-]+\.c:\d+", o["caller"]):
            why = "caller missing or not file.c:line"
        elif not isinstance(o.get("msg"), str):
            why = "msg missing"
        if why:
            print("    %s:%d: %s: %.120s" % (path, i, why, line))
            bad += 1
    if n < 5:
        print("    %s: only %d lines" % (path, n))
        bad += 1
sys.exit(1 if bad else 0)
PY
		fail "a --log-format=json line is not a JSON object with ts, caller and msg"

}

# A failing Foo (its Deployment belongs to someone else) fails on every retry: the
# Warning is ONE Event whose count grows, not one Event object per failure.
t_events_aggregated_not_multiplied() {
	ops_setup events
	local m
	m=127.0.0.1:$(free_port)
	ops_start events --kubeconfig "$KUBECONFIG" --metrics-bind-address=$m
	kubectl -n "$NS" create deployment foreign --image=busybox --replicas=1 >/dev/null
	apply_foo "$NS" e1 foreign 1
	local sel="involvedObject.name=e1,reason=ErrResourceExists"
	# The recorder writes events.k8s.io/v1 where served: seen through core/v1, its
	# count is series.count (count is for core/v1-written Events).
	ev_count_ge() {
		local c
		c=$(kubectl -n "$NS" get events --field-selector "$sel" -o jsonpath='{range .items[*]}{.count}{.series.count} {end}')
		c=${c% }
		[ -n "$c" ] && [ "${c##* }" -ge "$1" ]
	}
	until_ok 30 ev_count_ge 3 || fail "no ErrResourceExists event with count >= 3"
	local n name c1
	n=$(kubectl -n "$NS" get events --field-selector "$sel" -o name | wc -l)
	test "$n" = 1 || fail "$n ErrResourceExists Event objects for e1, want 1"
	name=$(kubectl -n "$NS" get events --field-selector "$sel" -o jsonpath='{.items[0].metadata.name}')
	c1=$(jp "$NS" "event/$name" '{.count}{.series.count}')
	# The retries go on (with backoff): the same Event counts them.
	until_ok 40 ev_count_ge $((c1 + 1)) || fail "the count stayed at $c1"
	n=$(kubectl -n "$NS" get events --field-selector "$sel" -o name | wc -l)
	test "$n" = 1 || fail "$n ErrResourceExists Event objects for e1 after more retries, want 1"
	test "$(kubectl -n "$NS" get events --field-selector "$sel" -o jsonpath='{.items[0].metadata.name}')" = "$name" ||
		fail "the Event was replaced by another object"
	test "$(jp "$NS" "event/$name" '{.type}')" = Warning || fail "not a Warning"
	grep -q 'Resource "foreign" already exists and is not managed by Foo' <<<"$(jp "$NS" "event/$name" '{.message}')" ||
		fail "message: $(jp "$NS" "event/$name" '{.message}')"
	test "$(jp "$NS" "event/$name" '{.involvedObject.kind}/{.involvedObject.uid}')" = "Foo/$(jp "$NS" foo/e1 '{.metadata.uid}')" ||
		fail "involvedObject is not the Foo"
	# Timestamps have whole seconds; the retries back off over several of them.
	ts_moved() { test "$(jp "$NS" "event/$name" '{.firstTimestamp}{.eventTime}')" != "$(jp "$NS" "event/$name" '{.lastTimestamp}{.series.lastObservedTime}')"; }
	until_ok 20 ts_moved || fail "lastTimestamp not advanced by the repeats"
	# The recorder counted them as patches, not as new posts.
	fle 2 "$(prom_value "$m" events_total outcome=patched)" || fail "events_total{outcome=patched} < 2"
	test "$(prom_value "$m" events_total outcome=failed)" = 0.0 || fail "events failed: $(prom_value "$m" events_total outcome=failed)"
	stop_controller events
}

# Signals: SIGINT stops cleanly (exit 0, lease released). A second signal during a
# shutdown that is stuck (the lease release cannot reach the API server through a
# cut proxy, and would wait up to its 40 s renew deadline) exits 1 at once.
t_signals_sigint_clean_second_signal_exits_1() {
	ops_setup sig
	local pf="$E2E_LOGS/ops-sig.proxyport" kc="$E2E_LOGS/ops-sig.kubeconfig" proxy lf
	lf="--leader-elect --leader-elect-lease-duration=60s --leader-elect-renew-deadline=40s"
	lf="$lf --leader-elect-retry-period=2s --leader-elect-resource-namespace=$NS"
	# shellcheck disable=SC2086
	ops_start sig-int --kubeconfig "$KUBECONFIG" $lf --leader-elect-resource-name=ops-sig-int
	until_ok 30 grep -q '"Started workers"' "$E2E_LOGS/sig-int.log" || fail "sig-int did not start"
	kill -INT "$(cat "$E2E_LOGS/sig-int.pid")"
	wait_exit sig-int 30
	test "$WAIT_RC" = 0 || fail "SIGINT: exit $WAIT_RC, want 0"
	test "$(lease_holder "$NS" ops-sig-int)" = "" || fail "SIGINT did not release the lease"

	rm -f "$pf"
	python3 "$E2E_ROOT/tests/e2e/tcpproxy.py" "127.0.0.1:$API_PORT" "$pf" &
	proxy=$!
	OPS_PIDS+=("$proxy")
	until_ok 10 test -s "$pf" || fail "proxy did not start"
	kubeconfig_via "$kc" "https://127.0.0.1:$(cat "$pf")"
	# shellcheck disable=SC2086
	ops_start sig-twice --kubeconfig "$kc" $lf --leader-elect-resource-name=ops-sig-twice
	until_ok 30 grep -q '"Started workers"' "$E2E_LOGS/sig-twice.log" || fail "sig-twice did not start"
	kill -USR1 "$proxy"
	kill -TERM "$(cat "$E2E_LOGS/sig-twice.pid")"
	until_ok 10 grep -q 'a second signal exits immediately' "$E2E_LOGS/sig-twice.log" ||
		fail "no shutdown after the first SIGTERM"
	sleep 1
	wait_exit sig-twice 1 # must still be shutting down: the release is stuck
	test "$WAIT_RC" = timeout || fail "sig-twice exited ($WAIT_RC) before the second signal: the test proves nothing"
	kill -TERM "$(cat "$E2E_LOGS/sig-twice.pid")"
	wait_exit sig-twice 10
	test "$WAIT_RC" = 1 || fail "second SIGTERM: exit $WAIT_RC, want 1 at once"
	grep -q 'second signal, exiting' "$E2E_LOGS/sig-twice.log" || fail "the second signal's exit is not logged"
}
