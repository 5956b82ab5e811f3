# The controller deployed as a pod, for real: the image built here (make image),
# under a real kubelet with containerd (make node-up), from deploy/ through the
# hack/node overlay. run.sh runs these after hack/node-up.sh, and only as root.
# The t_* functions share one deployment and build on each other: run.sh runs them
# in name order, hence the numbers.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=/dev/null
. "$E2E_ROOT/.local/node/env"

SC_NS=sample-controller
SC_LEASE=sample-controller
FIGURES="$E2E_LOGS/node-figures.txt"

figure() { # figure NAME VALUE: one measured figure, printed and kept for the note
	echo "    figure: $1 = $2"
	echo "$1 = $2" >>"$FIGURES"
}
now_ms() { date +%s%3N; }
# metrics_token: a token allowed to get /metrics (--metrics-secure): of the
# ServiceAccount metrics-scraper, bound to deploy/'s sample-controller-metrics-reader.
metrics_token() {
	kubectl -n "$SC_NS" create serviceaccount metrics-scraper --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	kubectl create clusterrolebinding sample-controller-metrics-scraper \
		--clusterrole=sample-controller-metrics-reader --serviceaccount="$SC_NS:metrics-scraper" \
		--dry-run=client -o yaml | kubectl apply -f - >/dev/null
	# The daemon caches a denial for 30 s: scrape only once RBAC allows it.
	until_ok 20 kubectl auth can-i get /metrics --as="system:serviceaccount:$SC_NS:metrics-scraper" >/dev/null
	kubectl -n "$SC_NS" create token metrics-scraper --duration=10m
}

sc_pods() { # names of the controller's pods that are not being deleted
	kubectl -n "$SC_NS" get pods -l app=sample-controller \
		-o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}'
}
# Pods Running and Ready, on the real node.
ready_pods_on_node() {
	kubectl -n "$SC_NS" get pods -l app=sample-controller -o json | python3 -c '
import json, sys
n = 0
for p in json.load(sys.stdin)["items"]:
    if p["metadata"].get("deletionTimestamp"): continue
    if p["spec"].get("nodeName") != sys.argv[1] or p["status"].get("phase") != "Running": continue
    if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])): n += 1
print(n)' "$NODE_NAME"
}
n_ready_is() { [ "$(ready_pods_on_node)" = "$1" ]; }
# The pod that holds the Lease (identity is "<pod name>_<random>").
leader_pod() {
	local h
	h=$(lease_holder "$SC_NS" "$SC_LEASE")
	[ -n "$h" ] && echo "${h%_*}"
}
has_leader() { [ -n "$(leader_pod)" ]; }
# The Lease holder is one of the pods not being deleted.
# is_sc_pod POD: POD is one of sc_pods. The list is read whole first: under
# pipefail, `sc_pods | grep -q` fails when grep exits at its first match while
# kubectl is still writing (kubectl dies of SIGPIPE), a flake seen in a rollout.
is_sc_pod() { local pods; pods=$(sc_pods) && grep -qx -- "$1" <<<"$pods"; }
new_pod_leads() { local p; p=$(leader_pod) && is_sc_pod "$p"; }

