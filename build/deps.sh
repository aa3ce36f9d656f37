#!/usr/bin/env bash
# Install the Debian packages needed to build NGINX with the zonal module,
# plus any package names given as arguments (e.g. `build/deps.sh valgrind wrk`).
#
# Idempotent and cheap: if every package is already installed (checked with
# dpkg-query) it neither runs apt-get update nor touches the network, so the
# other build scripts can call it unconditionally.
set -euo pipefail

# gcc/make/libc6-dev instead of build-essential: they are all the NGINX build
# needs (build-essential would add g++). The -dev packages are the libraries
# NGINX's configure looks for (PCRE2 for regex locations, zlib for gzip,
# OpenSSL for TLS). curl and ca-certificates fetch the upstream tarball.
base=(gcc make libc6-dev libpcre2-dev zlib1g-dev libssl-dev curl ca-certificates)

missing=()
for pkg in "${base[@]}" "$@"; do
	# "ii" = desired install, currently installed. Anything else (absent,
	# removed with config files left, half-installed) needs apt.
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
	[[ $status == ii* ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
	exit 0
fi

sudo=()
if ((EUID != 0)); then
	if command -v sudo >/dev/null; then
		sudo=(sudo)
	else
		echo "deps: need root (or sudo) to install: ${missing[*]}" >&2
		exit 1
	fi
fi

echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists first: a fresh machine (or container image) often
# has none, or stale ones whose .deb versions are gone from the mirror.
# apt and dpkg are chatty: keep their output in a log and show it on failure.
aptlog=$(mktemp "${TMPDIR:-/tmp}/zonal-deps.XXXXXX")
trap 'rm -f "$aptlog"' EXIT
if ! { "${sudo[@]}" apt-get update -q &&
	"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$aptlog" 2>&1; then
	cat "$aptlog" >&2
	echo "deps: apt-get failed (packages: ${missing[*]})" >&2
	exit 1
fi
