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

# fuzz_run NAME CORPUS [SECONDS] [libFuzzer flags...]: runs $B/fuzz_NAME on CORPUS
# (where new inputs are written), then the committed seeds in tests/fuzz/seeds/NAME
# if there are any (read only); a first argument that is a number is the time
# limit (default 60 s); crashes go to $B/artifacts-NAME/. FUZZ_MAX_LEN (default
# 65536) bounds an input.
fuzz_run() {
	local name="$1" corpus="$2" secs=60
	shift 2
	if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
		secs=$1
		shift
	fi
	case " $* " in *" -max_total_time="*) ;; *) set -- -max_total_time="$secs" "$@" ;; esac
	local seeds=()
	[ -d "tests/fuzz/seeds/$name" ] && seeds=("tests/fuzz/seeds/$name")
	mkdir -p "$B/artifacts-$name"
	"$B/fuzz_$name" -max_len="${FUZZ_MAX_LEN:-65536}" -artifact_prefix="$B/artifacts-$name/" \
		"$@" "$corpus" "${seeds[@]}"
}