# The host PID of a pod's controller container, from containerd.
container_pid() { # container_pid POD
	local id
	id=$(kubectl -n "$SC_NS" get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')
	id="${id#containerd://}"
	[ -n "$id" ] || return 1
	ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls | awk -v id="$id" '$1 == id { print $2 }'
}

# follow_logs DIR: keep `kubectl logs -f` of every controller container (each
# restart too) in DIR/<pod>.<restarts>.log, until stop_follow. Pods that are
# deleted take their logs with them; these copies let the tests read them after.
follow_logs() {
	FOLLOW_DIR="$1"
	mkdir -p "$FOLLOW_DIR"
	(
		set +eE; trap - ERR
		declare -A seen
		while :; do
			while read -r pod restarts; do
				[ -n "$pod" ] || continue
				k="$pod.$restarts"
				[ -n "${seen[$k]:-}" ] && continue
				seen[$k]=1
				kubectl -n "$SC_NS" logs -f "$pod" >"$FOLLOW_DIR/$k.log" 2>/dev/null &
			done < <(kubectl -n "$SC_NS" get pods -l app=sample-controller -o \
				go-template='{{range .items}}{{$p := .metadata.name}}{{range .status.containerStatuses}}{{if .state.running}}{{$p}} {{.restartCount}}{{"\n"}}{{end}}{{end}}{{end}}' 2>/dev/null)
			sleep 0.3
		done
	) &
	FOLLOW_PID=$!
}
stop_follow() {
	[ -n "${FOLLOW_PID:-}" ] || return 0
	# The loop first, then the `kubectl logs -f` it started (its children, by PID).
	local kids
	kids=$(cat "/proc/$FOLLOW_PID/task/$FOLLOW_PID/children" 2>/dev/null || true)
	kill "$FOLLOW_PID" 2>/dev/null || true
	# shellcheck disable=SC2086
	[ -n "$kids" ] && kill $kids 2>/dev/null || true
	wait "$FOLLOW_PID" 2>/dev/null || true
	FOLLOW_PID=
}

# terminating_namespaces: the namespaces still being deleted, one per line.
terminating_namespaces() {
	kubectl get namespaces -o go-template='{{range .items}}{{if eq .status.phase "Terminating"}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}'
}
no_terminating_namespaces() { [ -z "$(terminating_namespaces)" ]; }

t_node1_apply_ready() {
	: >"$FIGURES"
	# The earlier suites delete their namespaces without waiting. A cluster-wide
	# daemon that starts while they terminate gets the server's own 403 ("unable to
	# create new content in namespace ... because it is being terminated") for the
	# Events and Deployments of their last Foos, which node2's count of 403s cannot
	# tell from an RBAC denial: let them go first (node2 then checks only RBAC if
	# they did not).
	rm -f "$E2E_LOGS/node-ns-terminating"
	if ! until_ok 180 no_terminating_namespaces; then
		terminating_namespaces >"$E2E_LOGS/node-ns-terminating"
		echo "    note: $(wc -l <"$E2E_LOGS/node-ns-terminating") namespaces still terminating after 180 s: $(head -n 3 "$E2E_LOGS/node-ns-terminating" | tr '\n' ' ')"
	fi
	# deploy/ names the image this tree builds.
	local want
	want="sample-controller-c:$(cat "$E2E_ROOT/VERSION")"
	grep -q "image: $want\$" "$E2E_ROOT/deploy/base/deployment.yaml" || fail "deploy/base/deployment.yaml does not name $want"
	local t0 t1
	t0=$(now_ms)
	kubectl apply -k "$E2E_ROOT/hack/node" >/dev/null
	until_ok 180 n_ready_is 2 || fail "2 controller pods not Running and Ready on $NODE_NAME: $(kubectl -n $SC_NS get pods -o wide)"
	t1=$(now_ms)
	figure "apply -k to 2 pods Ready (ms)" $((t1 - t0))
	until_ok 60 has_leader || fail "no pod holds the Lease"
	figure "apply -k to Lease held (ms)" $(($(now_ms) - t0))
	local leader
	leader=$(leader_pod)
	is_sc_pod "$leader" || fail "Lease holder $leader is not one of the pods"

	# What the pods really run as, read from the kernel, not from the spec.
	local pod pid st
	for pod in $(sc_pods); do
		pid=$(container_pid "$pod") || true
		[ -n "$pid" ] || fail "no containerd task for $pod"
		st="/proc/$pid/status"
		grep -Eq '^Uid:\s+65532\s+65532\s+65532\s+65532$' "$st" || fail "$pod: not uid 65532: $(grep ^Uid "$st")"
		grep -Eq '^Gid:\s+65532\s+65532\s+65532\s+65532$' "$st" || fail "$pod: not gid 65532: $(grep ^Gid "$st")"
		grep -Eq '^CapEff:\s+0+$' "$st" || fail "$pod: has capabilities: $(grep ^CapEff "$st")"
		grep -Eq '^CapPrm:\s+0+$' "$st" || fail "$pod: permitted capabilities: $(grep ^CapPrm "$st")"
		grep -Eq '^NoNewPrivs:\s+1$' "$st" || fail "$pod: no_new_privs not set"
		# Seccomp mode 2 = filter (RuntimeDefault).
		grep -Eq '^Seccomp:\s+2$' "$st" || fail "$pod: seccomp is not in filter mode: $(grep ^Seccomp: "$st")"
		grep -Eq '(^|,)ro(,|$)' <<<"$(awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo")" ||
			fail "$pod: root filesystem is not read-only"
		# The pod's service-account token, for the final scan of every log for
		# credentials (tests/e2e/last_secrets.sh).
		mkdir -p "$E2E_LOGS/minted-tokens"
		cat "/proc/$pid/root/var/run/secrets/kubernetes.io/serviceaccount/token" >"$E2E_LOGS/minted-tokens/node-$pod.token" ||
			fail "$pod: no service-account token mounted"
		# Its memory is charged beneath the cgroup node-up ran in.
		grep -q ":memory:$CGROUP_ROOT/" "/proc/$pid/cgroup" || fail "$pod: memory cgroup not under $CGROUP_ROOT: $(grep memory "/proc/$pid/cgroup")"
	done
}

