#!/usr/bin/env bash
# Build the controller-runtime peer of the sample-controller benchmark
# (bench/peers/controller-runtime: the same reconciliation as Kubernetes'
# sample-controller, written on a controller-runtime manager), once per source, into
# the cache (see bench/build_go_peer.sh).
#
# Flags of the binary: -kubeconfig, -namespace, -kube-api-qps, -kube-api-burst (see
# the peer's main.go). Prints the binary's path on its last line.
exec bash "$(dirname "$0")/build_go_peer.sh" controller-runtime sample-controller-cr
