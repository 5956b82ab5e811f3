#!/usr/bin/env bash
# libckube as its users get it (make libcheck, part of make test):
#   symbols     the shared library exports only ck_* names, every CKUBE_API
#               function is exported, the archive's global symbols are ck_* only
#   version     include/ckube/version.h matches the VERSION file
#   headers     every installed header compiles on its own (-std=c11 -Wall -Werror)
#   install     make install DESTDIR=... PREFIX=/usr lays out lib, soname, headers, .pc
#   dynamic     a program built with `pkg-config --cflags --libs ckube` only, which
#               defines fatal(), xmalloc(), chash_find(), rand_u64() itself, links
#               and runs against libckube.so.<major>
#   static      the same with `pkg-config --static --cflags --libs ckube-static`:
#               no libckube.so needed at run time
#   examples    every examples/*/ C program builds the same two ways
# Prints "N passed, N failed"; exits non-zero on any failure.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
B="${B:-build}"
VERSION="$(cat VERSION)"
MAJOR="${VERSION%%.*}"
tmp="$(mktemp -d /tmp/ckube-lib.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

run() { # run NAME FUNCTION
	local name="$1" fn="$2"
	if "$fn" >"$tmp/$name.log" 2>&1; then
		echo "  ok    lib $name"
		passed=$((passed + 1))
	else
		echo "  FAIL  lib $name"
		sed 's/^/        /' "$tmp/$name.log" | tail -n 30
		failed=$((failed + 1))
	fi
}

so="lib/libckube.so.$VERSION"

