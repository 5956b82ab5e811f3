#!/usr/bin/env bash
# Build the controller-runtime peer of the sample-controller benchmark
# (bench/peers/controller-runtime: the same reconciliation as Kubernetes'
# sample-controller, written on a controller-runtime manager), once per source,
# into the cache next to the Kubernetes binaries.
#
# The module's committed go.mod/go.sum pin controller-runtime and the client
# libraries (the latter at the cluster's release, hack/versions.env); they are used
# as they are (-mod=readonly), modules coming from the Go module proxy. The sources
# are copied into the cache and built there, so the tree is never written to. The
# cache directory is named after the controller-runtime version and a hash of the
# sources: a change to any of them builds anew, otherwise the binary is reused.
# The compiler runs under nice -n 19.
#
# Flags of the binary: -kubeconfig, -namespace, -kube-api-qps, -kube-api-burst (see
# the peer's main.go). Prints the binary's path on its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peer="$root/bench/peers/controller-runtime"

command -v go >/dev/null || { echo "build-cr-controller: go is not installed" >&2; exit 1; }
cache_root="${CSC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/c-sample-controller}"
files=(go.mod go.sum foo_types.go main.go)
cr_ver="$(awk '$1 == "sigs.k8s.io/controller-runtime" { print $2; exit }' "$peer/go.mod")"
lib_ver="$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$peer/go.mod")"
[ -n "$cr_ver" ] && [ -n "$lib_ver" ] || { echo "build-cr-controller: cannot read the versions in $peer/go.mod" >&2; exit 1; }
hash="$(cd "$peer" && cat "${files[@]}" | sha256sum | cut -c1-12)"

top="$cache_root/sample-controller-cr-$cr_ver-$hash"
bin="$top/bin/sample-controller-cr"
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
rm -rf "$top/src"
mkdir -p "$top/src" "$top/bin"
(cd "$peer" && cp "${files[@]}" "$top/src/")

cd "$top/src"
echo "build-cr-controller: building controller-runtime $cr_ver with client libraries $lib_ver" >&2
GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 nice -n 19 go build -trimpath -o "$bin.tmp" . >&2
mv "$bin.tmp" "$bin"
{
	echo "sigs.k8s.io/controller-runtime $cr_ver"
	echo "client libraries $lib_ver"
	go version
	echo "source bench/peers/controller-runtime sha256 $hash"
} >"$top/bin/VERSION"
echo "$bin"
