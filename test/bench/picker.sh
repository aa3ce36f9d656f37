#!/usr/bin/env bash
# The cost of the zonal picker against the floor: one NGINX configuration
# proxying to the same peers through
#
#   A  the zonal upstream (zonal_upstream $zonal_backend; keepalive 64) over a
#      published endpoint table (one backend, local share 100 %; A70 is the
#      same with local share 70 %, so 30 % of picks spill to the other zone);
#   B  a static upstream of the same peers (server lines; keepalive 64),
#      with the same location, "set $zonal_backend ..." included (B0, the
#      same without the "set", is reported for reference).
#
# Both use proxy_http_version 1.1 and an empty Connection header, the same
# bin/nginx and the same backends: a separate NGINX instance (its own prefix,
# master process, one worker) answering `return 200` on 127.0.0.11-14, so
# backend work is never counted in the proxy's figures.
#
# 1. Instructions per proxied request (deterministic): the proxy runs with
#    master_process off under valgrind --tool=callgrind; one run sends N1
#    sequential keep-alive requests, another N2, and
#    Ir/request = (Ir(N2) - Ir(N1)) / (N2 - N1). Target: A/B <= 1.03.
# 2. Requests per second (noisy): both proxies run side by side (master
#    process, one worker) and wrk alternates A, B, A, B... Target: the median
#    of the per-round ratios A/B >= 0.98.
#
# Prints figures only; it fails only when the benchmark itself cannot run.
#
# Environment: BENCH_NGINX (binary, default bin/nginx), N1 (2000), N2 (12000),
# REPEAT (callgrind repetitions, 2), SHARE70 (1: also measure A70), BARE (1:
# also measure B0, the static upstream without the "set" of the location),
# ROUNDS (wrk rounds per variant, 10), DURATION (seconds per round, 3),
# CONNS (wrk connections, 16), PIN (1: pin the proxies to CPU 0, the rest to
# the other CPUs; off by default: on a shared machine a pinned proxy cannot
# move away from a busy CPU), REQUEST_POOL_SIZE (proxies'
# request_pool_size, default NGINX's 4k; 8k shows the figures without the
# pool-block boundary effect), SKIP_CALLGRIND=1, SKIP_RPS=1, KEEP=1 (keep the
# temporary directory).
set -euo pipefail
export LC_ALL=C

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nginx=${BENCH_NGINX:-$top/bin/nginx}
# NGINX reads an environment variable named NGINX as sockets inherited from
# a binary upgrade: it then neither daemonizes nor trusts its pid file.
unset NGINX
N1=${N1:-2000}
N2=${N2:-12000}
REPEAT=${REPEAT:-2}
SHARE70=${SHARE70:-1}
BARE=${BARE:-1}
ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-3}
CONNS=${CONNS:-16}

BACKEND_NAME=bench-echo-80
BACKEND_ADDRS=(127.0.0.11 127.0.0.12 127.0.0.13 127.0.0.14)
BACKEND_ZONES=(zone-a zone-a zone-b zone-b) # zone-a is the proxy's zone

log() { echo "picker: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[[ -x $nginx ]] || die "$nginx not found: run build/nginx.sh (or set BENCH_NGINX=...)"
((N2 > N1)) || die "N2 ($N2) must be larger than N1 ($N1)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zonal-bench.XXXXXX")
# NGINX workers run as "nobody" when started by root: they must reach the
# table directories.
chmod 755 "$tmp"
pids=() # processes we started (NGINX masters, valgrind), stopped on exit

cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -QUIT "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
	done
	if [[ ${KEEP:-} == 1 ]]; then
		log "kept $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

forget_pid() {
	local p keep=()
	for p in "${pids[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

# free_port ADDR...: a TCP port below the ephemeral range that nothing
# listens on at any of ADDRs (nor on the wildcard address).
free_port() {
	local p a busy
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 12000))
		busy=0
		for a in "$@" 0.0.0.0 '*' '[::]'; do
			if ss -Htln "sport = :$p" | awk '{print $4}' | grep -qF "$a:$p"; then
				busy=1
			fi
		done
		((busy)) || {
			echo "$p"
			return
		}
	done
	die "no free port found"
}

# wait_listen ADDR PORT SECONDS: until something listens there (checked
# with ss, so that no connection reaches the server being measured).
wait_listen() {
	local deadline=$((SECONDS + $3))
	while ((SECONDS < deadline)); do
		ss -Htln "sport = :$2" | awk '{print $4}' | grep -qxF "$1:$2" && return 0
		sleep 0.1
	done
	return 1
}

