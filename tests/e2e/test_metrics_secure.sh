# Secure metrics end to end, on the real local control plane: the daemon runs as
# its ServiceAccount with deploy/'s RBAC and --metrics-secure (the default), and
# the API server's TokenReview/SubjectAccessReview decide: an allowed token 200,
# a ServiceAccount without the role 403, no token or a bad one 401, a daemon that
# may not create reviews 500; plain HTTP on the HTTPS port fails; probes stay
# plain HTTP; --metrics-cert-dir serves the given certificate, and a replaced one
# without a restart. A flood of made-up tokens is reviewed through a client of
# its own, within a rate limit (429 above it), and leaves the reconcile path's
# client and the real scraper alone.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MS_NAMES=()
MS_CLUSTER=()   # cluster-scoped objects this test made: KIND/NAME
MS_TMP=""
ms_cleanup() {
	local rc="$1" n
	for n in "${MS_NAMES[@]}"; do
		[ -f "$E2E_LOGS/$n.pid" ] || continue
		if [ "$rc" != 0 ]; then
			echo "--- last lines of $n.log" >&2
			tail -n 15 "$E2E_LOGS/$n.log" | cut -c1-400 >&2
		fi
		kill -9 "$(cat "$E2E_LOGS/$n.pid")" 2>/dev/null || true
		rm -f "$E2E_LOGS/$n.pid"
	done
	for n in "${MS_CLUSTER[@]}"; do kubectl delete "$n" --wait=false >/dev/null 2>&1; done
	[ -n "${NS:-}" ] && kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1
	[ -n "$MS_TMP" ] && rm -rf "$MS_TMP"
	return 0
}
ms_setup() { # ms_setup NAME
	ensure_crd
	NS=$(new_ns "e2e-msec-$1")
	MS_TMP=$(mktemp -d)
	trap 'ms_cleanup $?' EXIT
}
ms_start() { # ms_start NAME ARGS...: the daemon, secure, restricted to $NS
	local name="$1"; shift
	MS_NAMES+=("$name")
	start_controller "$name" --namespace "$NS" --metrics-secure=true "$@"
}

# https_code ADDR [TOKEN]: the status of GET https://ADDR/metrics (body to $MS_TMP/body).
https_code() {
	local addr="$1" tok="${2:-}" h=()
	[ -n "$tok" ] && h=(-H "Authorization: Bearer $tok")
	curl -sk --max-time 10 "${h[@]}" -o "$MS_TMP/body" -D "$MS_TMP/headers" \
		-w '%{http_code}' "https://$addr/metrics"
}
expect_code() { # expect_code WANT ADDR [TOKEN]
	local got; got=$(https_code "$2" "${3:-}") || true
	[ "$got" = "$1" ] || fail "GET https://$2/metrics ${3:+with a token }gave $got, want $1: $(head -c 300 "$MS_TMP/body")"
}
# sa_token NAME: a token of ServiceAccount NAME in $NS, made if needed.
sa_token() {
	kubectl -n "$NS" get serviceaccount "$1" >/dev/null 2>&1 ||
		kubectl -n "$NS" create serviceaccount "$1" >/dev/null
	kubectl -n "$NS" create token "$1" --duration=1h
}
# The served certificate's SHA-256 fingerprint.
served_fingerprint() { # served_fingerprint ADDR
	openssl s_client -connect "$1" -servername localhost </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256
}
serves() { test "$(served_fingerprint "$1")" = "$2"; } # serves ADDR FINGERPRINT