t_node2_incluster_foo() {
	local leader ns
	leader=$(leader_pod)
	kubectl -n "$SC_NS" logs "$leader" >"$E2E_LOGS/node-leader.log"
	grep -q '"Starting".*config="in-cluster"' "$E2E_LOGS/node-leader.log" ||
		fail "the controller in the pod does not say it uses in-cluster credentials: $(grep -m1 Starting "$E2E_LOGS/node-leader.log")"
	ns=$(new_ns node-foo)
	# node4 and node6 reuse this Foo; they report their own failure if node2's fails.
	echo "$ns" >"$E2E_LOGS/node-foo-ns"
	apply_foo "$ns" nfoo nweb 2
	until_ok 60 jp_eq "$ns" deploy/nweb '{.spec.replicas}' 2 || fail "no Deployment nweb with 2 replicas"
	local uid
	uid=$(jp "$ns" foo/nfoo '{.metadata.uid}')
	test "$(jp "$ns" deploy/nweb '{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].uid}/{.metadata.ownerReferences[0].controller}')" = "Foo/$uid/true" ||
		fail "Deployment nweb is not owned by Foo nfoo"
	until_ok 90 kubectl -n "$ns" wait --for=condition=Ready --timeout=2s foo/nfoo || fail "Foo nfoo never Ready"
	kubectl -n "$ns" patch foo nfoo --type merge -p '{"spec":{"replicas":3}}' >/dev/null
	until_ok 60 jp_eq "$ns" deploy/nweb '{.spec.replicas}' 3 || fail "Deployment did not follow the scale to 3"
	until_ok 90 jp_eq "$ns" foo/nfoo '{.status.availableReplicas}' 3 || fail "status did not follow to 3"
	# Only deploy/'s RBAC: not one request was forbidden, except by a namespace
	# being deleted (the server's NamespaceTerminating cause, not authorization).
	kubectl -n "$SC_NS" logs "$leader" >"$E2E_LOGS/node-leader.log"
	local denied
	denied=$(grep -i 'forbidden' "$E2E_LOGS/node-leader.log" | grep -v 'because it is being terminated' | head -n 3 || true)
	[ -z "$denied" ] || fail "a request was forbidden: $denied"
	# The Foo was validated (its spec's patterns) in C.UTF-8, loaded from the image
	# (Dockerfile): no warning that patterns match bytes, and the locale mapped.
	! grep -q 'No C.UTF-8 locale' "$E2E_LOGS/node-leader.log" ||
		fail "the pod has no C.UTF-8 locale: $(grep -m1 'No C.UTF-8 locale' "$E2E_LOGS/node-leader.log")"
	local lpid
	lpid=$(container_pid "$leader") || true
	[ -n "$lpid" ] || fail "no containerd task for $leader"
	grep -q '/usr/lib/locale/C.utf8/LC_CTYPE' "/proc/$lpid/maps" ||
		fail "$leader has not loaded /usr/lib/locale/C.utf8/LC_CTYPE after validating a Foo"
	local port PROM_TOKEN
	PROM_TOKEN=$(metrics_token)
	port=$(free_port)
	local scrape="$E2E_LOGS/node-leader-metrics-2.txt"
	pf_start "$leader" "$port" node-pf-leader
	until_ok 20 curl -skf -o "$scrape" -H "Authorization: Bearer $PROM_TOKEN" "https://127.0.0.1:$port/metrics" || { pf_stop; fail "no /metrics through port-forward"; }
	# Secure metrics: the 200 above needed the daemon's TokenReview and
	# SubjectAccessReview to succeed under deploy/'s RBAC (a failed review is 500);
	# no token is 401 (a new port-forward if kubectl gave up on the first).
	kill -0 "$PF_PID" 2>/dev/null || { pf_stop; pf_start "$leader" "$port" node-pf-leader-2; }
	until_ok 20 http_code_is 401 -k "https://127.0.0.1:$port/metrics" ||
		{ pf_stop; fail "/metrics without a token is not 401: $(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/metrics")"; }
	pf_stop
	local f
	f=$(prom_value "file:$scrape" rest_client_requests_total code=403)
	if [ -f "$E2E_LOGS/node-ns-terminating" ]; then
		echo "    note: rest_client_requests_total{code=403} = $f not checked: namespaces were terminating when the pods started"
	else
		[ "$f" = absent ] || [ "$f" = 0.0 ] || fail "rest_client_requests_total{code=403} = $f"
	fi
}

