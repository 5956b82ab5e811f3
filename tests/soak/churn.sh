#!/usr/bin/env bash
# churn.sh NS SECONDS METRICS_ADDR (used by tests/soak/run.sh): random Foo creates,
# updates and deletes, Deployment drift (scale, delete) and foreign Deployments in NS,
# scraping the daemon's /metrics as it goes.
set -u
ns=$1 secs=$2 m=$3
end=$(( $(date +%s) + secs ))
i=0
while [ "$(date +%s)" -lt "$end" ]; do
	i=$((i + 1)); n=$((RANDOM % 40)); r=$((RANDOM % 3 + 1))
	case $((RANDOM % 6)) in
	0|1) printf 'apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: f%d}\nspec: {deploymentName: d%d, replicas: %d}\n' $n $n $r |
		kubectl -n "$ns" apply -f - >/dev/null 2>&1 ;;
	2) kubectl -n "$ns" delete foo f$n --wait=false >/dev/null 2>&1 ;;
	3) kubectl -n "$ns" scale deploy d$n --replicas=$((r + 3)) >/dev/null 2>&1 ;;
	4) kubectl -n "$ns" delete deploy d$n --wait=false >/dev/null 2>&1 ;;
	5) kubectl -n "$ns" create deployment d$n --image=busybox >/dev/null 2>&1 ;;
	esac
	[ $((i % 20)) = 0 ] && curl -sf "http://$m/metrics" >/dev/null
done
echo "churn $ns: $i operations"