# wait_file FILE SECONDS: until FILE exists and is not empty (a pid file).
wait_file() {
	local deadline=$((SECONDS + $2))
	until [[ -s $1 ]]; do
		((SECONDS < deadline)) || die "$1 did not appear in $2 s"
		sleep 0.1
	done
}

# wait_pid PID SECONDS: until PID (our child) exits; KILL it after SECONDS.
wait_pid() {
	local deadline=$((SECONDS + $2))
	while kill -0 "$1" 2>/dev/null; do
		if ((SECONDS >= deadline)); then
			log "process $1 did not exit in $2 s, killing it"
			kill -KILL "$1" 2>/dev/null || true
			break
		fi
		sleep 0.1
	done
	wait "$1" 2>/dev/null || true
	forget_pid "$1"
}

# --- tools ---------------------------------------------------------------

if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
	if [[ -x $top/build/deps.sh ]]; then
		"$top/build/deps.sh" valgrind
	else
		apt-get install -y -q valgrind >/dev/null
	fi
fi
if ! command -v wrk >/dev/null; then
	if [[ -x $top/build/deps.sh ]]; then
		"$top/build/deps.sh" wrk || log "wrk unavailable: requests per second will be skipped"
	fi
fi

log "building the bench helpers"
(cd "$top" && go build -o "$tmp/publish-table" ./test/bench/publish-table &&
	go build -o "$tmp/load" ./test/bench/load) || die "go build of test/bench helpers failed"

# --- backends --------------------------------------------------------------

bport=$(free_port "${BACKEND_ADDRS[@]}")
peers=()
listens=""
servers=""
for i in "${!BACKEND_ADDRS[@]}"; do
	peers+=("${BACKEND_ADDRS[i]}:$bport@${BACKEND_ZONES[i]}")
	listens+="        listen ${BACKEND_ADDRS[i]}:$bport;"$'\n'
	servers+="        server ${BACKEND_ADDRS[i]}:$bport;"$'\n'
done
peer_list=$(
	IFS=,
	echo "${peers[*]}"
)

mkdir -p "$tmp/backend/logs"
cat >"$tmp/backend/nginx.conf" <<EOF
master_process on;
daemon on;
worker_processes 1;
pid logs/nginx.pid;
error_log logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    server {
$listens
        location / { return 200 "ok\n"; }
    }
}
EOF
# With PIN=1 (and 2+ CPUs) the proxies of the requests-per-second comparison
# run on CPU 0 and everything else (backends, wrk) on the other CPUs, so that
# the proxy is the bottleneck. Off by default: on a shared machine whose CPU 0
# is busy, pinned proxies ran 3x slower than unpinned ones.
ncpu=$(nproc)
PIN=${PIN:-0}
pin_proxy=()
pin_other=()
if [[ $PIN == 1 ]] && ((ncpu >= 2)) && command -v taskset >/dev/null; then
	pin_proxy=(taskset -c 0)
	pin_other=(taskset -c "1-$((ncpu - 1))")
fi

timeout 30 "${pin_other[@]}" "$nginx" -p "$tmp/backend" -c "$tmp/backend/nginx.conf" || die "backend NGINX failed to start"
wait_file "$tmp/backend/logs/nginx.pid" 5
pids+=("$(<"$tmp/backend/logs/nginx.pid")")
wait_listen "${BACKEND_ADDRS[0]}" "$bport" 10 || die "backend NGINX does not listen"

# --- tables ----------------------------------------------------------------

"$tmp/publish-table" "$tmp/table100" "$BACKEND_NAME" "$peer_list" 100 >&2
"$tmp/publish-table" "$tmp/table70" "$BACKEND_NAME" "$peer_list" 70 >&2

# proxy_conf VARIANT PREFIX PORT MODE: writes PREFIX/nginx.conf for variant
# A (table100), A70 (table70), B (static, same location) or B0 (static, no
# "set"), MODE single (master_process off,
# daemon off, for valgrind) or daemon (master and one worker).
proxy_conf() {
	local variant=$1 prefix=$2 port=$3 mode=$4 head upstream set_var="" table_dir
	mkdir -p "$prefix/logs"
	if [[ $mode == single ]]; then
		head="master_process off;
daemon off;"
	else
		head="master_process on;
daemon on;"
	fi
	case $variant in
	A | A70)
		table_dir=$tmp/table100
		[[ $variant == A70 ]] && table_dir=$tmp/table70
		upstream="    zonal_table $table_dir;
    upstream zonal_balancer {
        zonal_upstream \$zonal_backend;
        keepalive 64;
        keepalive_requests 10000000;
    }"
		;;
	B | B0)
		upstream="    upstream zonal_balancer {
