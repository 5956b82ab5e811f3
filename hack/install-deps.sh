#!/usr/bin/env bash
# Install the Debian packages the build, tests and tools need; only the missing ones.
# Idempotent; works as root or through sudo. Prints what it installs.
set -euo pipefail
pkgs=(build-essential pkg-config git curl ca-certificates openssl
	libcurl4-openssl-dev libyajl-dev libyaml-dev libev-dev check libmicrohttpd-dev libgnutls28-dev
	etcd-server clang clang-format cppcheck valgrind libclang-rt-14-dev
	python3 python3-prometheus-client python3-yaml procps iproute2 util-linux jq
	containerd runc containernetworking-plugins iptables buildah mmdebstrap)
missing=()
for p in "${pkgs[@]}"; do
	if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != 'install ok installed' ]; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
