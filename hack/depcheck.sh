#!/usr/bin/env bash
# depcheck: every #include in the library (pkg/ and include/ckube/) points down the
# layering, so that a module can be understood, tested and reused with only the
# modules below it. make depcheck runs it; make lint runs it too.
#
# The layering, lowest first (an include may only point to a lower layer, or inside
# its own module; modules of one layer may not include each other):
#
#   base <- log, flag, flowcontrol <- meta, workqueue <- codec <- kinds, clientcmd
#        <- rest <- apply <- gen, controllerutil <- cache, record, leaderelection <- metrics, fake, sharding
#        <- manager, envtest
#
# The places follow the real dependencies: flowcontrol (the token bucket) needs only
# base; the workqueue needs base and flowcontrol, nothing of Kubernetes; apply sends
# its patches through rest (ck_client_merge_patch_sync); gen's accessors build
# patches, and so do controllerutil's helpers (finalizers, owner references,
# create-or-update, conditions, typed bodies); fake (the in-memory API server for
# tests) serves a client through rest's transport hook and hands out cache's
# informer factory; sharding splits buckets among replicas on Leases held
# through leader election's own core (pkg/leaderelection/le_internal.h); envtest, beside the manager, starts a test's real control plane
# and talks to it through rest. cmd/, examples/ and tests/ sit above all of it and
# are not checked.
#
# Usage: hack/depcheck.sh [file...]   (default: every .c and .h of pkg/ and include/ckube/)
#        hack/depcheck.sh --self-test   it refuses a wrong include and passes a right
#                                       one, in a scratch tree (make depcheck runs it)
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
if [ "${1:-}" = --self-test ]; then
	tmp=$(mktemp -d /tmp/depcheck.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/pkg/meta" "$tmp/pkg/rest"
	printf '#include <ckube/client.h>\n' >"$tmp/pkg/meta/wrong.c"
	printf '#include <ckube/obj.h>\n#include "pkg/meta/obj_internal.h"\n' >"$tmp/pkg/rest/right.c"
	DEPCHECK_ROOT="$tmp" bash "$self" pkg/rest/right.c >/dev/null ||
		{ echo "depcheck self-test: a right include was refused" >&2; exit 1; }
	if out=$(DEPCHECK_ROOT="$tmp" bash "$self" pkg/meta/wrong.c 2>&1); then
		echo "depcheck self-test: meta including <ckube/client.h> was let through" >&2
		exit 1
	fi
	grep -q 'meta includes <ckube/client.h> of rest, which is not below it' <<<"$out" ||
		{ echo "depcheck self-test: unexpected complaint: $out" >&2; exit 1; }
	echo "depcheck: self-test ok (a wrong include refused, a right one passed)"
	exit 0
fi
cd "${DEPCHECK_ROOT:-$(dirname "$self")/..}"

LAYERS=(
	"base"
	"log flag flowcontrol"
	"meta workqueue"
	"codec"
	"kinds clientcmd"
	"rest"
	"apply"
	"gen controllerutil"
	"cache record leaderelection"
	"metrics fake sharding"
	"manager envtest"
)

# Each public header -> the module that implements it. Two belong to no module, and
# nothing in the library may include them: ckube.h, the umbrella header for programs,
# and check.h, the runner of users' unit tests (header-only, over the check package,
# which libckube does not link).
declare -A HEADER=(
	[export]=base [version]=base [base]=base
	[log]=log [flag]=flag [flowcontrol]=flowcontrol
	[obj]=meta [status]=meta [shard]=meta [workqueue]=workqueue
	[decode]=codec [json]=codec
	[kinds]=kinds [types]=kinds [config]=clientcmd
	[client]=rest [patch]=apply [gen]=gen
	[controllerutil]=controllerutil [conditions]=controllerutil [applyconfig]=controllerutil
	[cache]=cache [cache_fake]=cache [predicate]=cache [record]=record [leaderelection]=leaderelection
	[metrics]=metrics [sharding]=sharding [manager]=manager [fake]=fake [envtest]=envtest
	[ckube]= [check]=
)

declare -A LEVEL=()
order=""
for i in "${!LAYERS[@]}"; do
	for m in ${LAYERS[$i]}; do
		LEVEL[$m]=$i
	done
	order+="${order:+ <- }${LAYERS[$i]// /, }"
done

fail=0
complain() {
	echo "depcheck: $*" >&2
	fail=1
}

# The module a library file belongs to ("" for the umbrella or an unmapped header).
module_of_file() {
	local f=$1
	case "$f" in
	include/ckube/*.h)
		local h=${f#include/ckube/}
		h=${h%.h}
		[[ -v HEADER[$h] ]] && echo "${HEADER[$h]}"
		;;
	pkg/*/*)
		local m=${f#pkg/}
		echo "${m%%/*}"
		;;
	esac
	return 0
}

if [ $# -eq 0 ]; then
	set -- $(find pkg include/ckube -name '*.[ch]' | sort)
fi

for d in pkg/*/; do
	m=${d#pkg/}
	m=${m%/}
	[[ -v LEVEL[$m] ]] || complain "pkg/$m/: module not placed in a layer (add it to LAYERS in hack/depcheck.sh)"
done

for f in "$@"; do
	if [ "$f" = include/ckube/ckube.h ]; then
		continue # the umbrella includes everything, by design
	fi
	if [ "$f" = include/ckube/check.h ]; then
		# Users' test support: it includes <check.h> and no header of the library.
		grep -q '^[ \t]*#[ \t]*include[ \t]*[<"]\(ckube\|pkg\)/' "$f" &&
			complain "$f: includes a library header; it is test support over check only"
		continue
	fi
	src=$(module_of_file "$f")
	if [ -z "$src" ]; then
		complain "$f: public header not mapped to a module (add it to HEADER in hack/depcheck.sh)"
		continue
	fi
	[[ -v LEVEL[$src] ]] || continue # reported above
	# "N:target" for each #include of a library header.
	while IFS=: read -r line target; do
		case "$target" in
		ckube/*)
			h=${target#ckube/}
			h=${h%.h}
			if [[ ! -v HEADER[$h] ]]; then
				complain "$f:$line: includes <$target>, which is not a mapped public header"
				continue
			fi
			dst=${HEADER[$h]}
			if [ "$h" = check ]; then
				complain "$f:$line: includes <$target>, test support that needs the check package, which libckube does not link"
				continue
			fi
			if [ -z "$dst" ]; then
				complain "$f:$line: includes <$target>, the umbrella header for programs; include the module's own header"
				continue
			fi
			what="<$target>"
			;;
		pkg/*)
			dst=${target#pkg/}
			dst=${dst%%/*}
			what="\"$target\""
			;;
		*) continue ;;
		esac
		[ "$dst" = "$src" ] && continue
		if [[ ! -v LEVEL[$dst] ]]; then
			complain "$f:$line: includes $what of unknown module $dst"
			continue
		fi
		if ((LEVEL[$dst] >= LEVEL[$src])); then
			complain "$f:$line: $src includes $what of $dst, which is not below it"
		fi
	done < <(awk '/^[ \t]*#[ \t]*include[ \t]*[<"](ckube|pkg)\// {
		s = $0
		sub(/^[ \t]*#[ \t]*include[ \t]*[<"]/, "", s)
		sub(/[>"].*/, "", s)
		print FNR ":" s
	}' "$f")
done

if [ $fail -ne 0 ]; then
	echo "depcheck: FAILED (layering: $order)" >&2
	exit 1
fi
echo "depcheck: ok: $# files; layering: $order"
