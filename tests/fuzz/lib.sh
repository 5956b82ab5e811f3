# Shared by tests/fuzz/run_fuzz_*.sh: how a libFuzzer target is built and run.
# shellcheck shell=bash
B=${B:-build-fuzz}
FUZZ_CFLAGS=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-std=c11 -D_GNU_SOURCE -Iinclude -I.)

# fuzz_build OUT SOURCES-AND-FLAGS...: clang with the sanitizers, into $B/OUT.
fuzz_build() {
	local out="$1"
	shift
	mkdir -p "$B"
	clang "${FUZZ_CFLAGS[@]}" "$@" -pthread -lm -o "$B/$out"
}

# fuzz_run NAME CORPUS [SECONDS] [libFuzzer flags...]: runs $B/fuzz_NAME on CORPUS;
# a first argument that is a number is the time limit (default 60 s); crashes go
# to $B/artifacts-NAME/.
fuzz_run() {
	local name="$1" corpus="$2"
	shift 2
	if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
		local secs=$1
		shift
		set -- -max_total_time="$secs" "$@"
	fi
	if [ $# -eq 0 ]; then set -- -max_total_time=60; fi
	mkdir -p "$B/artifacts-$name"
	"$B/fuzz_$name" -max_len=65536 -artifact_prefix="$B/artifacts-$name/" "$@" "$corpus"
}