$servers        keepalive 64;
        keepalive_requests 10000000;
    }"
		;;
	esac
	# The location is the same in A and B: an ingress controller names the
	# backend in a variable in every location anyway (ingress-nginx sets
	# $proxy_upstream_name and more). B0 is plain NGINX without it.
	[[ $variant != B0 ]] && set_var="            set \$zonal_backend $BACKEND_NAME;"
	cat >"$prefix/nginx.conf" <<EOF
$head
worker_processes 1;
pid logs/nginx.pid;
error_log logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
$upstream
    server {
        listen 127.0.0.1:$port;
${REQUEST_POOL_SIZE:+        request_pool_size $REQUEST_POOL_SIZE;}
        location / {
$set_var
            proxy_pass http://zonal_balancer;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
	"$nginx" -t -q -p "$prefix" -c "$prefix/nginx.conf" || die "nginx -t failed for variant $variant"
}

variants=(A)
[[ $SHARE70 == 1 ]] && variants+=(A70)
variants+=(B)
[[ $BARE == 1 ]] && variants+=(B0)

# Sanity check every variant once, outside valgrind: 100 requests, all 200.
pport=$(free_port 127.0.0.1)
for v in "${variants[@]}"; do
	proxy_conf "$v" "$tmp/check-$v" "$pport" daemon
	timeout 30 "$nginx" -p "$tmp/check-$v" -c "$tmp/check-$v/nginx.conf" || die "proxy $v failed to start"
	wait_file "$tmp/check-$v/logs/nginx.pid" 5
	pid=$(<"$tmp/check-$v/logs/nginx.pid")
	pids+=("$pid")
	wait_listen 127.0.0.1 "$pport" 10 || die "proxy $v does not listen"
	timeout 30 "$tmp/load" -n 100 "http://127.0.0.1:$pport/" || die "variant $v does not proxy (see $tmp/check-$v/logs/error.log)"
	kill -QUIT "$pid"
	wait_pid "$pid" 10
	# the port is reused by the next variant: wait until it is released
	for _ in $(seq 50); do wait_listen 127.0.0.1 "$pport" 0 || break; sleep 0.1; done
done

# --- 1. instructions per request (callgrind) --------------------------------

# cg_run VARIANT N OUT: runs the single-process proxy under callgrind, sends
# N requests, stops it gracefully; callgrind writes OUT on exit.
cg_run() {
	local v=$1 n=$2 out=$3 prefix=$tmp/cg-$1-$2 port pid
	port=$(free_port 127.0.0.1)
	proxy_conf "$v" "$prefix" "$port" single
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$nginx" -p "$prefix" -c "$prefix/nginx.conf" >"$prefix/valgrind.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	wait_listen 127.0.0.1 "$port" 120 || die "proxy $v under valgrind does not listen (see $prefix/valgrind.log)"
	if ! timeout 900 "$tmp/load" -n "$n" "http://127.0.0.1:$port/"; then
		die "variant $v: load of $n requests failed (see $prefix/logs/error.log)"
	fi
	kill -QUIT "$pid"
	wait_pid "$pid" 120
	[[ -s $out ]] || die "callgrind wrote no $out (see $prefix/valgrind.log)"
}

# total Ir of a callgrind output file
cg_total() {
	awk '/^(summary|totals):/ { print $2; exit }' "$1"
}

# cg_funcs FILE: "function self-Ir" lines (file name and object dropped)
cg_funcs() {
	callgrind_annotate --threshold=100 --auto=no --inclusive=no "$1" 2>/dev/null |
		awk '$1 ~ /^[0-9,]+$/ && $0 ~ /:/ {
			ir = $1; gsub(",", "", ir)
			f = $0; sub(/^ *[0-9,]+ *(\([^)]*\))? */, "", f)
			sub(/ \[.*\]$/, "", f); sub(/^.*:/, "", f)
			s[f] += ir
		} END { for (f in s) print f, s[f] }'
}