t_metrics_secure_reviews() {
	ms_setup rev
	local m p ctl_kc="$MS_TMP/controller.kubeconfig" ok_tok no_tok
	m=127.0.0.1:$(free_port); p=127.0.0.1:$(free_port)
	# The daemon as deployed: its ServiceAccount and exactly deploy/'s RBAC.
	kubectl apply -f "$E2E_ROOT/deploy/base/namespace.yaml" -f "$E2E_ROOT/deploy/base/serviceaccount.yaml" -f "$E2E_ROOT/deploy/cluster/rbac.yaml" \
		-f "$E2E_ROOT/deploy/base/metrics-rbac.yaml" >/dev/null
	kubeconfig_token "$ctl_kc" "$(kubectl -n sample-controller create token sample-controller --duration=1h)"
	# A scraper bound to the metrics-reader role, and one without it.
	ok_tok=$(sa_token scraper)
	no_tok=$(sa_token nobody)
	kubectl create clusterrolebinding "$NS-scraper" --clusterrole=sample-controller-metrics-reader \
		--serviceaccount="$NS:scraper" >/dev/null
	MS_CLUSTER+=("clusterrolebinding/$NS-scraper")
	# The daemon caches a denial for 30 s: scrape only once RBAC allows it.
	until_ok 20 kubectl auth can-i get /metrics --as="system:serviceaccount:$NS:scraper" ||
		fail "RBAC never allowed the scraper"

	ms_start rev --kubeconfig "$ctl_kc" --metrics-bind-address="$m" --health-probe-bind-address="$p"
	until_ok 30 curl -sk --max-time 2 -o /dev/null "https://$m/metrics" || fail "no HTTPS on $m"
	grep -q 'Serving metrics over HTTPS' "$E2E_LOGS/rev.log" || fail "no start line for HTTPS"

	until_ok 20 test "$(https_code "$m" "$ok_tok")" = 200 || fail "allowed token: $(https_code "$m" "$ok_tok")"
	grep -qi '^content-type: text/plain; version=0.0.4' "$MS_TMP/headers" || fail "content type"
	"$PROM_PY" - "$MS_TMP/body" <<'PY' || fail "/metrics over HTTPS is not valid exposition text"
import sys
from prometheus_client.parser import text_string_to_metric_families
names = {f.name for f in text_string_to_metric_families(open(sys.argv[1]).read())}
for want in ("rest_client_requests", "process_start_time_seconds"):
    assert want in names, (want, sorted(names)[:20])
PY
	expect_code 403 "$m" "$no_tok"
	grep -q "Authorization denied for user system:serviceaccount:$NS:nobody" "$MS_TMP/body" ||
		fail "403 body: $(cat "$MS_TMP/body")"
	expect_code 401 "$m"
	grep -qx Unauthorized "$MS_TMP/body" || fail "401 body: $(cat "$MS_TMP/body")"
	expect_code 401 "$m" "not-a-token"
	expect_code 401 "$m" "$ok_tok.tampered"
	# Answers are cached: the same allowed token again is still 200.
	expect_code 200 "$m" "$ok_tok"

	# Plain HTTP on the HTTPS port gets no HTTP answer.
	local rc=0 code
	code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://$m/metrics") || rc=$?
	[ "$rc" != 0 ] && [ "$code" = 000 ] || fail "plain HTTP on $m answered $code (curl rc $rc)"
	# The self-signed certificate names localhost and 127.0.0.1.
	openssl s_client -connect "$m" </dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName \
		>"$MS_TMP/san" || fail "no certificate from $m"
	grep -q 'DNS:localhost' "$MS_TMP/san" && grep -q 'IP Address:127.0.0.1' "$MS_TMP/san" ||
		fail "SANs: $(cat "$MS_TMP/san")"
	# Probes: plain HTTP, no token.
	[ "$(curl -s --max-time 5 "http://$p/healthz")" = ok ] || fail "/healthz over plain HTTP"
	until_ok 30 test "$(curl -s --max-time 5 "http://$p/readyz")" = ok || fail "/readyz over plain HTTP"
	! grep -q 'Authentication failed\|Authorization failed' "$E2E_LOGS/rev.log" ||
		fail "review errors logged: $(grep -m1 'failed' "$E2E_LOGS/rev.log")"
	stop_controller rev

	# Without the metrics-auth binding the daemon cannot create reviews: 500, and
	# a log line that says why.
	local bare_kc="$MS_TMP/bare.kubeconfig"
	kubectl -n "$NS" create serviceaccount bare >/dev/null
	kubectl create clusterrolebinding "$NS-bare" --clusterrole=sample-controller \
		--serviceaccount="$NS:bare" >/dev/null
	MS_CLUSTER+=("clusterrolebinding/$NS-bare")
	kubeconfig_token "$bare_kc" "$(kubectl -n "$NS" create token bare --duration=1h)"
	m=127.0.0.1:$(free_port)
	ms_start bare --kubeconfig "$bare_kc" --metrics-bind-address="$m"
	until_ok 30 curl -sk --max-time 2 -o /dev/null "https://$m/metrics" || fail "no HTTPS on $m"
	expect_code 500 "$m" "$ok_tok"
	grep -qx 'Authentication failed' "$MS_TMP/body" || fail "500 body: $(cat "$MS_TMP/body")"
	until_ok 5 grep -q 'Authentication failed: cannot review.*tokenreviews' "$E2E_LOGS/bare.log" ||
		fail "no log line for the failed review"
	stop_controller bare
}

# ms_scrape ADDR TOKEN FILE: GET /metrics into FILE; fails unless 200.
ms_scrape() {
	local code
	code=$(curl -sk --max-time 20 -H "Authorization: Bearer $2" -o "$3" -w '%{http_code}' \
		"https://$1/metrics") || true
	[ "$code" = 200 ] || fail "scrape gave $code: $(head -c 200 "$3")"
}
# The reconcile path's client, from a scrape kept in FILE: its TokenReviews and
# SubjectAccessReviews, and how many of its rate-limiter waits were longer than
# the first bucket (5 ms).
ms_client_figures() { # ms_client_figures FILE
	local all fast
	all=$(prom_value "file:$1" rest_client_rate_limiter_duration_seconds_count)
	fast=$(prom_value "file:$1" rest_client_rate_limiter_duration_seconds_bucket le=0.005)
	echo "tokenreviews=$(prom_value "file:$1" rest_client_resource_requests_total resource=tokenreviews)" \
		"sars=$(prom_value "file:$1" rest_client_resource_requests_total resource=subjectaccessreviews)" \
		"waited=$("$PROM_PY" -c 'import sys; print(int(float(sys.argv[1]) - float(sys.argv[2])))' "$all" "$fast")"
}

# 1,000 made-up tokens while the controller reconciles: the reviews go through a
# client of their own (the controller's client sends none and its rate limiter
# makes nobody wait), the ones over the review rate get 429 with Retry-After
# instead of a review, and the authorised scraper is served during and after.
t_metrics_secure_token_flood() {
	ms_setup flood
	local m ctl_kc="$MS_TMP/controller.kubeconfig" ok_tok i before after
	m=127.0.0.1:$(free_port)
	kubectl apply -f "$E2E_ROOT/deploy/base/namespace.yaml" -f "$E2E_ROOT/deploy/base/serviceaccount.yaml" \
		-f "$E2E_ROOT/deploy/cluster/rbac.yaml" -f "$E2E_ROOT/deploy/base/metrics-rbac.yaml" >/dev/null
	kubeconfig_token "$ctl_kc" "$(kubectl -n sample-controller create token sample-controller --duration=1h)"
	ok_tok=$(sa_token scraper)
	kubectl create clusterrolebinding "$NS-scraper" --clusterrole=sample-controller-metrics-reader \
		--serviceaccount="$NS:scraper" >/dev/null
	MS_CLUSTER+=("clusterrolebinding/$NS-scraper")
	until_ok 20 kubectl auth can-i get /metrics --as="system:serviceaccount:$NS:scraper" ||
		fail "RBAC never allowed the scraper"
	ms_start flood --kubeconfig "$ctl_kc" --metrics-bind-address="$m" -v=2
	until_ok 30 curl -sk --max-time 2 -o /dev/null "https://$m/metrics" || fail "no HTTPS on $m"
	until_ok 30 test "$(https_code "$m" "$ok_tok")" = 200 || fail "scraper: $(https_code "$m" "$ok_tok")"
	for i in 1 2 3; do apply_foo "$NS" "pre-$i" "pre-$i-dep" 1; done
	until_ok 60 jp_eq "$NS" deployment/pre-3-dep '{.spec.replicas}' 1 || fail "no reconcile before the flood"
	ms_scrape "$m" "$ok_tok" "$MS_TMP/before"
	before=$(ms_client_figures "$MS_TMP/before")

	# The flood, 8 at a time, while Foos are created and the scraper scrapes: 8
	# clients, each from an address of its own (127.0.0.11-18) and one request at a
	# time. Not 8 from 127.0.0.1: the server takes at most 8 connections per address
	# (server.c, PER_IP_LIMIT), and 8 flooders beside the scraper on one address made
	# some connections refused (curl's 000) -- this tests the review gate, not that cap.
	"$PROM_PY" -c 'import secrets
for _ in range(1000): print(secrets.token_urlsafe(24))' >"$MS_TMP/tokens"
	split -n r/8 "$MS_TMP/tokens" "$MS_TMP/tokens."
	local flood=() src=11 f
	for f in "$MS_TMP"/tokens.??; do
		( while read -r t; do
			curl -sk --interface "127.0.0.$src" --max-time 30 -o /dev/null \
				-H "Authorization: Bearer $t" -w '%{http_code} %header{retry-after}\n' \
				"https://$m/metrics" 2>/dev/null || true
		done <"$f" ) >"$f.codes" &
		flood+=($!)
		src=$((src + 1))
	done
	( for i in 1 2 3 4 5 6 7 8 9 10; do
		curl -sk --max-time 20 -H "Authorization: Bearer $ok_tok" -o /dev/null \
			-w '%{http_code}\n' "https://$m/metrics" || echo 000
		sleep 0.3
	done ) >"$MS_TMP/scrapes" &
	local scrapes=$!
	for i in 1 2 3; do apply_foo "$NS" "during-$i" "during-$i-dep" 1; done
	wait "${flood[@]}" || true
	wait "$scrapes" || true
	cat "$MS_TMP"/tokens.??.codes >"$MS_TMP/codes"
	until_ok 60 jp_eq "$NS" deployment/during-3-dep '{.spec.replicas}' 1 ||
		fail "no reconcile during the flood"
	ms_scrape "$m" "$ok_tok" "$MS_TMP/after"
	after=$(ms_client_figures "$MS_TMP/after")

	local n429 n401 nother
	n429=$(grep -c '^429 ' "$MS_TMP/codes" || true)
	n401=$(grep -c '^401 ' "$MS_TMP/codes" || true)
	nother=$(grep -vc '^429 \|^401 ' "$MS_TMP/codes" || true)
	echo "flood: $(wc -l <"$MS_TMP/codes") answers: $n401 x 401, $n429 x 429, $nother other;" \
		"scraper during: $(sort "$MS_TMP/scrapes" | uniq -c | tr -s ' \n' ' ');" \
		"controller client before: $before, after: $after;" \
		"gate: $(prom_value "file:$MS_TMP/after" metrics_auth_token_reviews_total) token reviews," \
		"$(prom_value "file:$MS_TMP/after" metrics_auth_throttled_total) throttled" >&2
	[ "$(wc -l <"$MS_TMP/codes")" = 1000 ] || fail "flood: $(wc -l <"$MS_TMP/codes") answers"
	[ "$nother" = 0 ] || fail "flood answers other than 401/429: $(grep -v '^429 \|^401 ' "$MS_TMP/codes" | sort | uniq -c | head)"
	[ "$n429" -gt 0 ] || fail "no 429 among the flood's answers"
	[ -z "$(grep '^429 ' "$MS_TMP/codes" | grep -v '^429 [1-9][0-9]*$')" ] ||
		fail "a 429 without Retry-After: $(grep '^429 ' "$MS_TMP/codes" | grep -v '^429 [1-9]' | head -1)"
	[ "$(grep -c '^200$' "$MS_TMP/scrapes")" = 10 ] ||
		fail "the scraper during the flood: $(sort "$MS_TMP/scrapes" | uniq -c | tr -s ' \n' ' ')"
	[ "$after" = "$before" ] || fail "the controller's client carried reviews or waited: before $before, after $after"
	prom_ge "file:$MS_TMP/after" 1 metrics_auth_throttled_total || fail "metrics_auth_throttled_total"
	expect_code 200 "$m" "$ok_tok"
	stop_controller flood
}

t_metrics_secure_cert_dir() {
	ms_setup cert
	local m dir="$MS_TMP/certs" want got tok
	mkdir -p "$dir"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=e2e-metrics -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
		-keyout "$dir/tls.key" -out "$dir/tls.crt" 2>/dev/null
	want=$(openssl x509 -in "$dir/tls.crt" -noout -fingerprint -sha256)
	tok=$(admin_token)
	m=127.0.0.1:$(free_port)
	ms_start cert --kubeconfig "$KUBECONFIG" --metrics-bind-address="$m" --metrics-cert-dir="$dir"
	until_ok 30 curl -sk --max-time 2 -o /dev/null "https://$m/metrics" || fail "no HTTPS on $m"
	got=$(served_fingerprint "$m")
	[ "$got" = "$want" ] || fail "served certificate $got, want $want"
	# It verifies against itself as the CA, for the name localhost.
	local code
	code=$(curl -s --max-time 10 --cacert "$dir/tls.crt" --resolve "localhost:${m##*:}:127.0.0.1" \
		-H "Authorization: Bearer $tok" -o /dev/null -w '%{http_code}' "https://localhost:${m##*:}/metrics")
	[ "$code" = 200 ] || fail "verified scrape with the admin token: $code"

	# Security finding k: files replaced while it runs (a renamed-in pair, as the
	# kubelet updates a mounted Secret) are served to new connections within the
	# reload interval (10 s), without a restart.
	local next="$MS_TMP/next"
	mkdir -p "$next"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=e2e-metrics-2 -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
		-keyout "$next/tls.key" -out "$next/tls.crt" 2>/dev/null
	want=$(openssl x509 -in "$next/tls.crt" -noout -fingerprint -sha256)
	mv "$next/tls.key" "$dir/tls.key"
	mv "$next/tls.crt" "$dir/tls.crt"
	until_ok 30 serves "$m" "$want" ||
		fail "the replaced certificate is not served: $(served_fingerprint "$m"), want $want"
	grep -q 'Reloaded the metrics serving certificate' "$E2E_LOGS/cert.log" || fail "no log line for the reload"
	# A key that is not a key: the one in use stays, and the log says why.
	echo garbage >"$dir/tls.key"
	until_ok 30 grep -q 'Cannot reload the metrics serving certificate' "$E2E_LOGS/cert.log" ||
		fail "no error logged for a bad key"
	got=$(served_fingerprint "$m")
	[ "$got" = "$want" ] || fail "after a bad key: served $got, want $want"
	stop_controller cert

	# A directory without the files, and HTTPS with the probes on one address: usage errors.
	local rc=0
	"$SC_BIN" --kubeconfig "$KUBECONFIG" --metrics-bind-address=127.0.0.1:0 \
		--health-probe-bind-address=0 --metrics-cert-dir="$MS_TMP/none" >"$MS_TMP/out" 2>&1 || rc=$?
	[ "$rc" = 2 ] && grep -q "$MS_TMP/none/tls.crt: No such file or directory" "$MS_TMP/out" ||
		fail "missing cert dir: rc $rc: $(cat "$MS_TMP/out")"
	m=127.0.0.1:$(free_port); rc=0
	"$SC_BIN" --kubeconfig "$KUBECONFIG" --metrics-bind-address="$m" \
		--health-probe-bind-address="$m" >"$MS_TMP/out" 2>&1 || rc=$?
	[ "$rc" = 2 ] && grep -q 'they need two addresses' "$MS_TMP/out" ||
		fail "same address with --metrics-secure: rc $rc: $(cat "$MS_TMP/out")"
}