# pf_start POD PORT NAME: kubectl port-forward to the pod's 8443 in the background
# (PF_PID), its output in $E2E_LOGS/NAME.log. pf_stop ends it; kubectl may already
# have exited on its own (it gives up on the whole forward when one connection is
# reset, kubernetes/kubernetes#74551), which is not a failure of the daemon once
# the scrapes through it succeeded, so pf_stop only says so.
# http_code_is CODE CURL_ARGS...: the answer's status is CODE (000, no answer yet, is not).
http_code_is() {
	local want=$1; shift
	[ "$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$@")" = "$want" ]
}
pf_start() {
	PF_LOG="$E2E_LOGS/$3.log"
	kubectl -n "$SC_NS" port-forward "pod/$1" "$2:8443" >"$PF_LOG" 2>&1 &
	PF_PID=$!
}
pf_stop() {
	if kill "$PF_PID" 2>/dev/null; then
		wait "$PF_PID" 2>/dev/null || true
	else
		wait "$PF_PID" 2>/dev/null || true
		echo "    note: kubectl port-forward had exited: $(tail -n 2 "$PF_LOG" | tr '\n' ' ')"
	fi
}

# probe_succeeded POD Liveness|Readiness: the kubelet's prober metrics count at
# least one successful probe of that kind.
probe_succeeded() {
	kubectl get --raw "/api/v1/nodes/$NODE_NAME/proxy/metrics/probes" >"$E2E_LOGS/node-probes.txt" || return 1
	"$PROM_PY" - "$E2E_LOGS/node-probes.txt" "$1" "$2" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
text, pod, kind = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
n = sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
        if s.name == "prober_probe_total" and s.labels.get("pod") == pod
        and s.labels.get("probe_type") == kind and s.labels.get("result") == "successful")
sys.exit(0 if n >= 1 else 1)
PY
}