cg_incl() {
	callgrind_annotate --threshold=100 --auto=no --inclusive=yes "$1" 2>/dev/null |
		awk '$1 ~ /^[0-9,]+$/ && $0 ~ /:/ {
			ir = $1; gsub(",", "", ir)
			f = $0; sub(/^ *[0-9,]+ *(\([^)]*\))? */, "", f)
			sub(/ \[.*\]$/, "", f); sub(/^.*:/, "", f)
			if (!(f in s)) s[f] = ir
		} END { for (f in s) print f, s[f] }'
}

# per_request N1FILE N2FILE: "function Ir-per-request" from two function lists
per_request() {
	awk -v d=$((N2 - N1)) 'NR == FNR { a[$1] = $2; next }
		{ v = ($2 - a[$1]) / d; if (v > 0.5 || v < -0.5) printf "%s %.1f\n", $1, v }' "$1" "$2"
}

declare -A irq
if [[ ${SKIP_CALLGRIND:-} != 1 ]]; then
	echo
	echo "== instructions per proxied request (callgrind, NGINX single process)"
	echo "   N1=$N1 and N2=$N2 sequential keep-alive requests on one connection;"
	echo "   Ir/request = (Ir(N2) - Ir(N1)) / (N2 - N1); backend NGINX not counted"
	echo "   peers: ${peers[*]} (local zone zone-a)"
	[[ -n ${REQUEST_POOL_SIZE:-} ]] && echo "   request_pool_size $REQUEST_POOL_SIZE"
	for rep in $(seq "$REPEAT"); do
		for v in "${variants[@]}"; do
			log "callgrind run $rep: variant $v, $N1 and $N2 requests"
			cg_run "$v" "$N1" "$tmp/cg.$v.$rep.n1"
			cg_run "$v" "$N2" "$tmp/cg.$v.$rep.n2"
			t1=$(cg_total "$tmp/cg.$v.$rep.n1")
			t2=$(cg_total "$tmp/cg.$v.$rep.n2")
			irq[$v.$rep]=$(awk -v a="$t1" -v b="$t2" -v d=$((N2 - N1)) 'BEGIN { printf "%.1f", (b - a) / d }')
		done
		line="   run $rep:"
		for v in "${variants[@]}"; do
			line+=$(printf "  %s %.1f" "$v" "${irq[$v.$rep]}")
		done
		line+="   "
		for v in "${variants[@]}"; do
			[[ $v == B ]] && continue
			line+=$(awk -v v="$v" -v a="${irq[$v.$rep]}" -v b="${irq[B.$rep]}" 'BEGIN { printf "  %s/B %.4f", v, a / b }')
		done
		echo "$line"
	done
	awk -v a="${irq[A.1]}" -v b="${irq[B.1]}" 'BEGIN {
		r = a / b
		printf "   result: A %.1f Ir/req, B %.1f Ir/req, A/B = %.4f (target <= 1.03: %s)\n",
			a, b, r, (r <= 1.03 ? "met" : "NOT met") }'
	[[ $BARE == 1 ]] && awk -v a="${irq[A.1]}" -v b="${irq[B0.1]}" 'BEGIN {
		printf "   against plain NGINX, no \"set\" in the location (B0 %.1f Ir/req): A/B0 = %.4f\n", b, a / b }'
	if ((REPEAT > 1)); then
		for v in "${variants[@]}"; do
			awk -v v="$v" -v a="${irq[$v.1]}" -v b="${irq[$v.$REPEAT]}" 'BEGIN {
				printf "   stability %-3s: run 1 vs run %d differ by %.3f %%\n", v, '"$REPEAT"', 100 * (b - a) / a }'
		done
	fi

	# Where the cost goes, from run 1.
	for v in "${variants[@]}"; do
		cg_funcs "$tmp/cg.$v.1.n1" >"$tmp/f.$v.n1"
		cg_funcs "$tmp/cg.$v.1.n2" >"$tmp/f.$v.n2"
		per_request "$tmp/f.$v.n1" "$tmp/f.$v.n2" | sort >"$tmp/pr.$v"
		cg_incl "$tmp/cg.$v.1.n1" >"$tmp/i.$v.n1"
		cg_incl "$tmp/cg.$v.1.n2" >"$tmp/i.$v.n2"
		per_request "$tmp/i.$v.n1" "$tmp/i.$v.n2" | sort >"$tmp/pri.$v"
	done
	for v in "${variants[@]}"; do
		[[ $v == B* ]] && continue
		echo
		echo "   module functions, variant $v (Ir per request; self = the function's own"
		echo "   instructions, incl = with its callees; static functions may be inlined):"
		join -a1 -a2 -e 0 -o 0,1.2,2.2 "$tmp/pr.$v" "$tmp/pri.$v" |
			awk '$1 ~ /zonal/' | sort -k2,2gr |
			awk '{ printf "     %-40s self %7.1f  incl %7.1f\n", $1, $2, $3; s += $2 }
			END { printf "     %-40s self %7.1f\n", "(sum of self)", s }'
	done
	echo
	echo "   largest per-request differences A - B by function (self Ir per request):"
	join -a1 -a2 -e 0 -o 0,1.2,2.2 "$tmp/pr.A" "$tmp/pr.B" |
		awk '{ d = $2 - $3; a = d < 0 ? -d : d; if (a > 0.5) print a, $1, $2, $3, d }' |
		sort -k1,1gr | head -n 20 |
		awk '{ printf "     %-40s A %7.1f  B %7.1f  A-B %+7.1f\n", $2, $3, $4, $5 }'