t_symbols() {
	[ -f "$so" ] && [ -f lib/libckube.a ] || { echo "build the library first (make all)"; return 1; }
	nm -D --defined-only "$so" | awk '{ print $3 }' | sort -u >"$tmp/dyn.txt"
	local bad
	bad=$(grep -v '^ck_' "$tmp/dyn.txt" || true)
	[ -z "$bad" ] || { echo "exported without the ck_ prefix:"; echo "$bad"; return 1; }
	# Every CKUBE_API function of the headers is exported (none forgotten).
	grep -ho 'CKUBE_API[^;(]*(' include/ckube/*.h | grep -o 'ck_[a-z0-9_]*[[:space:]]*($' |
		tr -d ' (' | sort -u >"$tmp/api.txt"
	local missing
	missing=$(comm -23 "$tmp/api.txt" "$tmp/dyn.txt")
	[ -z "$missing" ] || { echo "declared CKUBE_API but not exported:"; echo "$missing"; return 1; }
	nm -g --defined-only lib/libckube.a | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/ar.txt"
	bad=$(grep -v '^ck_' "$tmp/ar.txt" || true)
	[ -z "$bad" ] || { echo "global in libckube.a without the ck_ prefix:"; echo "$bad"; return 1; }
	local dyn
	dyn=$(readelf -d "$so")
	grep -q "SONAME.*\[libckube.so.$MAJOR\]" <<<"$dyn" || { echo "soname is not libckube.so.$MAJOR"; return 1; }
	echo "$(wc -l <"$tmp/dyn.txt") exported symbols, all ck_*; $(wc -l <"$tmp/api.txt") CKUBE_API functions"
}

t_version() {
	local h
	h=$(awk '/#define CKUBE_VERSION_(MAJOR|MINOR|PATCH) / { printf "%s%s", sep, $3; sep = "." }' include/ckube/version.h)
	[ "$h" = "$VERSION" ] || { echo "version.h says $h, VERSION says $VERSION"; return 1; }
	grep -q "#define CKUBE_VERSION_STRING \"$VERSION\"" include/ckube/version.h
}

t_install() {
	make --no-print-directory install DESTDIR="$tmp/root" PREFIX=/usr B="$B" >/dev/null || return 1
	local f
	for f in usr/lib/libckube.a "usr/lib/libckube.so.$VERSION" "usr/lib/libckube.so.$MAJOR" usr/lib/libckube.so \
		usr/include/ckube/ckube.h usr/include/ckube/manager.h usr/lib/pkgconfig/ckube.pc usr/lib/pkgconfig/ckube-static.pc; do
		[ -e "$tmp/root/$f" ] || { echo "missing $f"; return 1; }
	done
	[ "$(readlink "$tmp/root/usr/lib/libckube.so.$MAJOR")" = "libckube.so.$VERSION" ]
}

pc() { PKG_CONFIG_PATH="$tmp/root/usr/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$tmp/root" pkg-config "$@"; }

t_headers() {
	local h
	for h in "$tmp"/root/usr/include/ckube/*.h; do
		printf '#include <ckube/%s>\n#include <ckube/%s>\n' "$(basename "$h")" "$(basename "$h")" >"$tmp/h.c"
		cc -std=c11 -Wall -Wextra -Werror -fsyntax-only $(pc --cflags ckube) "$tmp/h.c" ||
			{ echo "$(basename "$h") does not compile on its own"; return 1; }
	done
}

# build_dyn OUT SOURCES...: with pkg-config ckube only; ldd must name libckube.so.MAJOR.
build_dyn() {
	local out="$1"; shift
	# shellcheck disable=SC2046
	cc -std=c11 -O2 -Wall -Wextra -Werror -o "$out" "$@" $(pc --cflags --libs ckube) || return 1
	# (ldd's output kept first: `ldd | grep -q` fails under pipefail when grep quits early.)
	local deps
	deps=$(LD_LIBRARY_PATH="$tmp/root/usr/lib" ldd "$out")
	grep -q "libckube.so.$MAJOR => $tmp/root/usr/lib/" <<<"$deps" ||
		{ echo "$out does not load the installed libckube.so.$MAJOR:"; echo "$deps"; return 1; }
}
# build_static OUT SOURCES...: with pkg-config --static ckube-static; no libckube.so.
build_static() {
	local out="$1"; shift
	# shellcheck disable=SC2046
	cc -std=c11 -O2 -Wall -Wextra -Werror -o "$out" "$@" $(pc --static --cflags --libs ckube-static) || return 1
	local deps
	deps=$(ldd "$out")
	if grep -q libckube <<<"$deps"; then echo "$out still loads libckube.so"; return 1; fi
}

t_dynamic() {
	build_dyn "$tmp/hello" tests/lib/hello.c || return 1
	LD_LIBRARY_PATH="$tmp/root/usr/lib" "$tmp/hello" | tee "$tmp/hello.out"
	grep -q "^libckube $VERSION server https://127.0.0.1:6443 2 4$" "$tmp/hello.out"
}

t_static() {
	build_static "$tmp/hello-static" tests/lib/hello.c || return 1
	"$tmp/hello-static" | grep -q "^libckube $VERSION server https://127.0.0.1:6443 2 4$"
}

t_examples() {
	local d n=0
	for d in examples/*/; do
		ls "$d"*.c >/dev/null 2>&1 || continue
		local name
		name=$(basename "$d")
		build_dyn "$tmp/$name" "$d"*.c || return 1
		build_static "$tmp/$name-static" "$d"*.c || return 1
		# Each example's manager answers --version with "<name> <version>".
		local v
		v=$(LD_LIBRARY_PATH="$tmp/root/usr/lib" "$tmp/$name" --version) || return 1
		[[ "$v" =~ ^$name\ [0-9] ]] || { echo "$name --version: $v"; return 1; }
		v=$("$tmp/$name-static" --version) || return 1
		[[ "$v" =~ ^$name\ [0-9] ]] || { echo "$name-static --version: $v"; return 1; }
		n=$((n + 1))
	done
	[ "$n" -ge 1 ] || { echo "no C example under examples/"; return 1; }
	echo "$n examples built dynamically and statically from the installed tree"
}

echo "== libckube as installed"
run symbols t_symbols
run version t_version
run install t_install
run headers t_headers
run dynamic t_dynamic
run static t_static
run examples t_examples
echo "lib: $passed passed, $failed failed"
[ "$failed" = 0 ]
