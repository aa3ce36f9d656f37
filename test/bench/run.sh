#!/usr/bin/env bash
# make bench: every benchmark of the project, printing figures. Speed is
# never a pass/fail condition here; the script fails only when a benchmark
# cannot run (build error, crash, failed request). The targets it reports
# against are in DESIGN.md, "Measured targets".
#
#   1. test/bench/picker.sh   instructions per request (callgrind) and
#                             requests per second (wrk), zonal vs. static
#                             upstream
#   2. cgo/table              encoding and publishing a 100k-peer table
#   3. test/e2e               endpoint change -> first request on the new peer
#   4. test/bench/controller  model build and render at scale, controller
#                             memory, EndpointSlice update -> first request
#
# Environment: BENCH_STEPS (default "picker table e2e controller"), GOBENCHFLAGS (extra
# `go test` flags, e.g. "-count=5 -benchtime=2s"); picker.sh reads its own
# (N1, N2, REPEAT, ROUNDS, DURATION, ...; see its header).
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top" || exit 1
GO=${GO:-go}
read -r -a goflags <<<"${GOBENCHFLAGS:-}"
steps=${BENCH_STEPS:-picker table e2e controller}

failed=()
header() {
	echo
	echo "################################################################################"
	echo "# $1"
	shift
	local l
	for l in "$@"; do echo "#   $l"; done
	echo "################################################################################"
}
step() { # step NAME COMMAND...: run, record a failure, go on
	local name=$1 start=$SECONDS rc
	shift
	"$@"
	rc=$?
	if ((rc != 0)); then
		failed+=("$name (exit $rc)")
		echo "bench: $name FAILED (exit $rc)"
	fi
	echo "bench: $name took $((SECONDS - start)) s"
}

echo "zonal benchmarks on $(uname -m), $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "Shared machines are noisy: rates vary +-5-20 % between runs; instruction counts do not."

for s in $steps; do
	case $s in
	picker)
		header "1. picker cost: zonal upstream (A) vs. static upstream (B) of the same peers" \
			"targets: Ir/request A/B <= 1.03 (valgrind), requests/s A/B >= 0.98 (wrk)"
		step picker "$top/test/bench/picker.sh"
		;;
	table)
		header "2. endpoint table: encode and publish (cgo/table)" \
			"target: 100k peers / 10k backends, snapshot <= 8 MB, published <= 20 ms"
		step table "$GO" test -run '^$' -bench . -benchmem "${goflags[@]}" ./cgo/table/
		;;
	e2e)
		header "3. endpoint change -> first request served by the new peer (test/e2e)" \
			"target: p99 <= 10 ms after the event"
		if [[ -d $top/test/e2e ]]; then
			step e2e "$GO" test -run '^$' -bench PublishToFirstRequest "${goflags[@]}" ./test/e2e/
		else
			echo "bench: test/e2e does not exist yet"
			failed+=("e2e (test/e2e missing)")
		fi
		;;
	controller)
		header "4. controller: model and render at 5,000 Ingresses, memory, EndpointSlice update -> first request (test/bench/controller)" \
			"targets: model build <= 200 ms; update -> first request p99 <= 10 ms"
		# One pass each for the big cluster (each iteration is a whole
		# controller), many updates for the latency percentiles.
		step controller "$GO" test -run '^$' -bench 'ModelAndRender|ControllerMemory|File' -benchtime 1x "${goflags[@]}" ./test/bench/controller/
		step controller-latency "$GO" test -run '^$' -bench 'EndpointToFirstRequest$' -benchtime 300x "${goflags[@]}" ./test/bench/controller/
		;;
	*)
		echo "bench: unknown step $s (known: picker table e2e controller)"
		failed+=("$s (unknown)")
		;;
	esac
done

echo
if ((${#failed[@]})); then
	echo "bench: could not run: ${failed[*]}"
	exit 1
fi
echo "bench: all benchmarks ran (figures above; speed is not checked)"