fi

# --- 2. requests per second (wrk, side by side) -----------------------------

if [[ ${SKIP_RPS:-} != 1 ]]; then
	echo
	echo "== requests per second, side by side (wrk -t1 -c$CONNS -d${DURATION}s, keep-alive)"
	if ((${#pin_proxy[@]})); then
		echo "   proxies: 1 worker each, pinned to CPU 0; backends (1 worker) and wrk on CPUs 1-$((ncpu - 1))"
	else
		echo "   proxies: 1 worker each; backends: 1 worker; wrk; all sharing $ncpu cores (not pinned)"
	fi
	echo "   order per round alternates A,B then B,A (cancels slow drift); ratio = A/B of the round"
	echo "   NOTE: this machine is shared and noisy (run-to-run +-5-20 %, far more when"
	echo "   others run builds); trust the instruction counts, read these as a rough"
	echo "   cross-check. Load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
	if ! command -v wrk >/dev/null; then
		echo "   skipped: wrk not installed (build/deps.sh wrk)"
	else
		declare -A rport
		for v in A B; do
			rport[$v]=$(free_port 127.0.0.1)
			proxy_conf "$v" "$tmp/rps-$v" "${rport[$v]}" daemon
			timeout 30 "${pin_proxy[@]}" "$nginx" -p "$tmp/rps-$v" -c "$tmp/rps-$v/nginx.conf" ||
				die "proxy $v failed to start"
			wait_file "$tmp/rps-$v/logs/nginx.pid" 5
			pids+=("$(<"$tmp/rps-$v/logs/nginx.pid")")
			wait_listen 127.0.0.1 "${rport[$v]}" 10 || die "proxy $v does not listen"
			# warm up: connections to the backends, caches
			timeout 20 "${pin_other[@]}" wrk -t1 -c"$CONNS" -d1s "http://127.0.0.1:${rport[$v]}/" >/dev/null
		done
		ratios=()
		for r in $(seq "$ROUNDS"); do
			line="   round $r:"
			declare -A rps=()
			order=(A B)
			((r % 2 == 0)) && order=(B A)
			for v in "${order[@]}"; do
				out=$(timeout $((DURATION + 20)) "${pin_other[@]}" wrk -t1 -c"$CONNS" -d"${DURATION}s" \
					"http://127.0.0.1:${rport[$v]}/" 2>&1) || die "wrk failed: $out"
				rps[$v]=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
				bad=$(awk '/Non-2xx|Socket errors/ { $1 = $1; print }' <<<"$out")
				[[ -n $bad ]] && die "variant $v: $bad"
			done
			line+=$(printf "  A %9.0f rps  B %9.0f rps" "${rps[A]}" "${rps[B]}")
			ratio=$(awk -v a="${rps[A]}" -v b="${rps[B]}" 'BEGIN { printf "%.4f", a / b }')
			ratios+=("$ratio")
			echo "$line   A/B $ratio"
		done
		echo "   load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
		printf '%s\n' "${ratios[@]}" | sort -g | awk '{ v[NR] = $1 } END {
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "   result: median A/B = %.4f over %d rounds (min %.4f, max %.4f; target >= 0.98: %s)\n",
				m, NR, v[1], v[NR], (m >= 0.98 ? "met" : "NOT met") }'
	fi
fi
