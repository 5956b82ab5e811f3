#!/usr/bin/env bash
# Build a Go peer of a benchmark (a module under bench/peers/NAME, written here),
# once per source, into the cache next to the Kubernetes binaries.
#   bash bench/build_go_peer.sh NAME BINARY      # prints the binary's path last
#
# The module's committed go.mod/go.sum pin its dependencies (the client libraries at
# the cluster's release, hack/versions.env); they are used as they are
# (-mod=readonly), modules coming from the Go module proxy. The sources (go.mod,
# go.sum, *.go) are copied into the cache and built there, so the tree is never
# written to. The cache directory is named after the peer, its client-go version and
# a hash of the sources: a change to any of them builds anew, otherwise the binary
# is reused. The compiler runs under nice -n 19. A VERSION file beside the binary
# names the module versions and the Go release.
set -euo pipefail
[ $# = 2 ] || { echo "usage: build_go_peer.sh NAME BINARY" >&2; exit 2; }
name="$1" binname="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
peer="$root/bench/peers/$name"
[ -f "$peer/go.mod" ] || { echo "build-go-peer: no module at $peer" >&2; exit 1; }
command -v go >/dev/null || { echo "build-go-peer: go is not installed" >&2; exit 1; }
cache_root="${CSC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/c-sample-controller}"

mapfile -t files < <(cd "$peer" && ls go.mod go.sum *.go)
lib_ver="$(awk '$1 == "k8s.io/client-go" { print $2; exit } $2 == "k8s.io/client-go" { print $3; exit }' "$peer/go.mod")"
[ -n "$lib_ver" ] || { echo "build-go-peer: $peer/go.mod does not require k8s.io/client-go" >&2; exit 1; }
hash="$(cd "$peer" && cat "${files[@]}" | sha256sum | cut -c1-12)"

top="$cache_root/peer-$name-$lib_ver-$hash"
bin="$top/bin/$binname"
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi
rm -rf "$top/src"
mkdir -p "$top/src" "$top/bin"
(cd "$peer" && cp "${files[@]}" "$top/src/")

cd "$top/src"
echo "build-go-peer: building bench/peers/$name with client-go $lib_ver" >&2
GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 nice -n 19 go build -trimpath -o "$bin.tmp" . >&2
mv "$bin.tmp" "$bin"
{
	awk '/^require \(/ { inblk = 1; next } inblk && /^\)/ { inblk = 0 }
	     inblk && !/\/\/ indirect/ { print $1, $2 } /^require [^(]/ { print $2, $3 }' go.mod
	go version
	echo "source bench/peers/$name sha256 $hash"
} >"$top/bin/VERSION"
echo "$bin"
