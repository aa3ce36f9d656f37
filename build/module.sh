#!/usr/bin/env bash
# Build ngx_http_zonal_module as a dynamic module for Debian's own nginx
# package and check that Debian's nginx loads it. Output:
# bin/ngx_http_zonal_module.so.
#
# How: Debian's nginx-dev package ships what out-of-tree modules need
# (/usr/share/nginx/src: configure, auto/, the headers and conf_flags, the
# configure arguments of Debian's build). As Debian's own module packages do
# (dh-sequence-nginx), we run that configure with Debian's arguments, which
# include --with-compat, plus --add-dynamic-module=nginxmod, and `make
# modules`. A dynamic module must come from the same NGINX version and
# compatible configure flags as the binary that loads it, so we target the
# nginx version installed on this machine, or apt's candidate when none is.
#
# nginx-dev and nginx are not installed: their .debs are downloaded and
# unpacked into the cache. Installing them would pull ~100 MB of build
# dependencies (perl, gd, xslt, geoip) that this build does not use, and the
# nginx package starts a system nginx on port 80 wherever services can start.
# An installed nginx-dev/nginx of the right version is used as is.
#
# Environment: ZONAL_CACHE (cache root, default <repo>/.cache),
# ZONAL_DISTRO_NGINX (nginx binary for the load check, default Debian's).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${ZONAL_CACHE:-$top/.cache}/module
out=$top/bin/ngx_http_zonal_module.so

