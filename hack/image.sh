#!/usr/bin/env bash
# hack/image.sh — build the container images on this machine, with no registry.
#
#   bash hack/image.sh            both images (make image)
#   bash hack/image.sh pause      only the pod-sandbox image
#   bash hack/image.sh controller only the sample-controller image
#   bash hack/image.sh peers      the C daemon's three benchmark peers, as images for
#                                 bench/bench_node.sh (needs go and cargo for a build)
#   bash hack/image.sh peer-go    one of them: peer-go, peer-cr or peer-rs
#
# What it does (as root, with buildah, runc and — for the controller — mmdebstrap):
#
#  pause       compiles hack/node/pause.c with `cc -static -Os`, builds
#              hack/node/Containerfile.pause (FROM scratch) as csc.local/pause:3.10 and
#              writes build/image/pause.oci.tar.
#  controller  1. base image: the Dockerfile's build stage is FROM debian:bookworm, which
#                 cannot be pulled here, so a minbase bookworm rootfs is made with
#                 mmdebstrap from this machine's own apt sources (keeping the
#                 Acquire::Check-Valid-Until "false" option inside it, so that the
#                 Dockerfile's apt-get update works) and imported into buildah's storage
#                 under the exact name the Dockerfile's FROM resolves to
#                 (docker.io/library/debian:bookworm).
#              2. `buildah bud --pull=never --layers` of the unchanged Dockerfile
#                 (buildah's default runtime crun refuses this machine's hybrid cgroups;
#                 runc works), tagged sample-controller-c:$(cat VERSION).
#              3. checks it: --version and --help run inside the image as uid 65532,
#                 and the daemon started against https://127.0.0.1:1 fails with a clean
#                 "connection refused" and against a local TLS server with a self-signed
#                 certificate with a certificate-verification error (libraries, CA bundle
#                 and resolver all load), then writes build/image/sample-controller-c.oci.tar.
#                 Fails if the image is larger than 25 MB unpacked.
#  peers       go (Kubernetes' Go sample-controller), cr (the controller-runtime peer)
#              and rs (the kube-rs peer), each:
#              1. its binary from bench/build_<impl>_controller.sh (the one the host
#                 benchmarks run, cached there; a build runs under nice -n 19);
#              2. a rootfs staged in build/image/peer-<impl>-ctx/rootfs: the binary as
#                 /usr/local/bin/sample-controller, the shared libraries ldd lists and
#                 the loader when it is dynamic (kube-rs: glibc; the Go ones are static),
#                 the CA bundle, passwd/group with the user 65532, nsswitch.conf;
#              3. `buildah bud --pull=never` of hack/node/Containerfile.peer (FROM scratch,
#                 USER 65532:65532), tagged csc.local/peer-<impl>-sample-controller:<the
#                 first 12 hex digits of a sha256 over the staged files>, so that a new
#                 binary, library or CA bundle is a new tag;
#              4. checks it: --help, run in the image as uid 65532, lists the flags the
#                 benchmark gives (--namespace, --kube-api-qps, --kube-api-burst); then the
#                 in-cluster client as a pod has it (a service-account directory mounted at
#                 /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST
#                 and _PORT) against a local TLS server whose certificate that account's CA
#                 did not sign must fail the certificate verification: configuration,
#                 libraries, TLS stack all load and the handshake happens;
#              5. writes build/image/peer-<impl>-sample-controller.oci.tar.
#
# Caches: the rootfs tarball in
#   ${CSC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/c-sample-controller}/images/
# (debian-bookworm-minbase.tar; delete it to make a new one). The base image is
# imported only when buildah's storage (/var/lib/containers) does not hold it yet
# (`buildah rmi docker.io/library/debian:bookworm` forces a new import: a new base
# layer, so a full rebuild), and buildah's layer cache (--layers) makes a rebuild
# without source changes take seconds (the layer cache hashes content: touching a file
# rebuilds nothing; an edit under cmd/ rebuilds cmd/ only).
#
# Output: one line per step with its duration; at the end the build time, each image's
# unpacked size (sum of its uncompressed layers) and its archive size.
#
# Importing into containerd (containerd 1.6's ctr; no extra flag needed, each archive's
# index carries the io.containerd.image.name annotation with the full name):
#   ctr -n k8s.io images import build/image/sample-controller-c.oci.tar
#       -> docker.io/library/sample-controller-c:<VERSION>
#   ctr -n k8s.io images import build/image/pause.oci.tar
#       -> csc.local/pause:3.10
#   ctr -n k8s.io images import build/image/peer-go-sample-controller.oci.tar
#       -> csc.local/peer-go-sample-controller:<hash> (likewise peer-cr, peer-rs)
# (The annotation org.opencontainers.image.ref.name is sample-controller-c:<VERSION>,
# resp. csc.local/pause:3.10, for other OCI tools.)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
WHAT=${1:-all}
PEERS=()
case $WHAT in
all | pause | controller) ;;
peers) PEERS=(go cr rs) ;;
peer-go | peer-cr | peer-rs) PEERS=("${WHAT#peer-}") ;;
*)
	echo "usage: bash hack/image.sh [all|pause|controller|peers|peer-go|peer-cr|peer-rs]" >&2
	exit 2
	;;