t_node3_probes_metrics() {
	local pod port
	# The kubelet's own prober counts: liveness (/healthz) and readiness (/readyz)
	# succeeded on every controller pod (liveness starts after its initial delay).
	for pod in $(sc_pods); do
		for kind in Liveness Readiness; do
			until_ok 40 probe_succeeded "$pod" "$kind" ||
				fail "kubelet has no successful $kind probe of $pod: $(grep "pod=\"$pod\"" "$E2E_LOGS/node-probes.txt" | grep prober_probe_total)"
		done
	done
	test "$(kubectl -n "$SC_NS" get deploy sample-controller -o jsonpath='{.spec.template.spec.containers[0].livenessProbe.httpGet.path}{.spec.template.spec.containers[0].readinessProbe.httpGet.path}')" = /healthz/readyz ||
		fail "probes are not /healthz and /readyz"
	# /metrics through port-forward parses (Prometheus text parser) and has the
	# controller's own families.
	pod=$(leader_pod)
	port=$(free_port)
	local PROM_TOKEN
	PROM_TOKEN=$(metrics_token)
	# One scrape kept in a file, then read: the checks do not depend on the
	# port-forward living through several connections.
	local scrape="$E2E_LOGS/node-leader-metrics.txt"
	pf_start "$pod" "$port" node-pf-metrics
	until_ok 20 curl -skf -o "$scrape" -H "Authorization: Bearer $PROM_TOKEN" "https://127.0.0.1:$port/metrics" || { pf_stop; fail "no /metrics through port-forward"; }
	pf_stop
	prom_eq "file:$scrape" 1 leader_election_master_status || fail "leader's master_status is not 1"
	prom_ge "file:$scrape" 1 controller_runtime_reconcile_total || fail "no reconcile counted"
	# The pod's memory working set as the kubelet reports it.
	local ws
	ws=$(kubectl get --raw "/api/v1/nodes/$NODE_NAME/proxy/stats/summary" | python3 -c '
import json, sys
for p in json.load(sys.stdin)["pods"]:
    if p["podRef"]["name"] == sys.argv[1]:
        print(sum(c["memory"]["workingSetBytes"] for c in p["containers"]))' "$pod")
	[ -n "$ws" ] || fail "no /stats/summary entry for $pod"
	figure "leader working set, idle (MiB)" "$(python3 -c "print(round($ws/1048576, 1))")"
}

# Lease history while something happens: one "holder transitions" line per change.
watch_lease() { # watch_lease FILE: poll the Lease every 0.2 s into FILE until stop
	(
		set +eE; trap - ERR
		last=""
		while :; do
			h=$(lease_holder "$SC_NS" "$SC_LEASE")
			if [ "$h" != "$last" ]; then echo "$(now_ms) $h" >>"$1"; last="$h"; fi
			sleep 0.2
		done
	) &
	LEASE_PID=$!
}

t_node4_leader_pod_delete() {
	local old ns standby t0 t1 grace
	ns=$(cat "$E2E_LOGS/node-foo-ns")
	old=$(leader_pod)
	standby=$(sc_pods | grep -vx "$old" | sed -n 1p)
	[ -n "$standby" ] || fail "no standby pod"
	follow_logs "$E2E_LOGS/node-delete"
	sleep 1
	# The old leader's last container status, as the kubelet reports it before the
	# pod object goes away.
	kubectl -n "$SC_NS" get pod "$old" -w -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}{" "}{.status.containerStatuses[0].state.terminated.finishedAt}{"\n"}' \
		>"$E2E_LOGS/node-delete-status.txt" 2>/dev/null &
	local w=$!
	t0=$(now_ms)
	kubectl -n "$SC_NS" delete pod "$old" --wait=false >/dev/null
	# Meanwhile the Foo changes: whoever leads next must act on it.
	kubectl -n "$ns" patch foo nfoo --type merge -p '{"spec":{"replicas":1}}' >/dev/null
	until_ok 60 bash -c "h=\$(kubectl -n $SC_NS get lease $SC_LEASE -o jsonpath='{.spec.holderIdentity}'); [ -n \"\$h\" ] && [ \"\${h%_*}\" != $old ]" ||
		fail "no new leader after deleting $old"
	t1=$(now_ms)
	figure "leader takeover after pod delete (ms)" $((t1 - t0))
	# The standby usually wins; the Deployment's replacement pod may win the race
	# for the released Lease too. Either way not the old one, and only one.
	if [ "$(leader_pod)" = "$standby" ]; then
		echo "    the standby $standby took over"
	else
		echo "    the replacement pod $(leader_pod) took over (the standby $standby lost the race)"
	fi
	# Within the lease duration (15 s in deploy/): the old leader released it.
	[ $((t1 - t0)) -lt 15000 ] || fail "takeover took $((t1 - t0)) ms, longer than the lease duration"
	grace=$(kubectl -n "$SC_NS" get deploy sample-controller -o jsonpath='{.spec.template.spec.terminationGracePeriodSeconds}')
	until_ok $((grace + 15)) bash -c "! kubectl -n $SC_NS get pod $old" || fail "$old still exists after the grace period"
	kill "$w" 2>/dev/null || true
	wait "$w" 2>/dev/null || true
	stop_follow
	grep -Eq '^0 ' "$E2E_LOGS/node-delete-status.txt" ||
		fail "the kubelet did not record exit code 0 for $old: $(sort -u "$E2E_LOGS/node-delete-status.txt" | tr '\n' ';')"
	grep -q 'released lease' "$E2E_LOGS/node-delete/$old".*.log ||
		fail "$old did not log that it released the lease: $(tail -n 5 "$E2E_LOGS/node-delete/$old".*.log)"
	until_ok 60 jp_eq "$ns" deploy/nweb '{.spec.replicas}' 1 || fail "the Foo changed during the takeover did not converge"
	until_ok 90 jp_eq "$ns" foo/nfoo '{.status.availableReplicas}' 1 || fail "its status did not converge"
	until_ok 120 n_ready_is 2 || fail "the Deployment did not bring back 2 Ready pods"
}

