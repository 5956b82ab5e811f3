#!/usr/bin/env bash
# ckube-gen, measured (prints figures; asserts nothing about time):
#   - lines: the generated Foo kind (api/samplecontroller/v1alpha1) against the
#     hand-written one it replaced (git history), and what each CRD generates;
#   - generator speed on every CRD in the tree;
#   - schema pattern matching: the library (by UTF-8 character), plain regexec (by
#     byte) and Go's regexp, side by side (bench/gen/pattern.c, pattern_go/);
#   - from YAML to a running informer: bench/gen/gadget.yaml, a kind nothing in the
#     tree knows, through ckube-gen, cc (bench/gen/informer.c against the built
#     library), kubectl apply of the CRD until Established, one Gadget created, and
#     the program started until it prints that Gadget read through the generated
#     accessors (needs the local control plane: KUBECONFIG).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/ckube-gen ] && [ -f lib/libckube.a ] || make --no-print-directory bin/ckube-gen lib/libckube.a >/dev/null
tmp=$(mktemp -d /tmp/ckube-bench-gen.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	if [ -n "${KUBECONFIG:-}" ]; then
		kubectl delete --ignore-not-found --wait=false -f bench/gen/gadget.yaml >/dev/null 2>&1 || true
		kubectl delete --ignore-not-found namespace "$ns" --wait=false >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
ns=bench-gen-$$
now() { date +%s.%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }

echo "-- lines of C for the Foo kind"
# The hand-written kind, as it was before ckube-gen (commit b8ead1e), when the
# history is there.
if git cat-file -e b8ead1e:api/samplecontroller/v1alpha1/foo.c 2>/dev/null; then
	hw=$(git show b8ead1e:api/samplecontroller/v1alpha1/foo.c b8ead1e:api/samplecontroller/v1alpha1/foo.h | wc -l)
	printf '  %-52s %6d\n' "hand-written foo.h + foo.c before (b8ead1e)" "$hw"
fi
printf '  %-52s %6d\n' "generated foo.h + foo.c now (deploy/crd.yaml)" \
	"$(cat api/samplecontroller/v1alpha1/foo.[ch] | wc -l)"
printf '  %-52s %6d\n' "  generated from deploy/crd.yaml, lines" "$(wc -l <deploy/crd.yaml)"
printf '  %-52s %6d\n' "controller-specific, kept by hand (foo_sync.h + .c)" \
	"$(cat cmd/sample-controller/foo_sync.[ch] | wc -l)"

echo "-- generator"
for crd in deploy/crd.yaml examples/*/crd.yaml tests/unit/crd/*.yaml bench/gen/gadget.yaml; do
	t0=$(now)
	for _ in 1 2 3 4 5 6 7 8 9 10; do bin/ckube-gen -o "$tmp/g" "$crd" 2>/dev/null; done
	t1=$(now)
	printf '  %-40s %5d lines of YAML -> %5d of C, %5.1f ms per run\n' "$crd" "$(wc -l <"$crd")" \
		"$(cat "$tmp"/g/*/*.[ch] | wc -l)" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) * 100 }')"
	rm -rf "$tmp/g"
done

echo "-- schema patterns: compile once, then each match (mean of 2000), C library and Go regexp"
# The Foo's DNS-1123 subdomain, a length bound written as a pattern, and a (?i)
# one: through ckube-gen's translation and the library (as generated validation
# matches: by character, or by byte where that answers the same), plain regexec by byte,
# and Go's regexp, the API server's engine, on the same strings.
cat >"$tmp/patterns" <<'PATTERNS'
^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
^.{0,253}$
^(?i)[a-z][\w.-]*$
PATTERNS
# shellcheck disable=SC2046
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Iinclude -I. -o "$tmp/pattern" bench/gen/pattern.c \
	cmd/ckube-gen/pattern.c lib/libckube.a \
	$(pkg-config --libs libcurl yajl yaml-0.1 libmicrohttpd gnutls) -lev -lm -pthread
"$tmp/pattern" 2000 <"$tmp/patterns"
if command -v go >/dev/null; then
	go run bench/gen/pattern_go/main.go 2000 <"$tmp/patterns"
else
	echo "  (Go regexp: skipped, no go)"
fi

if [ -z "${KUBECONFIG:-}" ] || ! kubectl get --raw /readyz >/dev/null 2>&1; then
	echo "-- YAML to a running informer: skipped (no control plane; KUBECONFIG=${KUBECONFIG:-})"
	exit 0
fi
echo "-- YAML to a running informer (bench/gen/gadget.yaml)"
kubectl delete --ignore-not-found -f bench/gen/gadget.yaml >/dev/null 2>&1 || true
t0=$(now)
bin/ckube-gen -o "$tmp/gen" bench/gen/gadget.yaml
t1=$(now)
# shellcheck disable=SC2046
cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -I"$tmp/gen" -o "$tmp/informer" bench/gen/informer.c \
	"$tmp"/gen/v1/gadget.c lib/libckube.a \
	$(pkg-config --libs libcurl yajl yaml-0.1 libmicrohttpd gnutls) -lev -lm -pthread
t2=$(now)
kubectl apply -f bench/gen/gadget.yaml >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/gadgets.bench.ckube.io >/dev/null
t3=$(now)
kubectl create namespace "$ns" >/dev/null
# Straight to the API (kubectl apply would first wait for its discovery cache to
# learn the new kind, about 2 s); retried while the new resource is not served yet.
printf '{"apiVersion":"bench.ckube.io/v1","kind":"Gadget","metadata":{"name":"g1"},"spec":{"size":3,"color":"green","tags":["a","b"]}}' >"$tmp/g1.json"
for _ in $(seq 100); do
	tries=$((${tries:-0} + 1))
	kubectl create --raw "/apis/bench.ckube.io/v1/namespaces/$ns/gadgets" -f "$tmp/g1.json" >"$tmp/post" 2>&1 && break
	sleep 0.05
done
t4=$(now)
"$tmp/informer" --kubeconfig "$KUBECONFIG" --namespace "$ns" --metrics-bind-address=0 \
	--health-probe-bind-address=0 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 600); do grep -q "^reconciled $ns/g1" "$tmp/out" && break; sleep 0.02; done
t5=$(now)
grep '^reconciled' "$tmp/out" || { echo "the informer did not reconcile; its log:"; tail "$tmp/err"; exit 1; }
printf '  %-44s %6s ms\n' "ckube-gen" "$(ms "$t0" "$t1")"
printf '  %-44s %6s ms\n' "cc (informer.c + gadget.c, -O2)" "$(ms "$t1" "$t2")"
printf '  %-44s %6s ms\n' "kubectl apply CRD until Established" "$(ms "$t2" "$t3")"
# The API server's first write of a new resource waits for its storage (about 2 s
# here, whoever sends it).
printf '  %-44s %6s ms (%d tries)\n' "the first Gadget created (POST)" "$(ms "$t3" "$t4")" "$tries"
printf '  %-44s %6s ms\n' "start until it reconciled the Gadget" "$(ms "$t4" "$t5")"
printf '  %-44s %6s ms\n' "YAML to a running informer, in all" "$(ms "$t0" "$t5")"
