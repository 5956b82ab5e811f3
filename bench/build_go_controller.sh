#!/usr/bin/env bash
# Build Kubernetes' own sample-controller (the Go original) for the side-by-side
# benchmark, once per version, into the cache next to the Kubernetes binaries.
#
# The module is taken from the Go module proxy at the release matching
# hack/versions.env (KUBE_VERSION v1.N.M -> k8s.io/sample-controller v0.N.M). When the
# proxy does not serve that exact release, the closest earlier patch release of the
# same minor is used and its client-go/api/apimachinery are raised to v0.N.M, so the
# client libraries still match the cluster.
#
# Upstream main.go has no flags for the client QPS/burst (client-go's defaults: 5/10)
# nor for a namespace (it watches all namespaces). The benchmark needs both, to give
# it the same limits as the C daemon and to keep it off other people's objects, so
# three flags are patched into a copy of main.go: -kube-api-qps, -kube-api-burst,
# -namespace. Nothing else is changed; controller.go is built as released.
#
# Prints the binary's path on its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=../hack/versions.env
. "$root/hack/versions.env"

command -v go >/dev/null || { echo "build-go-controller: go is not installed" >&2; exit 1; }
cache_root="${CSC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/c-sample-controller}"
lib_ver="v0.${KUBE_VERSION#v1.}"
minor="${lib_ver%.*}"
patch="${lib_ver##*.}"

# Which sample-controller release: the matching one, else the closest earlier patch.
for ((p = patch; p >= 0; p--)); do
	if [ -x "$cache_root/sample-controller-go-$minor.$p/bin/sample-controller" ]; then
		echo "$cache_root/sample-controller-go-$minor.$p/bin/sample-controller"
		exit 0
	fi
done
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
sc_ver="" sc_dir=""
for ((p = patch; p >= 0; p--)); do
	v="$minor.$p"
	d="$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "k8s.io/sample-controller@$v" 2>/dev/null |
		sed -n 's/.*"Dir": "\(.*\)",*/\1/p')" || true
	if [ -n "$d" ] && [ -f "$d/main.go" ]; then
		sc_ver="$v" sc_dir="$d"
		break
	fi
	echo "build-go-controller: k8s.io/sample-controller@$v is not available" >&2
done
[ -n "$sc_ver" ] || { echo "build-go-controller: no k8s.io/sample-controller $minor.x available" >&2; exit 1; }

top="$cache_root/sample-controller-go-$sc_ver"
src="$top/src"
rm -rf "$src"
mkdir -p "$src" "$top/bin"
# The module cache is read-only; the copy keeps the module path, so its own
# k8s.io/sample-controller/pkg/... imports resolve to the copy.
cp -r "$sc_dir"/. "$src"/
chmod -R u+w "$src"
rm -f "$src"/*_test.go

python3 - "$src/main.go" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()

def sub(old, new):
    global text
    if old not in text:
        sys.exit("build-go-controller: cannot patch main.go: %r not found" % old)
    text = text.replace(old, new, 1)

sub("\tkubeconfig string\n",
    "\tkubeconfig string\n"
    "\n\tbenchQPS       float64\n\tbenchBurst     int\n\tbenchNamespace string\n")
sub("\tkubeClient, err := kubernetes.NewForConfig(cfg)",
    "\t// Benchmark patch: client-side rate limits as flags (0 keeps client-go's default).\n"
    "\tif benchQPS != 0 {\n\t\tcfg.QPS = float32(benchQPS)\n\t}\n"
    "\tif benchBurst != 0 {\n\t\tcfg.Burst = benchBurst\n\t}\n\n"
    "\tkubeClient, err := kubernetes.NewForConfig(cfg)")
sub("kubeinformers.NewSharedInformerFactory(kubeClient, time.Second*30)",
    "kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, time.Second*30, "
    "kubeinformers.WithNamespace(benchNamespace))")
sub("informers.NewSharedInformerFactory(exampleClient, time.Second*30)",
    "informers.NewSharedInformerFactoryWithOptions(exampleClient, time.Second*30, "
    "informers.WithNamespace(benchNamespace))")
sub("func init() {\n",
    "func init() {\n"
    "\tflag.Float64Var(&benchQPS, \"kube-api-qps\", 0, \"Benchmark patch: client QPS (0: client-go default).\")\n"
    "\tflag.IntVar(&benchBurst, \"kube-api-burst\", 0, \"Benchmark patch: client burst (0: client-go default).\")\n"
    "\tflag.StringVar(&benchNamespace, \"namespace\", \"\", \"Benchmark patch: only this namespace (default: all).\")\n")
open(path, "w").write(text)
PY

cd "$src"
echo "build-go-controller: building k8s.io/sample-controller $sc_ver with client libraries $lib_ver" >&2
if [ "$sc_ver" != "$lib_ver" ]; then
	GOFLAGS=-mod=mod go get "k8s.io/client-go@$lib_ver" "k8s.io/api@$lib_ver" \
		"k8s.io/apimachinery@$lib_ver" >&2
fi
GOFLAGS=-mod=mod go mod tidy >&2
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$top/bin/sample-controller.tmp" . >&2
mv "$top/bin/sample-controller.tmp" "$top/bin/sample-controller"
{
	echo "k8s.io/sample-controller $sc_ver"
	echo "client libraries $lib_ver (cluster $KUBE_VERSION)"
	go version
	echo "patched: main.go flags -kube-api-qps, -kube-api-burst, -namespace"
} >"$top/bin/VERSION"
echo "$top/bin/sample-controller"