# leading_overlap DIR: from every log in DIR, the intervals each container led
# (klog time of "successfully acquired lease" to "released lease"/"Stopping" or
# its last line); fails when two intersect.
leading_overlap() {
	python3 - "$1" <<'PY'
import glob, re, sys
ts = re.compile(r'^[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+)')
iv = []
for f in sorted(glob.glob(sys.argv[1] + "/*.log")):
    start = end = last = None
    for line in open(f, errors="replace"):
        m = ts.match(line)
        if not m: continue
        t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
        last = t
        if "successfully acquired lease" in line: start = t
        if start is not None and end is None and ("released lease" in line or "stopped leading" in line):
            end = t
    if start is not None:
        iv.append((start, end if end is not None else last, f))
iv.sort()
for a, b in zip(iv, iv[1:]):
    if b[0] < a[1]:
        print("overlap: %s led %.3f-%.3f, %s from %.3f" % (a[2], a[0], a[1], b[2], b[0]))
        sys.exit(1)
print("%d leading intervals, none overlap" % len(iv))
PY
}

t_node5_rolling_update() {
	local base tag
	base="${NODE_IMAGE}"
	tag="$base-rollout"
	ctr --address "$CONTAINERD_SOCK" -n k8s.io images tag --force "$base" "$tag" >/dev/null
	follow_logs "$E2E_LOGS/node-rollout"
	watch_lease "$E2E_LOGS/node-rollout-lease.txt"
	sleep 1
	kubectl -n "$SC_NS" set image deploy/sample-controller "controller=${tag#docker.io/library/}" >/dev/null
	kubectl -n "$SC_NS" rollout status deploy/sample-controller --timeout=240s >/dev/null ||
		{ kill "$LEASE_PID"; wait "$LEASE_PID" 2>/dev/null; stop_follow; fail "rollout did not finish"; }
	# The Lease may hop from old pod to old pod before it reaches a new one: the
	# leader, stopped first, releases it; the old standby, still running, takes it;
	# it releases in turn when the rollout stops it. rollout status does not wait for
	# that (terminating pods no longer count in status.replicas), so wait for a new
	# pod to lead (a fixed wait once caught the old standby still leading).
	until_ok 90 new_pod_leads || true
	kill "$LEASE_PID" 2>/dev/null || true
	wait "$LEASE_PID" 2>/dev/null || true
	stop_follow
	local pod
	for pod in $(sc_pods); do
		test "$(kubectl -n "$SC_NS" get pod "$pod" -o jsonpath='{.spec.containers[0].image}')" = "${tag#docker.io/library/}" ||
			fail "$pod does not run the new image"
	done
	is_sc_pod "$(leader_pod)" || fail "the Lease is not held by a new pod: $(lease_holder "$SC_NS" "$SC_LEASE")"
	leading_overlap "$E2E_LOGS/node-rollout" || fail "two controllers led at once"
	echo "    lease holders during the rollout:"
	sed 's/^/      /' "$E2E_LOGS/node-rollout-lease.txt"
}