log() { echo "module: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# dpkg-dev for dpkg-buildflags: Debian's compiler flags, as its module
# packages use.
"$top/build/deps.sh" dpkg-dev

[[ -f $top/nginxmod/config ]] || die "$top/nginxmod/config not found"

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

installed_version() {
	local st
	st=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$1" 2>/dev/null || true)
	[[ $st == ii* ]] && echo "${st#* }"
}

# Target version: the installed nginx, else apt's candidate for nginx-dev.
ver=$(installed_version nginx || true)
if [[ -z $ver ]]; then
	candidate() { apt-cache policy nginx-dev 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '(none)' || true; }
	ver=$(candidate)
	if [[ -z $ver ]]; then
		# A fresh machine may have no package lists yet.
		log "apt has no nginx-dev candidate; running apt-get update"
		if ((EUID == 0)); then apt-get update -qq >&2; else sudo apt-get update -qq >&2; fi
		ver=$(candidate)
	fi
	[[ -n $ver ]] || die "apt knows no nginx-dev package; is this Debian 12 or later?"
fi
log "target: Debian nginx $ver"

# Fetch a Debian package of exactly $ver and unpack it under the cache,
# unless the installed one has that version (then use the root filesystem).
# Prints the root directory of its files.
unpacked() {
	local pkg=$1 dir=$cache/$1_$ver
	if [[ $(installed_version "$pkg") == "$ver" ]]; then
		echo /
		return
	fi
	if [[ ! -f $dir/.done ]]; then
		rm -rf "$dir"
		mkdir -p "$dir/deb"
		# As root apt downloads as the _apt user: let it write here.
		if ((EUID == 0)) && id _apt >/dev/null 2>&1; then chown _apt "$dir/deb"; fi
		(cd "$dir/deb" && apt-get download -q "$pkg=$ver" >/dev/null 2>"$dir/download.err") || {
			cat "$dir/download.err" >&2
			die "cannot download $pkg=$ver (installed nginx too old for the mirror? apt-get install nginx to update it)"
		}
		dpkg-deb -x "$dir"/deb/*.deb "$dir/root"
		touch "$dir/.done"
	fi
	echo "$dir/root"
}

devroot=$(unpacked nginx-dev)
devsrc=${devroot%/}/usr/share/nginx/src
[[ -f $devsrc/conf_flags && -x $devsrc/configure ]] || die "$devsrc lacks conf_flags/configure"

# Debian's configure arguments (a bash array NGX_CONF_FLAGS).
# shellcheck disable=SC1091 # file from the nginx-dev package
. "$devsrc/conf_flags"
cflags="$(dpkg-buildflags --get CFLAGS) -fPIC $(dpkg-buildflags --get CPPFLAGS)"
ldflags="$(dpkg-buildflags --get LDFLAGS) -fPIC"
args=(--with-cc-opt="$cflags" --with-ld-opt="$ldflags" "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$top/nginxmod")

# shellcheck source=build/lib.sh
. "$top/build/lib.sh"
mapfile -t inputs < <(module_inputs "$top")
stamp=$(
	{
		echo "$ver"
		printf '%s\n' "${args[@]}"
		"${CC:-cc}" --version 2>/dev/null | head -n1
		(cd "$top" && sha256sum "${inputs[@]}")
	} | sha256sum | cut -d' ' -f1
)
bld=$cache/build

if [[ -f $bld/.zonal-stamp && $(<"$bld/.zonal-stamp") == "$stamp" ]] &&
	cmp -s "$bld/objs/ngx_http_zonal_module.so" "$out"; then
	log "bin/ngx_http_zonal_module.so is up to date"
else
	start=$SECONDS
	# configure writes its Makefile into the current directory: work on a
	# copy, never in /usr/share/nginx/src. Only the module is compiled, so
	# the headers nginx-dev ships are all the source needed.
	rm -rf "$bld"
	mkdir -p "$cache"
	cp -R "$devsrc" "$bld"
	log "configuring with Debian's nginx $ver flags (log: $bld/configure.log)"
	(cd "$bld" && ./configure "${args[@]}") >"$bld/configure.log" 2>&1 || {
		tail -n 40 "$bld/configure.log" >&2
		die "configure failed; full log: $bld/configure.log"
	}
	log "make modules (log: $bld/make.log)"
	make -C "$bld" -f objs/Makefile -j"$(nproc 2>/dev/null || echo 2)" modules >"$bld/make.log" 2>&1 || {
		tail -n 60 "$bld/make.log" >&2
		die "make modules failed; full log: $bld/make.log"
	}
	mkdir -p "$top/bin"
	cp "$bld/objs/ngx_http_zonal_module.so" "$out.tmp.$$"
	mv -f "$out.tmp.$$" "$out"
	echo "$stamp" >"$bld/.zonal-stamp"
	log "built bin/ngx_http_zonal_module.so in $((SECONDS - start))s"
fi

# Load check: Debian's nginx, a throwaway prefix, the module loaded by
# absolute path, and an http block so the module's HTTP hooks run. All paths
# the binary has compiled in (temp dirs under /var/lib/nginx, the pid file)
# are overridden so the check needs neither root nor an installed nginx.
if [[ -n ${ZONAL_DISTRO_NGINX:-} ]]; then
	nginx=$ZONAL_DISTRO_NGINX
else
	nginx=$(unpacked nginx)
	nginx=${nginx%/}/usr/sbin/nginx
fi
[[ -x $nginx ]] || die "no nginx binary at $nginx"
t=$(mktemp -d "${TMPDIR:-/tmp}/zonal-module.XXXXXX")
trap 'rm -rf "$t"' EXIT
cat >"$t/nginx.conf" <<EOF
load_module $out;
pid $t/nginx.pid;
error_log stderr notice;
events {}
http {
    access_log off;
    client_body_temp_path $t/client_body_temp;
    proxy_temp_path $t/proxy_temp;
    fastcgi_temp_path $t/fastcgi_temp;
    uwsgi_temp_path $t/uwsgi_temp;
    scgi_temp_path $t/scgi_temp;
}
EOF
if "$nginx" -p "$t" -c "$t/nginx.conf" -e stderr -t -q 2>"$t/err"; then
	log "ok: $("$nginx" -v 2>&1 | sed 's/^nginx version: //') (Debian $ver, $nginx) loads bin/ngx_http_zonal_module.so"
else
	cat "$t/err" >&2
	die "Debian's nginx $ver ($nginx) does not load bin/ngx_http_zonal_module.so"
fi
