#!/usr/bin/env bash
# Build the kube-rs peer of the sample-controller benchmark (bench/peers/kube-rs:
# the same reconciliation as Kubernetes' sample-controller, written on a kube-rs
# Controller), once per source, into the cache next to the Kubernetes binaries.
#
# A release build from a copy of the sources in the cache (Cargo writes its lock
# file beside the manifest; the tree is never written to), crates from the crates
# registry at the exact versions Cargo.toml pins (no Cargo.lock is committed: a
# lock file names the registry it came from; transitive versions are resolved at
# the first build and kept in the cache's copy). kube-rs has no client-side rate limiter;
# for the benchmark's -kube-api-qps/-kube-api-burst the peer puts a token bucket
# of client-go's model under its client (see its src/main.rs). Cargo's target
# directory lives in the cache (shared by all versions, so a rebuild is
# incremental); the tree is never written to. The binary is kept in a directory
# named after the kube version and a hash of the sources: a change to any of them
# builds anew, otherwise the binary is reused. Cargo runs under nice -n 19.
#
# Flags of the binary: --kubeconfig, --namespace, --kube-api-qps, --kube-api-burst
# (one or two dashes). Prints the binary's path on its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peer="$root/bench/peers/kube-rs"

command -v cargo >/dev/null || { echo "build-rs-controller: cargo is not installed" >&2; exit 1; }
cache_root="${CSC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/c-sample-controller}"
# pinned_version CRATE: the exact version Cargo.toml pins it to.
pinned_version() {
	sed -n "s/^$1 = .*\"=\([0-9][0-9.]*\)\".*/\1/p" "$peer/Cargo.toml" | head -n 1
}
kube_ver="$(pinned_version kube)"
openapi_ver="$(pinned_version k8s-openapi)"
[ -n "$kube_ver" ] && [ -n "$openapi_ver" ] || { echo "build-rs-controller: cannot read the pinned versions in $peer/Cargo.toml" >&2; exit 1; }
openapi_feature="$(sed -n 's/^k8s-openapi = .*features = \["\(v1_[0-9]*\)"\].*/\1/p' "$peer/Cargo.toml")"
hash="$(cd "$peer" && cat Cargo.toml src/*.rs | sha256sum | cut -c1-12)"

top="$cache_root/sample-controller-rs-$kube_ver-$hash"
bin="$top/bin/sample-controller-rs"
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$top/bin"
target="$cache_root/sample-controller-rs-target"
src="$cache_root/sample-controller-rs-src"
mkdir -p "$src/src"
cp "$peer/Cargo.toml" "$src/"
cp "$peer"/src/*.rs "$src/src/"

echo "build-rs-controller: building kube $kube_ver with k8s-openapi $openapi_ver ($openapi_feature)" >&2
CARGO_TARGET_DIR="$target" nice -n 19 cargo build --release \
	--manifest-path "$src/Cargo.toml" >&2
cp "$target/release/sample-controller-rs" "$bin.tmp"
mv "$bin.tmp" "$bin"
{
	echo "kube $kube_ver"
	echo "k8s-openapi $openapi_ver ($openapi_feature)"
	rustc --version
	echo "source bench/peers/kube-rs sha256 $hash"
} >"$top/bin/VERSION"
echo "$bin"
