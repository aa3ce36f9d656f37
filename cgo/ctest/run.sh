#!/usr/bin/env bash
# C-level tests of the endpoint table reader (cgo/table/zonal_table.c).
#
#   cgo/ctest/run.sh test            build and run table_test under ASan+UBSan
#   cgo/ctest/run.sh fuzz [SECONDS]  build fuzz_table (libFuzzer) and run it
#                                    for SECONDS (default 10) on a seed corpus
#                                    written by table_test --write-corpus
#
# Everything built or written goes to $ZONAL_CTEST_OUT (default
# <repo>/.cache/ctest), never into the source tree. Both modes are bounded
# in time; the exit status is non-zero on any failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
src=$root/cgo/table
out=${ZONAL_CTEST_OUT:-$root/.cache/ctest}
mkdir -p "$out"

warn=(-Wall -Wextra -Werror)
san=(-fsanitize=address,undefined -fno-sanitize-recover=all)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

build_test() {
	gcc -std=gnu11 -O1 -g "${san[@]}" "${warn[@]}" -I"$src" \
		-o "$out/table_test" "$here/table_test.c" "$src/zonal_table.c"
}

ensure_clang() {
	# libFuzzer and the sanitizer runtimes for clang ship in libclang-rt-dev.
	if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }' |
		clang -x c -fsanitize=fuzzer,address,undefined -o "$out/.probe" - 2>/dev/null; then
		rm -f "$out/.probe"
		return
	fi
	if [[ -x $root/build/deps.sh ]]; then
		"$root/build/deps.sh" clang libclang-rt-dev
	else
		sudo=()
		((EUID == 0)) || sudo=(sudo)
		"${sudo[@]}" apt-get install -y -qq --no-install-recommends clang libclang-rt-dev
	fi
}

case ${1:-test} in
test)
	build_test
	timeout 600 "$out/table_test"
	;;
fuzz)
	secs=${2:-10}
	[[ $secs =~ ^[0-9]+$ ]] || { echo "run.sh fuzz: seconds must be a number" >&2; exit 2; }
	ensure_clang
	build_test
	clang -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		"${warn[@]}" -I"$src" -o "$out/fuzz_table" "$here/fuzz_table.c" "$src/zonal_table.c"
	rm -rf "$out/seeds"
	mkdir -p "$out/seeds" "$out/corpus" "$out/artifacts"
	"$out/table_test" --write-corpus "$out/seeds"
	# corpus/ keeps what earlier runs found; seeds/ is rewritten each run.
	timeout $((secs + 120)) "$out/fuzz_table" \
		-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
		-print_final_stats=1 -artifact_prefix="$out/artifacts/" \
		"$out/corpus" "$out/seeds"
	;;
*)
	echo "usage: $0 test | fuzz [seconds]" >&2
	exit 2
	;;
esac