t_node6_kill9_restarts() {
	local pod pid r0 ns
	ns=$(cat "$E2E_LOGS/node-foo-ns")
	pod=$(leader_pod)
	r0=$(kubectl -n "$SC_NS" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].restartCount}')
	pid=$(container_pid "$pod")
	[ -n "$pid" ] || fail "no process for $pod"
	kill -9 "$pid"
	until_ok 90 bash -c "[ \"\$(kubectl -n $SC_NS get pod $pod -o jsonpath='{.status.containerStatuses[0].restartCount}')\" -gt $r0 ]" ||
		fail "the kubelet did not restart $pod's container"
	test "$(kubectl -n "$SC_NS" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].lastState.terminated.exitCode}')" = 137 ||
		fail "last state is not a SIGKILL exit"
	until_ok 120 n_ready_is 2 || fail "not 2 Ready pods after the restart"
	until_ok 60 has_leader || fail "no leader after the restart"
	# It recovers: a change is acted on again.
	kubectl -n "$ns" patch foo nfoo --type merge -p '{"spec":{"replicas":2}}' >/dev/null
	until_ok 60 jp_eq "$ns" deploy/nweb '{.spec.replicas}' 2 || fail "the Foo was not reconciled after the restart"
	until_ok 90 jp_eq "$ns" foo/nfoo '{.status.availableReplicas}' 2 || fail "its status did not converge"
}

# The bucket Leases of the sharded install: "<held> <distinct holders> <holder pods>",
# a holder's identity being "<pod name>_<random>".
sharded_holders() {
	kubectl -n "$SC_NS" get leases -o json | python3 -c '
import json, sys
held = {}
for l in json.load(sys.stdin)["items"]:
    if l["metadata"]["name"].startswith("sample-controller-bucket-"):
        h = l["spec"].get("holderIdentity") or ""
        if h:
            held[l["metadata"]["name"]] = h.rsplit("_", 1)[0]
print(len(held), len(set(held.values())), " ".join(sorted(set(held.values()))))'
}
# All 32 buckets held, by three pods that are the current ones.
three_share() {
	local h p
	h=$(sharded_holders)
	# shellcheck disable=SC2086
	set -- $h
	[ "$1" = 32 ] && [ "$2" = 3 ] || return 1
	shift 2
	for p in "$@"; do is_sc_pod "$p" || return 1; done
}

# deploy/sharded applied over the running install, as a user switching to it: the
# Deployment rolls to three active replicas that split the 32 buckets between them
# (the local control plane runs without ShardedListAndWatch: each filters on its
# side), and a Foo is still reconciled.
t_node7_sharded() {
	local t0 ns
	t0=$(now_ms)
	kubectl apply -k "$E2E_ROOT/hack/node/sharded" >/dev/null
	until_ok 180 n_ready_is 3 || fail "3 sharded pods not Running and Ready: $(kubectl -n $SC_NS get pods -o wide)"
	until_ok 120 three_share || fail "the buckets are not shared by the 3 pods: $(sharded_holders)"
	figure "apply -k deploy/sharded to 3 pods Ready sharing 32 buckets (ms)" $(($(now_ms) - t0))
	echo "    sharded: $(sharded_holders)"
	ns=$(cat "$E2E_LOGS/node-foo-ns")
	kubectl -n "$ns" patch foo nfoo --type merge -p '{"spec":{"replicas":3}}' >/dev/null
	until_ok 60 jp_eq "$ns" deploy/nweb '{.spec.replicas}' 3 || fail "the Foo was not reconciled by the sharded replicas"
	until_ok 90 jp_eq "$ns" foo/nfoo '{.status.availableReplicas}' 3 || fail "its status did not converge"
}

# Last: the deployment goes away cleanly (the Lease is released on the way).
t_node8_teardown() {
	local ns
	ns=$(cat "$E2E_LOGS/node-foo-ns" 2>/dev/null || true)
	[ -n "$ns" ] && kubectl delete namespace "$ns" --wait=false >/dev/null
	kubectl -n "$SC_NS" delete deploy sample-controller --wait=true --timeout=90s >/dev/null
	until_ok 90 bash -c "[ -z \"\$(kubectl -n $SC_NS get pods -o name)\" ]" || fail "controller pods left behind"
	# Not `delete -k`: that would delete the CRD, and every Foo with it.
	kubectl delete namespace "$SC_NS" --wait=false >/dev/null
	kubectl delete clusterrolebinding,clusterrole sample-controller sample-controller-sharding \
		--ignore-not-found >/dev/null
}
