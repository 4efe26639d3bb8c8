#!/usr/bin/env bash
# Make a git repository with real PostgreSQL history from Debian's postgresql-15 source package.
#
# Usage: scripts/pg-source-repo.sh DEST [CACHE_DIR]
#
# Why: tests and `make demo` need a real PostgreSQL tree with a release tag and a few commits to watch, and the
# machine has no internet except package registries. Debian's source package is reachable through apt once a
# deb-src line exists, so this script adds that line itself (nothing installed by hand survives to CI), downloads
# the source once into CACHE_DIR (default ~/.cache/perffarm/pg-source) and turns the upstream tarball into:
#
#   commit 1  "PostgreSQL 15.N release tarball"      tagged REL_15_N (annotated)
#   commit 2  a README change                         (docs only)
#   commit 3  a comment change in src/backend/tcop/postgres.c   (one backend file: an incremental rebuild)
#
# The same cache always yields the same tree; commit dates are fixed so the shas are reproducible too.
set -euo pipefail

dest=${1:?usage: pg-source-repo.sh DEST [CACHE_DIR]}
cache=${2:-${PF_PG_SOURCE_CACHE:-$HOME/.cache/perffarm/pg-source}}
package=postgresql-15
srcfile=/etc/apt/sources.list.d/perffarm-deb-src.list

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else
        echo "pg-source-repo: need root (or sudo) to run: $*" >&2; return 1; fi
}

have_deb_src() {
    # Any enabled deb-src entry for bookworm, in one-line or deb822 format.
    grep -rqsE '^deb-src .*bookworm( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null && return 0
    grep -rqsE '^Types:.*deb-src' /etc/apt/sources.list.d/*.sources 2>/dev/null && return 0
    return 1
}

find_tarball() {
    find "$cache" -maxdepth 1 -name "${package}_*.orig.tar.*" ! -name '*.asc' 2>/dev/null | sort -V | tail -n 1
}

mkdir -p "$cache"
tarball=$(find_tarball)
if [ -z "$tarball" ]; then
    if ! have_deb_src; then
        echo "pg-source-repo: adding deb-src lines for bookworm and bookworm-security to $srcfile"
        as_root tee "$srcfile" >/dev/null <<'EOF'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
EOF
    fi
    as_root apt-get update -qq
    # --download-only: no build-deps, no dpkg-source unpacking, just the .dsc and the tarballs. Try every
    # version apt knows, newest first: a mirror may list a security update whose files it does not carry yet.
    versions=$(apt-cache showsrc "$package" | sed -n 's/^Version: //p' | sort -Vr | uniq)
    [ -n "$versions" ] || { echo "pg-source-repo: apt knows no source package $package (deb-src line?)" >&2; exit 1; }
    for v in $versions; do
        if (cd "$cache" && apt-get source --download-only -qq "$package=$v"); then break; fi
        echo "pg-source-repo: $package=$v could not be downloaded; trying an older version" >&2
        rm -f "$cache/${package}_${v%%-*}"* 2>/dev/null || true
    done
    tarball=$(find_tarball)
    [ -n "$tarball" ] || { echo "pg-source-repo: apt-get source produced no ${package} tarball in $cache" >&2; exit 1; }
fi

version=$(basename "$tarball" | sed -E "s/^${package}_([0-9]+\.[0-9]+).*/\1/")
tag="REL_${version//./_}"
echo "pg-source-repo: $tarball -> $dest ($tag)"

if [ -e "$dest" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
    echo "pg-source-repo: $dest exists and is not empty" >&2
    exit 1
fi
mkdir -p "$dest"
tar -xf "$tarball" -C "$dest" --strip-components=1

export GIT_AUTHOR_NAME="perffarm" GIT_AUTHOR_EMAIL="perffarm@localhost"
export GIT_COMMITTER_NAME="perffarm" GIT_COMMITTER_EMAIL="perffarm@localhost"
g() { git -C "$dest" -c init.defaultBranch=master -c commit.gpgsign=false -c tag.gpgsign=false "$@"; }
at() { export GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1"; }

g init -q
at "2025-01-01T00:00:00Z"
g add -A
g commit -q -m "PostgreSQL $version release tarball"
g tag -a "$tag" -m "PostgreSQL $version"

at "2025-01-02T00:00:00Z"
printf '\nThis tree was imported by perffarm from Debian'"'"'s %s source package.\n' "$package" >>"$dest/README"
g commit -q -am "README: note where this tree comes from"

at "2025-01-03T00:00:00Z"
file="$dest/src/backend/tcop/postgres.c"
[ -f "$file" ] || { echo "pg-source-repo: $file not found" >&2; exit 1; }
printf '\n/* perffarm: a comment-only change, so consecutive commits rebuild incrementally. */\n' >>"$file"
g commit -q -am "postgres.c: comment-only change"

echo "pg-source-repo: done: $(g rev-list --count HEAD) commits on master, tag $tag, head $(g rev-parse HEAD)"
