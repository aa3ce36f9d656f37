#!/usr/bin/env bash
# Build the custom NGINX with ngx_http_zonal_module compiled in and install it
# as bin/nginx.
#
# Cached: configure runs again only when the configure arguments, the module's
# config file or its list of files change; make runs again only when a file
# under nginxmod/ or cgo/table/*.[ch] changes (then only the module's objects
# are rebuilt and relinked). Otherwise the script does nothing.
#
# The binary is relocatable for tests: every compiled-in path is relative to
# the prefix, so `bin/nginx -p DIR -c DIR/nginx.conf` keeps everything under
# DIR, for root and non-root alike. Logs before the config is read go to
# stderr (--error-log-path=stderr).
#
# Environment: ZONAL_CACHE (cache root, default <repo>/.cache),
# ZONAL_NGINX_EXTRA_CONFIG (extra configure arguments, shell-quoted, e.g.
# "--with-stream --with-cc-opt='-O0 -g'"; a later --with-cc-opt wins),
# ZONAL_VERBOSE=1 (show configure and make output), NGINX_TARBALL (see
# nginx-source.sh).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${ZONAL_CACHE:-$top/.cache}/nginx
bld=$cache/build
out=$top/bin/nginx

log() { echo "nginx: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

"$top/build/deps.sh"
src=$("$top/build/nginx-source.sh")

[[ -f $top/nginxmod/config ]] || die "$top/nginxmod/config not found"

args=(
	# The prefix only matters when no -p is given; nothing is installed
	# there (we copy objs/nginx to bin/ ourselves).
	--prefix=/usr/local/zonal/nginx
	# Relative paths resolve against the prefix (-p). Temp directories are
	# one level deep on purpose: NGINX creates them with a single mkdir(),
	# so "tmp/client_body" would fail when DIR/tmp does not exist.
	--conf-path=conf/nginx.conf
	--error-log-path=stderr
	--pid-path=logs/nginx.pid
	--lock-path=logs/nginx.lock
	--http-log-path=logs/access.log
	--http-client-body-temp-path=client_body_temp
	--http-proxy-temp-path=proxy_temp
	--http-fastcgi-temp-path=fastcgi_temp
	--http-uwsgi-temp-path=uwsgi_temp
	--http-scgi-temp-path=scgi_temp
	--with-threads
	--with-http_ssl_module
	--with-http_v2_module
	--with-http_realip_module
	--with-http_stub_status_module
	# PCRE2 from the system (libpcre2-dev) is found automatically; JIT
	# makes regex locations cheaper.
	--with-pcre-jit
	--with-cc-opt='-O2 -g'
	--add-module="$top/nginxmod"
)
if [[ -n ${ZONAL_NGINX_EXTRA_CONFIG:-} ]]; then
	# xargs splits with shell-like quoting but never executes anything.
	mapfile -t extra < <(xargs -r printf '%s\n' <<<"$ZONAL_NGINX_EXTRA_CONFIG")
	args+=("${extra[@]}")
fi

hash_of() { sha256sum | cut -d' ' -f1; }

# shellcheck source=build/lib.sh
. "$top/build/lib.sh"
mapfile -t inputs < <(module_inputs "$top")

# Reconfigure when any of these change: the source (its tarball checksum),
# the arguments, the compiler, the module's config and the set of module
# sources (config globs nginxmod/*.c and *.h).
config_stamp=$(
	{
		cat "$src/.zonal-source-sha256"
		printf '%s\n' "${args[@]}"
		"${CC:-cc}" --version 2>/dev/null | head -n1
		cat "$top/nginxmod/config"
		printf '%s\n' "${inputs[@]}" | grep -E '^nginxmod/[^/]+\.[ch]$' || true
	} | hash_of
)
# Rebuild when any module file's content changes.
input_stamp=$(
	{
		echo "$config_stamp"
		(cd "$top" && sha256sum "${inputs[@]}")
	} | hash_of
)

mkdir -p "$cache"
# One build at a time per cache (make -j may start this twice).
exec 9>"$cache/.build.lock"
flock 9

install_binary() {
	# Install by rename: overwriting the file in place would fail with
	# "Text file busy" while a test still runs the old binary.
	mkdir -p "$top/bin"
	cp "$bld/objs/nginx" "$out.tmp.$$"
	mv -f "$out.tmp.$$" "$out"
}

if [[ -f $bld/objs/nginx && -f $bld/.zonal-input-stamp &&
	$(<"$bld/.zonal-input-stamp") == "$input_stamp" ]]; then
	if cmp -s "$bld/objs/nginx" "$out"; then
		log "bin/nginx is up to date"
	else
		install_binary
		log "bin/nginx reinstalled from the cached build"
	fi
	exit 0
fi

start=$SECONDS
vlog() {
	# Quiet by default; on failure show the end of the log, which holds the
	# compiler's or configure's error.
	local logfile=$1
	shift
	if [[ ${ZONAL_VERBOSE:-} == 1 ]]; then
		"$@" 2>&1 | tee "$logfile" >&2
	elif ! "$@" >"$logfile" 2>&1; then
		log "failed: $*"
		tail -n 60 "$logfile" >&2
		log "full log: $logfile"
		return 1
	fi
}

if [[ ! -f $bld/Makefile || ! -d $bld/objs/addon || ! -f $bld/.zonal-config-stamp ||
	$(<"$bld/.zonal-config-stamp") != "$config_stamp" ]]; then
	log "configuring nginx-$(basename "$src" | sed 's/^nginx-//') (log: $bld/configure.log)"
	# Configure in a fresh copy: configure and make write into the source
	# tree (Makefile, objs/), and the pristine tree stays reusable.
	rm -rf "$bld"
	cp -R --preserve=mode,timestamps "$src" "$bld"
	rm -f "$bld/.zonal-source-sha256"
	(cd "$bld" && vlog "$bld/configure.log" ./configure "${args[@]}") || exit 1
	echo "$config_stamp" >"$bld/.zonal-config-stamp"
else
	# Same configuration, changed module files: drop the module's objects so
	# they are recompiled even if a file's mtime went backwards (e.g. git
	# checkout of an older commit); the rest of NGINX is reused.
	# (configure made the directories; keep them.)
	find "$bld/objs/addon" -type f -name '*.o' -delete
fi

jobs=$(nproc 2>/dev/null || echo 2)
log "make -j$jobs (log: $bld/make.log)"
vlog "$bld/make.log" make -C "$bld" -j"$jobs" || exit 1

install_binary
echo "$input_stamp" >"$bld/.zonal-input-stamp"
log "built bin/nginx in $((SECONDS - start))s: $("$out" -v 2>&1 | sed 's/^nginx version: //') + ngx_http_zonal_module"
