# Sourced by tests/envtest/run.sh and tests/lib/run.sh: run envtest as an unprivileged
# user, with the binaries where that user can read them.
#
#   envtest_user_setup WORKDIR   (WORKDIR: a fresh directory of the caller's)
# sets $envtest_user (nobody when root, else the caller), $envtest_src (where the
# binaries were found), $envtest_assets (where that user reads them) and defines
#   as_user COMMAND...   COMMAND as that user, CKUBE_ENVTEST_ASSETS=$envtest_assets,
#                        a clean environment (PATH, HOME, ASAN_OPTIONS, LD_LIBRARY_PATH)
# Returns non-zero, saying why, when the binaries are not there and cannot be built.
envtest_user_setup() {
	local work="$1" root
	root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
	chmod 755 "$work"
	envtest_src="${CKUBE_ENVTEST_ASSETS:-}"
	if [ -z "$envtest_src" ]; then
		envtest_src="$(bash "$root/hack/build-k8s.sh" envtest | tail -n 1)" ||
			{ echo "envtest: no binaries: set CKUBE_ENVTEST_ASSETS or run hack/build-k8s.sh envtest"; return 1; }
	fi
	if [ "$(id -u)" = 0 ]; then
		envtest_user=nobody
		# ~/.cache under /root is not readable by nobody: the same files, linked (or copied).
		envtest_assets="$work/assets"
		mkdir -p "$envtest_assets"
		local b
		for b in etcd kube-apiserver; do
			ln -f "$envtest_src/$b" "$envtest_assets/$b" 2>/dev/null || cp "$envtest_src/$b" "$envtest_assets/$b"
		done
		chmod 755 "$envtest_assets"
		as_user() {
			setpriv --reuid=nobody --regid=nogroup --clear-groups env -i PATH=/usr/bin:/bin HOME=/nonexistent \
				ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
				CKUBE_ENVTEST_ASSETS="$envtest_assets" "$@"
		}
	else
		envtest_user="$(id -un)"
		envtest_assets="$envtest_src"
		as_user() { env CKUBE_ENVTEST_ASSETS="$envtest_assets" "$@"; }
	fi
}