esac

CACHE=${CSC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/c-sample-controller}/images
OUT=$ROOT/build/image
VERSION=$(cat VERSION)
IMAGE=sample-controller-c:$VERSION
IMAGE_FULL=docker.io/library/$IMAGE
PAUSE=csc.local/pause:3.10
MAX_UNPACKED=$((25 * 1000 * 1000))
RUNTIME=(--runtime runc)

die() {
	echo "image.sh: $*" >&2
	exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
T0=$(now)
# step "what" cmd...: runs cmd in a subshell (with errexit in force and its own
# cleanup), logs one line with its duration; cmd's output goes to $LOG and is shown
# only when it fails.
LOG=$(mktemp /tmp/csc-image.XXXXXX.log)
TMPS=("$LOG")
cleanup() {
	for c in "${CTRS[@]:-}"; do [[ -n $c ]] && buildah rm "$c" >/dev/null 2>&1 || true; done
	for p in "${PIDS[@]:-}"; do [[ -n $p ]] && kill "$p" 2>/dev/null || true; done
	rm -rf "${TMPS[@]}"
}
CTRS=()
PIDS=()
# buildah and runc make host directories on first use (runc's state root, an empty
# CNI configuration directory): those that did not exist before this run are
# removed again when they are left empty, so a build leaves no host state behind.
HOST_DIRS=(/run/runc /etc/cni/net.d /etc/cni /var/lib/cni)
NEW_DIRS=()
for d in "${HOST_DIRS[@]}"; do [[ -e $d ]] || NEW_DIRS+=("$d"); done
cleanup_all() {
	cleanup
	local d
	for d in "${NEW_DIRS[@]:-}"; do
		[[ -n $d && -d $d ]] || continue
		rm -f "$d/cni.lock"
		rmdir "$d" 2>/dev/null || true
	done
}
trap cleanup_all EXIT
step() {
	local what=$1 t rc
	shift
	t=$(now)
	set +e
	(
		CTRS=() PIDS=() TMPS=()
		trap cleanup EXIT
		set -e
		"$@"
	) >"$LOG" 2>&1
	rc=$?
	set -e
	if ((rc != 0)); then
		printf '==> %-58s FAILED after %.1fs\n' "$what" "$(since "$t")"
		tail -n 40 "$LOG" >&2
		exit 1
	fi
	printf '==> %-58s %6.1fs\n' "$what" "$(since "$t")"
}

[[ $(id -u) -eq 0 ]] || die "must run as root (buildah's storage in /var/lib/containers, mmdebstrap, runc)"
command -v buildah >/dev/null || die "buildah is missing (apt-get install buildah)"
command -v runc >/dev/null || die "runc is missing (apt-get install runc)"
command -v jq >/dev/null || die "jq is missing (apt-get install jq)"
if [[ $WHAT == all || $WHAT == controller ]]; then
	command -v mmdebstrap >/dev/null || die "mmdebstrap is missing (apt-get install mmdebstrap)"
fi
if ((${#PEERS[@]} > 0)); then
	command -v openssl >/dev/null || die "openssl is missing (apt-get install openssl): the peers' TLS check needs it"
fi
mkdir -p "$OUT"

# oci_archive <image> <ref.name> <containerd name> <file>: an OCI archive whose index
# names the image for OCI tools (ref.name) and for containerd's importer (which would
# otherwise keep a short ref.name like sample-controller-c:0.1.0 as it is, not as
# docker.io/library/sample-controller-c:0.1.0).
oci_archive() {
	local img=$1 ref=$2 cname=$3 file=$4 dir
	dir=$(mktemp -d /tmp/csc-oci.XXXXXX)
	TMPS+=("$dir")
	buildah push --quiet "$img" "oci:$dir/layout:$ref"
	jq -c --arg n "$cname" '.manifests[0].annotations["io.containerd.image.name"] = $n' \
		"$dir/layout/index.json" >"$dir/index.json"
	mv "$dir/index.json" "$dir/layout/index.json"
	tar -C "$dir/layout" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
		-cf "$file.tmp" oci-layout index.json blobs
	mv "$file.tmp" "$file"
}

# unpacked_size <image>: bytes of its layers uncompressed (tar streams as pushed).
# (Called in $(...), a subshell: it removes its own temporary directory.)
unpacked_size() {
	local dir n=0 m l
	dir=$(mktemp -d /tmp/csc-size.XXXXXX)
	buildah push --quiet "$1" "oci:$dir" >/dev/null
	m=$dir/blobs/$(jq -r '.manifests[0].digest' "$dir/index.json" | tr : /)
	while read -r mt l; do
		l=$dir/blobs/${l/://}
		case $mt in
		*gzip) n=$((n + $(gzip -dc "$l" | wc -c))) ;;
		*zstd) n=$((n + $(zstd -dc "$l" | wc -c))) ;;
		*) n=$((n + $(stat -c %s "$l"))) ;;
		esac
	done < <(jq -r '.layers[] | "\(.mediaType) \(.digest)"' "$m")
	rm -rf "$dir"
	echo "$n"
}
mb() { awk -v n="$1" 'BEGIN { printf "%.2f", n / 1000000 }'; }

build_pause() {
	local ctx
	ctx=$OUT/pause-ctx
	rm -rf "$ctx" && mkdir -p "$ctx"
	step "pause: cc -static -Os hack/node/pause.c" \
		cc -static -Os -s -Wall -Wextra -Werror -Wno-unused-parameter -o "$ctx/pause" hack/node/pause.c
	# Same mtime on every build so that buildah's layer cache keeps the COPY layer.
	touch -d @0 "$ctx/pause"
	step "pause: buildah bud -> $PAUSE" \
		buildah bud --pull=never --network host "${RUNTIME[@]}" --layers \
		-f "$ROOT/hack/node/Containerfile.pause" -t "$PAUSE" "$ctx"
	step "pause: write build/image/pause.oci.tar" oci_archive "$PAUSE" "$PAUSE" "$PAUSE" "$OUT/pause.oci.tar"
	PAUSE_SIZE=$(unpacked_size "$PAUSE")
}

# The build stage's base image, named as buildah resolves the Dockerfile's FROM.
BASE_FROM=$(awk 'toupper($1) == "FROM" && tolower($3) == "as" && tolower($4) == "build" { print $2 }' Dockerfile)
[[ -n $BASE_FROM ]] || die "Dockerfile has no 'FROM <image> AS build' line"
case $BASE_FROM in
*/*/*) BASE_REF=$BASE_FROM ;;
*/*) BASE_REF=docker.io/$BASE_FROM ;;
*) BASE_REF=docker.io/library/$BASE_FROM ;;
esac
BASE_SUITE=${BASE_REF##*:}
BASE_TAR=$CACHE/debian-$BASE_SUITE-minbase.tar

make_rootfs() {
	local mirrors=() f
	# This machine's own Debian sources (deb822 or one-line files), else mmdebstrap's default.
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/debian.sources; do
		[[ -f $f ]] && grep -qE '^[[:space:]]*(deb |Types:)' "$f" && mirrors+=("$f")
	done
	mkdir -p "$CACHE"
	rm -f "$BASE_TAR.tmp"
	mmdebstrap --variant=minbase --format=tar --aptopt='Acquire::Check-Valid-Until "false"' \
		"$BASE_SUITE" "$BASE_TAR.tmp" "${mirrors[@]}"
	# The option must stay inside the rootfs for the Dockerfile's apt-get update.
	grep -q 'Check-Valid-Until "false"' <<<"$(tar -xOf "$BASE_TAR.tmp" ./etc/apt/apt.conf.d/99mmdebstrap)"
	mv "$BASE_TAR.tmp" "$BASE_TAR"
}

import_base() {
	local c mnt
	c=$(buildah from --pull=never scratch)
	CTRS+=("$c")
	mnt=$(buildah mount "$c")
	tar -C "$mnt" --numeric-owner -xpf "$BASE_TAR"
	buildah umount "$c"
	buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--cmd bash --label org.opencontainers.image.description="mmdebstrap --variant=minbase $BASE_SUITE (hack/image.sh)" "$c"
	buildah commit --quiet --rm "$c" "$BASE_REF"
}

build_controller() {
	# Imported once: a new import would be a new layer, and invalidate the layer cache.
	if buildah inspect --type image "$BASE_REF" >/dev/null 2>&1; then
		echo "==> base: $BASE_REF in buildah's storage (cached)"
	else
		if [[ -f $BASE_TAR ]]; then
			echo "==> base: $BASE_TAR (cached)"
		else
			step "base: mmdebstrap --variant=minbase $BASE_SUITE" make_rootfs
		fi
		step "base: import the rootfs as $BASE_REF" import_base
	fi
	local args=(--build-arg VERSION="$VERSION") src rev
	# org.opencontainers.image.source: this checkout's remote when it has one.
	if src=$(git remote get-url origin 2>/dev/null) && [[ $src == https://* ]]; then
		args+=(--build-arg SOURCE="$src")
	fi
	# org.opencontainers.image.revision: the commit built (with -dirty for local edits).
	if rev=$(git rev-parse HEAD 2>/dev/null); then
		git diff --quiet HEAD -- 2>/dev/null || rev="$rev-dirty"
		args+=(--build-arg REVISION="$rev")
	fi
	grep -q "^ARG VERSION=$VERSION\$" Dockerfile ||
		echo "==> warning: the Dockerfile's ARG VERSION default is not $VERSION (the VERSION file)"
	step "controller: buildah bud -> $IMAGE" \
		buildah bud --pull=never --network host "${RUNTIME[@]}" --layers \
		"${args[@]}" -f Dockerfile -t "$IMAGE" .
	step "controller: check it runs in the image (uid 65532, TLS)" check_controller
	step "controller: write build/image/sample-controller-c.oci.tar" \
		oci_archive "$IMAGE" "$IMAGE" "$IMAGE_FULL" "$OUT/sample-controller-c.oci.tar"
	CTL_SIZE=$(unpacked_size "$IMAGE")
}

# Runs the binary inside the image as its own user; the image has no shell, so every
# check is one direct exec.
check_controller() {
	local c bin out dir port pid
	c=$(buildah from --pull=never "$IMAGE")
	CTRS+=("$c")
	bin=$(buildah inspect --format '{{index .OCIv1.Config.Entrypoint 0}}' "$c")
	[[ $(buildah inspect --format '{{.OCIv1.Config.User}}' "$c") == 65532:65532 ]]
	out=$(buildah run "${RUNTIME[@]}" --network none --user 65532:65532 "$c" -- "$bin" --version)
	echo "--version: $out"
	[[ $out == *"$VERSION"* ]] || { echo "--version does not print $VERSION"; return 1; }
	out=$(buildah run "${RUNTIME[@]}" --network none --user 65532:65532 "$c" -- "$bin" --help 2>&1)
	grep -q '^Usage of' <<<"$out" || { echo "--help: $out"; return 1; }
	# A refused connection must be reported as such (not a missing library or CA file).
	out=$(run_until 10 "curl error|refused" --master https://127.0.0.1:1)
	echo "$out" | head -n 3
	grep -qiE "refused|couldn.t connect" <<<"$out" || { echo "no 'connection refused' in the output"; return 1; }
	if grep -qiE 'error while loading shared|cannot open shared|CA cert|certificate file' <<<"$out"; then
		echo "a library or the CA bundle is missing"
		return 1
	fi
	# TLS and the resolver: against a server at localhost with a self-signed certificate
	# the handshake must happen and fail verification against the image's CA bundle.
	if command -v openssl >/dev/null; then
		dir=$(mktemp -d /tmp/csc-tls.XXXXXX)
		TMPS+=("$dir")
		tls_server "$dir"
		out=$(run_until 10 "curl error" --master "https://localhost:$port")
		kill "$pid" 2>/dev/null || true
		echo "$out" | head -n 3
		grep -qiE 'certificate problem|self.signed' <<<"$out" || { echo "no certificate-verification error"; return 1; }
		if grep -qiE 'error setting certificate|CAfile|certificate file|resolve' <<<"$out"; then
			echo "the CA bundle or the resolver is missing"
			return 1
		fi
	fi
	buildah rm "$c" >/dev/null
}

# tls_server <dir>: a TLS server on 127.0.0.1 with a self-signed (CA:FALSE) certificate
# for localhost and 127.0.0.1 (key and certificate written to dir), listening when it
# returns; sets port and pid (in the caller's locals) and adds pid to PIDS. It logs
# each handshake to dir/server.log, with the alert a client that refused the
# certificate sent ("unknown ca", "bad certificate"): the proof that a client whose
# own error message does not say why (kube-rs: "client error (Connect)") got the
# certificate and verified it. The kernel picks its port when it binds (a port found
# free beforehand could be taken by another server, which the client would then
# talk to instead).
tls_server() {
	local dir=$1 i
	openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
		-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE \
		-keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
	python3 -c '
import os, socket, ssl, sys
d = sys.argv[1]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(d + "/cert.pem", d + "/key.pem")
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
with open(d + "/port.tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(d + "/port.tmp", d + "/port")
while True:
    c, _ = s.accept()
    c.settimeout(10)
    try:
        ctx.wrap_socket(c, server_side=True).close()
        print("handshake completed", flush=True)
    except (ssl.SSLError, OSError) as e:
        print("handshake failed:", e, flush=True)
' "$dir" >"$dir/server.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	for ((i = 0; i < 100; i++)); do
		[[ -s $dir/port ]] && break
		kill -0 "$pid" 2>/dev/null || { echo "the TLS server exited: $(cat "$dir/server.log")"; return 1; }
		sleep 0.1
	done
	port=$(cat "$dir/port")
	[[ -n $port ]] || { echo "the TLS server did not start listening"; return 1; }
}

# run_until <seconds> <regex> <args>...: the daemon ($bin in container $c) with args
# until its output matches regex (or it exits, or seconds pass); prints its output.
# RUN_OPTS: more options of `buildah run` (mounts, environment).
# (Called in $(...), a subshell: it removes its own temporary file.)
RUN_OPTS=()
run_until() {
	local secs=$1 re=$2 f pid i
	shift 2
	f=$(mktemp /tmp/csc-out.XXXXXX)
	buildah run "${RUNTIME[@]}" --network host --user 65532:65532 "${RUN_OPTS[@]}" "$c" -- "$bin" "$@" >"$f" 2>&1 &
	pid=$!
	for ((i = 0; i < secs * 5; i++)); do
		grep -qiE "$re" "$f" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	cat "$f"
	rm -f "$f"
}

# ---- The benchmark's peers (bench/bench_node.sh runs them as pods beside the C daemon).
declare -A PEER_SCRIPT=([go]=bench/build_go_controller.sh [cr]=bench/build_cr_controller.sh
	[rs]=bench/build_rs_controller.sh)

# peer_binary <impl> <file>: the peer's binary (built when the cache has none) and
# its path written to file (the build script's last line).
peer_binary() {
	local out
	out=$(nice -n 19 bash "${PEER_SCRIPT[$1]}")
	tail -n 1 <<<"$out" >"$2"
	[[ -x $(cat "$2") ]] || { echo "${PEER_SCRIPT[$1]} printed no binary: $out"; return 1; }
}

# stage_peer <binary> <dir>: the rootfs of a peer's image, as the Dockerfile's staging
# step makes the C daemon's (which must stay self-contained for `docker build`): the
# libraries ldd lists at the paths it names and the loader, the CA bundle, the users,
# nsswitch.conf (glibc's and Go's resolvers read it). The binary is copied as it is,
# not stripped: the very file the host benchmarks measure. Every mtime is 0, so
# that an unchanged tree gives the same layer.
stage_peer() {
	local bin=$1 s=$2 lib
	rm -rf "$s"
	mkdir -p "$s/usr/local/bin" "$s/etc/ssl/certs" "$s/tmp"
	cp "$bin" "$s/usr/local/bin/sample-controller"
	if ldd "$bin" >/dev/null 2>&1; then
		for lib in $(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
			cp --parents -L "$lib" "$s/"
		done
		ldd "$bin"
	else
		echo "static: $(file -b "$bin")"
	fi
	cp /etc/ssl/certs/ca-certificates.crt "$s/etc/ssl/certs/"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$s/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$s/etc/group"
	printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$s/etc/nsswitch.conf"
	chmod 1777 "$s/tmp"
	find "$s" -exec touch -h -d @0 {} +
	find "$s" -type f | sort
}

# tree_hash <dir>: 12 hex digits of a sha256 over every file's path and content.
tree_hash() {
	(cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-12
}

# check_peer <image>: --help as uid 65532 lists the benchmark's flags; the in-cluster
# client (service account and KUBERNETES_SERVICE_* as a pod has them) reaches a local
# TLS server and refuses its certificate, which the account's CA did not sign.
check_peer() {
	local c bin out dir port pid f
	c=$(buildah from --pull=never "$1")
	CTRS+=("$c")
	bin=$(buildah inspect --format '{{index .OCIv1.Config.Entrypoint 0}}' "$c")
	[[ $(buildah inspect --format '{{.OCIv1.Config.User}}' "$c") == 65532:65532 ]]
	out=$(buildah run "${RUNTIME[@]}" --network none --user 65532:65532 "$c" -- "$bin" --help 2>&1 || true)
	echo "--help: $out"
	for f in --namespace --kube-api-qps --kube-api-burst; do
		# Go's flag package lists -f (and takes --f too).
		grep -qF -- "-${f#--} " <<<"$out" || { echo "--help lists no $f"; return 1; }
	done
	dir=$(mktemp -d /tmp/csc-sa.XXXXXX)
	TMPS+=("$dir")
	mkdir "$dir/sa"
	openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=some-other-ca -days 1 \
		-keyout "$dir/ca.key" -out "$dir/sa/ca.crt" 2>/dev/null
	printf 'not-a-token' >"$dir/sa/token"
	printf 'default' >"$dir/sa/namespace"
	chmod 755 "$dir" "$dir/sa"
	chmod 644 "$dir/sa"/*
	tls_server "$dir"
	RUN_OPTS=(-v "$dir/sa:/var/run/secrets/kubernetes.io/serviceaccount:ro"
		-e KUBERNETES_SERVICE_HOST=127.0.0.1 -e "KUBERNETES_SERVICE_PORT=$port")
	# Until the client says it failed (Go: "x509: certificate signed by unknown
	# authority"; kube-rs says no more than "client error (Connect)"); the server's log
	# then tells whether it failed by refusing the certificate.
	out=$(run_until 20 "unknown authority|client error \\(Connect\\)" \
		--namespace csc-image-check --kube-api-qps 5 --kube-api-burst 10)
	RUN_OPTS=()
	kill "$pid" 2>/dev/null || true
	echo "$out" | head -n 5
	echo "TLS server: $(head -n 3 "$dir/server.log")"
	grep -qE 'ALERT_UNKNOWN_CA|ALERT_BAD_CERTIFICATE' "$dir/server.log" ||
		{ echo "the in-cluster client did not refuse the server's certificate"; return 1; }
	if grep -qiE 'error while loading shared|cannot open shared' <<<"$out"; then
		echo "a library is missing"
		return 1
	fi
	buildah rm "$c" >/dev/null
}

PEER_SIZES=()
build_peer() {
	local impl=$1 name=peer-$1-sample-controller ctx bin tag ref
	ctx=$OUT/peer-$impl-ctx
	mkdir -p "$ctx"
	step "peer-$impl: binary (${PEER_SCRIPT[$impl]})" peer_binary "$impl" "$ctx/binary"
	bin=$(cat "$ctx/binary")
	step "peer-$impl: stage $bin" stage_peer "$bin" "$ctx/rootfs"
	tag=$(tree_hash "$ctx/rootfs")
	ref=csc.local/$name:$tag
	step "peer-$impl: buildah bud -> $ref" \
		buildah bud --pull=never --network host "${RUNTIME[@]}" --layers \
		--build-arg TITLE="$name" --build-arg VERSION="$tag" \
		--build-arg DESCRIPTION="$(paste -sd ';' "$(dirname "$bin")/VERSION")" \
		-f "$ROOT/hack/node/Containerfile.peer" -t "$ref" "$ctx"
	step "peer-$impl: check it runs in the image (uid 65532, in-cluster TLS)" check_peer "$ref"
	step "peer-$impl: write build/image/$name.oci.tar" oci_archive "$ref" "$ref" "$ref" "$OUT/$name.oci.tar"
	PEER_SIZES+=("$ref $(unpacked_size "$ref") $name.oci.tar")
}

PAUSE_SIZE= CTL_SIZE=
if ((${#PEERS[@]} == 0)); then
	[[ $WHAT == controller ]] || build_pause
	[[ $WHAT == pause ]] || build_controller
fi
for p in "${PEERS[@]}"; do build_peer "$p"; done

printf '==> build time %.1fs\n' "$(since "$T0")"
if [[ -n $PAUSE_SIZE ]]; then
	echo "==> $PAUSE: unpacked $(mb "$PAUSE_SIZE") MB, archive build/image/pause.oci.tar $(mb "$(stat -c %s "$OUT/pause.oci.tar")") MB"
fi
if [[ -n $CTL_SIZE ]]; then
	echo "==> $IMAGE: unpacked $(mb "$CTL_SIZE") MB, archive build/image/sample-controller-c.oci.tar $(mb "$(stat -c %s "$OUT/sample-controller-c.oci.tar")") MB"
	((CTL_SIZE <= MAX_UNPACKED)) || die "$IMAGE is $(mb "$CTL_SIZE") MB unpacked, more than the 25 MB allowed"
fi
for p in "${PEER_SIZES[@]}"; do
	read -r ref size file <<<"$p"
	echo "==> $ref: unpacked $(mb "$size") MB, archive build/image/$file $(mb "$(stat -c %s "$OUT/$file")") MB"
done
