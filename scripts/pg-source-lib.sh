# Shared by scripts/pg-source-repo.sh and scripts/pg-releases-repo.sh (sourced, not run).
#
# pg_tarball PACKAGE SUITE CACHE_DIR: print the path of PACKAGE's upstream tarball (e.g. postgresql-15 from
# bookworm), downloading it once into CACHE_DIR with apt-get source --download-only. apt reads a private
# configuration under CACHE_DIR/apt (scripts/debian_sources.py: deb-src lines for the archive this machine's own
# Debian entries use), so nothing is written to /etc, no root is needed, and no mirror host is named here.

pg_find_tarball() {
    find "$2" -maxdepth 1 -name "${1}_*.orig.tar.*" ! -name '*.asc' 2>/dev/null | sort -V | tail -n 1
}

pg_tarball() {
    local package=$1 suite=$2 cache=$3 tarball versions v here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    mkdir -p "$cache"
    tarball=$(pg_find_tarball "$package" "$cache")
    if [ -n "$tarball" ]; then
        echo "$tarball"
        return 0
    fi
    local -a opts
    mapfile -t opts < <(python3 "$here/debian_sources.py" "$cache/apt-$suite" "$suite") || return 1
    [ "${#opts[@]}" -gt 0 ] || return 1
    echo "pg-source: apt-get update for $suite sources ($(sed -n 's/^deb-src .* \(http[^ ]*\|file:[^ ]*\) .*/\1/p' "$cache/apt-$suite/sources.list" | head -n 1))" >&2
    apt-get "${opts[@]}" -qq update >&2 || { echo "pg-source: apt-get update failed for $suite" >&2; return 1; }
    # Try every version apt knows, newest first: a mirror may list a version whose files it does not carry yet.
    versions=$(apt-cache "${opts[@]}" showsrc "$package" 2>/dev/null | sed -n 's/^Version: //p' | sort -Vr | uniq)
    [ -n "$versions" ] || { echo "pg-source: the $suite archive has no source package $package" >&2; return 1; }
    for v in $versions; do
        if (cd "$cache" && apt-get "${opts[@]}" source --download-only -qq "$package=$v" >&2); then break; fi
        echo "pg-source: $package=$v could not be downloaded; trying an older version" >&2
        rm -f "$cache/${package}_${v%%-*}"* 2>/dev/null || true
    done
    tarball=$(pg_find_tarball "$package" "$cache")
    [ -n "$tarball" ] || { echo "pg-source: apt-get source produced no $package tarball in $cache" >&2; return 1; }
    echo "$tarball"
}

# pg_version TARBALL PACKAGE: the upstream version (e.g. 15.18) of a tarball named PACKAGE_15.18.orig.tar.*
pg_version() {
    basename "$1" | sed -E "s/^${2}_([0-9]+\.[0-9]+).*/\1/"
}
