#!/usr/bin/env bash
# Build the real Kubernetes server binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet for the real node) and kwok from the Go module proxy, once per version.
#
# k8s.io/kubernetes cannot be required as-is: its go.mod replaces every k8s.io/*
# staging module with a local ./staging path. We generate a tiny wrapper module that
# requires k8s.io/kubernetes and re-points each of those replaces at the published
# v0.x release that matches (v1.N.M -> v0.N.M).
#
# Output: $K8S_BIN_DIR (default ~/.cache/c-sample-controller/k8s-<version>/bin).
# Prints the directory on its last line.
#
# Usage: build-k8s.sh [envtest]
#   envtest: only etcd and kube-apiserver, what <ckube/envtest.h> runs (installed as
#   share/ckube/build-k8s.sh, run by `ckube-envtest assets`; same cache directory).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
. "$here/versions.env"

cache_root="${CSC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/c-sample-controller}"
out="${K8S_BIN_DIR:-$cache_root/k8s-$KUBE_VERSION/bin}"
need=(kube-apiserver kube-controller-manager kube-scheduler kubelet kwok etcd kwok-stages.yaml)
servers=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
envtest=0
if [ "${1:-}" = envtest ]; then
	envtest=1
	need=(kube-apiserver etcd)
	servers=(kube-apiserver)
fi

have_all=1
for b in "${need[@]}"; do [ -e "$out/$b" ] || have_all=0; done
if [ "$have_all" = 1 ]; then
	echo "$out"
	exit 0
fi

command -v go >/dev/null || { echo "build-k8s: go is not installed" >&2; exit 1; }
mkdir -p "$out"
work="$cache_root/k8s-$KUBE_VERSION/src"
mkdir -p "$work"
staging_ver="v0.${KUBE_VERSION#v1.}"

# Fetch upstream go.mod to learn the staging module list.
upstream_mod="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
	sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
[ -f "$upstream_mod" ] || { echo "build-k8s: cannot download k8s.io/kubernetes@$KUBE_VERSION" >&2; exit 1; }

{
	echo "module csc.local/k8sbuild"
	echo
	echo "go $(sed -n 's/^go \(.*\)/\1/p' "$upstream_mod")"
	echo
	echo "require k8s.io/kubernetes $KUBE_VERSION"
	echo
	echo "replace ("
	sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$upstream_mod" |
		while read -r m; do echo "	$m => $m $staging_ver"; done
	echo ")"
} >"$work/go.mod"
cat >"$work/tools.go" <<'GO'
//go:build tools

package k8sbuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO

# etcd: the server release Kubernetes itself is tested with (go.etcd.io/etcd/server/v3,
# already in the module graph), through a two-line main.
mkdir -p "$work/etcd"
cat >"$work/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO

cd "$work"
echo "build-k8s: resolving modules for Kubernetes $KUBE_VERSION (staging $staging_ver)" >&2
GOFLAGS=-mod=mod go mod tidy -e >&2 2>&1 || true
# The version stamp makes `kube-apiserver --version` and /version answer truthfully.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2)"
for c in "${servers[@]}"; do
	[ -x "$out/$c" ] && continue
	echo "build-k8s: building $c" >&2
	GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$c.tmp" "k8s.io/kubernetes/cmd/$c" >&2
	mv "$out/$c.tmp" "$out/$c"
done
if [ ! -x "$out/etcd" ]; then
	echo "build-k8s: building etcd" >&2
	GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" ./etcd >&2
	mv "$out/etcd.tmp" "$out/etcd"
fi
if [ "$envtest" = 1 ]; then
	echo "$out"
	exit 0
fi
echo "build-k8s: building kwok $KWOK_VERSION" >&2
GOBIN="$out" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
# kwok's binary carries no lifecycle stages: take the release's own default ones
# (fast node/pod stages, node heartbeat through Leases) from its module.
kwok_dir="$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
stages="$kwok_dir/kustomize/stage"
{
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		echo "---"
		cat "$stages/$f"
	done
} >"$out/kwok-stages.yaml.tmp"
mv "$out/kwok-stages.yaml.tmp" "$out/kwok-stages.yaml"
echo "$out"
