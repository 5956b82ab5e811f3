#!/usr/bin/env bash
# Builds the kubeconfig loader's libFuzzer target (tests/fuzz/fuzz_kubeconfig.c:
# kconfig_load_text + kconfig_view + kconfig_credentials_peek, with an in-memory
# folder instead of real files and a trap instead of posix_spawn) and runs it,
# single-process, on seeds made from the kubeconfig fixtures and .local-style
# configs (the shape hack/local-up.sh writes, with fake secrets).
#   bash tests/fuzz/run_fuzz_kubeconfig.sh [SECONDS] [libFuzzer flags...]
# SECONDS (default 60) becomes -max_total_time. Crashes go to $B/artifacts-kubeconfig/.
# The other target: tests/fuzz/run_fuzz_decode.sh (the JSON decoder).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/fuzz/lib.sh
secs=60
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
	secs=$1
	shift
fi
seeds="$B/seeds_kubeconfig"
mkdir -p "$B/corpus_kubeconfig" "$B/artifacts-kubeconfig" "$seeds"
# shellcheck disable=SC2046
fuzz_build fuzz_kubeconfig $(pkg-config --cflags yaml-0.1 yajl 2>/dev/null) -Wl,--wrap=ck_file_read_all,--wrap=ck_file_read_bounded,--wrap=posix_spawn,--wrap=posix_spawnp tests/fuzz/fuzz_kubeconfig.c pkg/base/base.c pkg/clientcmd/config.c pkg/clientcmd/config_kubeconfig.c pkg/clientcmd/config_incluster.c pkg/clientcmd/config_exec.c pkg/clientcmd/config_creds.c pkg/codec/json.c pkg/codec/syntax.c pkg/meta/obj.c pkg/kinds/types.c pkg/kinds/kinds.c -lyaml -lyajl

# Seeds: every kubeconfig fixture, as is.
i=0
for f in tests/fixtures/kubeconfig/*.yaml tests/fixtures/kubeconfig/merge-b/config; do
	cp "$f" "$seeds/fixture-$i"
	i=$((i + 1))
done
# .local-style configs (hack/local-up.sh), with the fake fixture CA/cert/key as data.
b64() { base64 -w0 <"tests/fixtures/kubeconfig/$1"; }
cat >"$seeds/local-admin" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: $(b64 ca.pem)
users:
- name: token-admin
  user:
    token: 0123456789abcdef0123456789abcdef0123456789abcdef
- name: cert-admin
  user:
    client-certificate-data: $(b64 client.crt)
    client-key-data: $(b64 client.key)
contexts:
- name: token
  context: {cluster: local, user: token-admin, namespace: default}
- name: cert
  context: {cluster: local, user: cert-admin, namespace: default}
current-context: token
YAML
sed 's/^current-context: token$/current-context: cert/' "$seeds/local-admin" >"$seeds/local-cert"
printf '#fuzz: context=cert master=https://[::1]:6443/\n' | cat - "$seeds/local-admin" \
	>"$seeds/local-opts"
cat >"$seeds/local-component" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: $(b64 ca.pem)
users:
- name: u
  user:
    token: fedcba9876543210fedcba9876543210fedcba9876543210
contexts:
- name: local
  context: {cluster: local, user: u}
current-context: local
YAML
# Files and exec forms that the in-memory folder answers.
cat >"$seeds/files-exec" <<'YAML'
apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster:
    server: exec.test:6443
    certificate-authority: /fuzz/ca.pem
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: &x {audience: a, list: [1, -2.5e3, true, null, ~, "s"], nested: {m: *x}}
contexts:
- name: c
  context: {cluster: c, user: u, namespace: ns-1}
users:
- name: u
  user:
    client-certificate: client.crt
    client-key: client.key
    tokenFile: empty
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: plugin
      args: [a, b]
      env: [{name: A, value: b}]
      provideClusterInfo: true
YAML
# Rarer branches: NUL escapes, insecure with a CA, interactiveMode Always, blank -data.
cat >"$seeds/edge-nul" <<'YAML'
current-context: c
clusters: [{name: c, cluster: {server: "https://h:1", extensions: [{name: client.authentication.k8s.io/exec, extension: {"a\0b": "x\0y", "\u0000": [!!binary AAEC, 1e999, -0, 01, .5]}}]}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: "t\0k", exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, provideClusterInfo: true, args: ["a\0b"]}}}]
YAML
cat >"$seeds/edge-insecure-ca" <<'YAML'
current-context: c
clusters: [{name: c, cluster: {server: "h:1", insecure-skip-tls-verify: true, certificate-authority: ca.pem}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Always}}}]
YAML
cat >"$seeds/edge-insecure-exec" <<'YAML'
current-context: c
clusters: [{name: c, cluster: {server: "h:1", insecure-skip-tls-verify: yes, proxy-url: "socks5://p"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {client-certificate-data: " ", exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/x, interactiveMode: IfAvailable, provideClusterInfo: true, env: [{name: A}]}}}]
YAML

"$B/fuzz_kubeconfig" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
	-dict=tests/fuzz/fuzz_kubeconfig.dict -artifact_prefix="$B/artifacts-kubeconfig/" \
	-max_total_time="$secs" "$@" "$B/corpus_kubeconfig" "$seeds"
