#!/usr/bin/env bash
# Obtain the pinned NGINX source, verify it, and unpack it into the cache.
# Prints the path of the unpacked source tree on stdout (all messages go to
# stderr), so callers can do: src=$(build/nginx-source.sh)
#
# Where the tarball comes from, first hit wins:
#   a. $NGINX_TARBALL, a tarball the user already has;
#   b. the copy cached by an earlier run;
#   c. the official download site (often unreachable on build machines);
#   d. Debian's source package of the same upstream version (suite trixie),
#      fetched through the machine's own apt configuration, so it works
#      wherever apt works. Its orig.tar.gz is byte-identical to upstream's.
# The sha256 is checked whatever the source; a mismatch is refused.
#
# Environment: ZONAL_CACHE (cache root, default <repo>/.cache; the source goes
# to $ZONAL_CACHE/nginx), NGINX_TARBALL, ZONAL_NGINX_URL (replaces the
# official URL, e.g. an internal mirror), ZONAL_DEBIAN_SRC_SUITE (default
# trixie).
set -euo pipefail

NGINX_VERSION=1.26.3
NGINX_SHA256=69ee2b237744036e61d24b836668aad3040dda461fe6f570f1787eab570c75aa
NGINX_URL=${ZONAL_NGINX_URL:-https://nginx.org/download/nginx-${NGINX_VERSION}.tar.gz}
# trixie is the Debian release that carries nginx 1.26.3.
DEBIAN_SUITE=${ZONAL_DEBIAN_SRC_SUITE:-trixie}

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${ZONAL_CACHE:-$top/.cache}/nginx
tarball=$cache/nginx-$NGINX_VERSION.tar.gz
srcdir=$cache/nginx-$NGINX_VERSION
# Written last, after a complete extraction: its presence means "done".
marker=$srcdir/.zonal-source-sha256

log() { echo "nginx-source: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# Fast path: already unpacked from a verified tarball.
if [[ -f $marker && $(<"$marker") == "$NGINX_SHA256" ]]; then
	echo "$srcdir"
	exit 0
fi

mkdir -p "$cache"
# Serialise concurrent runs (e.g. make -j building two targets).
exec 9>"$cache/.source.lock"
flock 9
if [[ -f $marker && $(<"$marker") == "$NGINX_SHA256" ]]; then
	echo "$srcdir"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/zonal-nginx-src.XXXXXX")
trap 'rm -rf "$work"' EXIT

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# Verify a candidate and move it into the cache. Returns non-zero only for a
# checksum mismatch, which callers turn into a hard error: a wrong tarball
# means tampering or a broken mirror, not a reason to silently try elsewhere.
accept() {
	local file=$1 from=$2 got
	got=$(sha_of "$file")
	if [[ $got != "$NGINX_SHA256" ]]; then
		log "REFUSED: sha256 mismatch for nginx-$NGINX_VERSION from $from"
		log "  expected $NGINX_SHA256"
		log "  got      $got"
		return 1
	fi
	{ cp -f "$file" "$tarball.tmp" && mv -f "$tarball.tmp" "$tarball"; } || die "cannot write $tarball"
	log "verified nginx-$NGINX_VERSION.tar.gz from $from"
}

# Both programs print the new deb822 stanza for the first entry of a source
# file that is enabled, of type deb or deb-src, and whose suites include
# `want`; they exit non-zero when the file has none.

# deb822 (*.sources): blank-line separated stanzas of "Key: value"; keys are
# case-insensitive; continuation lines start with whitespace (an inline
# Signed-By key spans many, so raw[] keeps the field verbatim).
# shellcheck disable=SC2016 # awk code, not shell
deb822_awk='
function reset() { delete v; delete raw; key = "" }
function flush(   i, n, s, t, u, ok, isdeb) {
	if (!("uris" in v) || tolower(v["enabled"]) ~ /^no/) { reset(); return }
	n = split(v["types"], t, /[ \t]+/)
	for (i = 1; i <= n; i++) if (t[i] == "deb" || t[i] == "deb-src") isdeb = 1
	n = split(v["suites"], s, /[ \t]+/)
	for (i = 1; i <= n; i++) if (s[i] == want) ok = 1
	if (!(isdeb && ok)) { reset(); return }
	split(v["uris"], u, /[ \t]+/)
	print "Types: deb-src"
	print "URIs: " u[1]
	print "Suites: " suite
	print "Components: main"
	if ("signed-by" in raw) print raw["signed-by"]
	if ("check-valid-until" in raw) print raw["check-valid-until"]
	if ("trusted" in raw) print raw["trusted"]
	found = 1
	exit
}
/^#/ { next }
/^[ \t]*$/ { flush(); next }
/^[ \t]/ { if (key != "") { v[key] = v[key] " " $0; raw[key] = raw[key] "\n" $0 }; next }
{
	i = index($0, ":"); if (!i) next
	key = tolower(substr($0, 1, i - 1))
	val = substr($0, i + 1); sub(/^[ \t]+/, "", val)
	v[key] = val; raw[key] = $0
}
END { if (!found) flush(); exit !found }
'

# One-line format (*.list): deb [opt=val ...] URI SUITE COMPONENT...
# shellcheck disable=SC2016 # awk code, not shell
oneline_awk='
$1 != "deb" && $1 != "deb-src" { next }
{
	opts = ""; i = 2
	if ($2 ~ /^\[/) {
		while (i <= NF) { opts = opts " " $i; if ($(i++) ~ /\]$/) break }
	}
	if ($(i + 1) != want) next
	gsub(/\[|\]/, "", opts)
	print "Types: deb-src"
	print "URIs: " $i
	print "Suites: " suite
	print "Components: main"
	n = split(opts, o, /[ \t]+/)
	for (j = 1; j <= n; j++) {
		eq = index(o[j], "="); if (!eq) continue
		k = tolower(substr(o[j], 1, eq - 1)); val = substr(o[j], eq + 1)
		if (k == "signed-by") print "Signed-By: " val
		if (k == "check-valid-until") print "Check-Valid-Until: " val
		if (k == "trusted") print "Trusted: " val
	}
	found = 1
	exit
}
END { exit !found }
'

# Print a deb822 stanza for a deb-src entry of $DEBIAN_SUITE, built from the
# machine's own apt sources: the first entry (in apt's reading order) whose
# suites include the release codename itself (not -security/-updates). Its
# URI and trust options (Signed-By, Check-Valid-Until, Trusted) are kept, so a
# mirror, proxy or snapshot archive the machine is set up for is used as is.
debian_src_stanza() {
	local codename sl sp files=()
	# shellcheck disable=SC1091 # a system file, read at run time
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[[ -n $codename ]] || return 1
	# Ask apt where its source lists are rather than assuming /etc/apt.
	sl=$(apt-config shell v Dir::Etc::sourcelist/f | sed -n "s/^v='\(.*\)'$/\1/p")
	sp=$(apt-config shell v Dir::Etc::sourceparts/d | sed -n "s/^v='\(.*\)'$/\1/p")
	[[ -f $sl ]] && files+=("$sl")
	# apt reads only *.list and *.sources from the parts directory, sorted.
	if [[ -d $sp ]]; then
		while IFS= read -r f; do files+=("$f"); done < <(
			find "$sp" -maxdepth 1 -type f \( -name '*.list' -o -name '*.sources' \) | LC_ALL=C sort
		)
	fi
	((${#files[@]})) || return 1
	local f
	for f in "${files[@]}"; do
		if [[ $f == *.sources ]]; then
			awk -v want="$codename" -v suite="$DEBIAN_SUITE" "$deb822_awk" "$f" && return 0
		else
			awk -v want="$codename" -v suite="$DEBIAN_SUITE" "$oneline_awk" "$f" && return 0
		fi
	done
	return 1
}

fetch_from_debian() {
	local stanza aptdir ver versions v
	command -v apt-get >/dev/null || return 1
	if ! stanza=$(debian_src_stanza); then
		log "no Debian archive entry for this release found in the apt sources"
		return 1
	fi
	# A private apt state (source list, lists and caches in $work) instead of
	# a file in /etc/apt/sources.list.d: the machine's apt setup stays as it
	# was (a trixie deb-src left there would be fetched by every later
	# apt-get update), and it needs no root. Everything else in the machine's
	# apt configuration (proxy, auth, keyrings) still applies.
	aptdir=$work/apt
	mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$work/dl"
	printf '%s\n' "$stanza" >"$aptdir/zonal-nginx-src.sources"
	log "fetching Debian's nginx source package (suite $DEBIAN_SUITE) via apt:"
	sed 's/^/    /' "$aptdir/zonal-nginx-src.sources" >&2
	local apt=(
		-o "Dir::Etc::sourcelist=$aptdir/zonal-nginx-src.sources"
		-o "Dir::Etc::sourceparts=-"
		-o "Dir::State::Lists=$aptdir/lists"
		-o "Dir::Cache=$aptdir/cache"
	)
	# As root apt downloads as the unprivileged _apt user; let it write
	# here, else apt warns and falls back to downloading as root.
	chmod 755 "$work"
	if ((EUID == 0)) && id _apt >/dev/null 2>&1; then
		chown -R _apt "$aptdir/lists/partial" "$work/dl"
	fi
	# apt is chatty: keep its output in a log, show it only on failure.
	if ! apt-get "${apt[@]}" update >"$work/apt.log" 2>&1; then
		cat "$work/apt.log" >&2
		return 1
	fi
	# Pick the newest Debian revision of this upstream version.
	versions=$(apt-cache "${apt[@]}" showsrc --only-source nginx 2>/dev/null | sed -n 's/^Version: //p')
	ver=
	for v in $versions; do
		[[ $v == "$NGINX_VERSION"-* ]] || continue
		if [[ -z $ver ]] || dpkg --compare-versions "$v" gt "$ver"; then ver=$v; fi
	done
	if [[ -z $ver ]]; then
		cat "$work/apt.log" >&2
		log "suite $DEBIAN_SUITE has no nginx $NGINX_VERSION (has: $(echo "$versions" | xargs))"
		return 1
	fi
	# --download-only: we want the upstream tarball, not Debian's patched
	# tree; apt checks the files against the signed Sources index.
	log "downloading Debian source package nginx $ver"
	if ! (cd "$work/dl" && apt-get "${apt[@]}" source --download-only --only-source "nginx=$ver") >"$work/apt.log" 2>&1; then
		cat "$work/apt.log" >&2
		return 1
	fi
	[[ -f $work/dl/nginx_$NGINX_VERSION.orig.tar.gz ]] || return 1
	mv "$work/dl/nginx_$NGINX_VERSION.orig.tar.gz" "$work/candidate.tar.gz"
	accept "$work/candidate.tar.gz" "Debian source package nginx $ver" ||
		die "refusing Debian's nginx_$NGINX_VERSION.orig.tar.gz"
}

if [[ -n ${NGINX_TARBALL:-} ]]; then
	[[ -f $NGINX_TARBALL ]] || die "NGINX_TARBALL=$NGINX_TARBALL: no such file"
	accept "$NGINX_TARBALL" "NGINX_TARBALL=$NGINX_TARBALL" ||
		die "refusing NGINX_TARBALL; unset it or give nginx-$NGINX_VERSION.tar.gz"
elif [[ -f $tarball ]] && [[ $(sha_of "$tarball") == "$NGINX_SHA256" ]]; then
	log "using cached $tarball"
else
	if [[ -f $tarball ]]; then
		log "cached $tarball is corrupt; fetching again"
		rm -f "$tarball"
	fi
	got=
	if command -v curl >/dev/null; then
		log "trying $NGINX_URL"
		# Short connect timeout: on machines without internet access this
		# must fail fast and fall through to the Debian path.
		if curl -fsSL --connect-timeout 5 --max-time 120 -o "$work/candidate.tar.gz" "$NGINX_URL" 2>"$work/curl.err"; then
			accept "$work/candidate.tar.gz" "$NGINX_URL" || die "refusing the download from $NGINX_URL"
			got=1
		else
			log "download failed ($(head -c 200 "$work/curl.err")); trying Debian's source package"
		fi
	fi
	if [[ -z $got ]]; then
		fetch_from_debian ||
			die "could not obtain nginx-$NGINX_VERSION.tar.gz; download it elsewhere and run again with NGINX_TARBALL=/path/to/nginx-$NGINX_VERSION.tar.gz"
	fi
fi

# Unpack next to the final place, then rename: an interrupted run never leaves
# a half-extracted tree that looks complete.
rm -rf "$srcdir" "$cache/.extract"
mkdir -p "$cache/.extract"
tar --no-same-owner -xzf "$tarball" -C "$cache/.extract"
[[ -x $cache/.extract/nginx-$NGINX_VERSION/configure ]] || die "$tarball does not contain nginx-$NGINX_VERSION/configure"
mv "$cache/.extract/nginx-$NGINX_VERSION" "$srcdir"
rmdir "$cache/.extract"
echo "$NGINX_SHA256" >"$marker"
log "unpacked into $srcdir"
echo "$srcdir"
