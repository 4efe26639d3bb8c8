#!/usr/bin/env bash
# Make a git repository with one commit per real PostgreSQL release, from Debian's source packages.
#
# Usage: scripts/pg-releases-repo.sh DEST [CACHE_DIR] [MAJOR:SUITE[?] ...]
#
# Default releases: 13:bullseye 15:bookworm 17:trixie? 18:sid (the newest postgresql-MAJOR each suite carries). A
# release marked `?` is optional: when the archive lists it but cannot serve its files (seen here for trixie's
# postgresql-17), it is left out with a warning instead of failing.
# Each release's upstream tarball (downloaded once into CACHE_DIR, default ~/.cache/perffarm/pg-source, through a
# private apt configuration derived from this machine's own Debian entries: scripts/pg-source-lib.sh) becomes one
# commit on master holding exactly that tree, tagged as postgres.git tags releases (annotated REL_13_16, ...),
# oldest first. The history is linear, unlike postgres.git where each major has its own REL_N_STABLE branch:
# what matters for release archaeology is that every tag is a real release tree. Autoconf-only majors (13) and
# meson majors (16+) are both in it. Commit dates are fixed, so the same cache always gives the same shas.
set -euo pipefail

dest=${1:?usage: pg-releases-repo.sh DEST [CACHE_DIR] [MAJOR:SUITE ...]}
cache=${2:-${PF_PG_SOURCE_CACHE:-$HOME/.cache/perffarm/pg-source}}
shift $(($# >= 2 ? 2 : 1))
releases=("$@")
[ "${#releases[@]}" -gt 0 ] || releases=(13:bullseye 15:bookworm '17:trixie?' 18:sid)
# shellcheck source=scripts/pg-source-lib.sh
. "$(dirname "$0")/pg-source-lib.sh"

for r in "${releases[@]}"; do
    [[ "$r" =~ ^[0-9]{1,2}:[a-z][a-z0-9-]*\??$ ]] || { echo "pg-releases-repo: $r: expected MAJOR:SUITE, e.g. 15:bookworm" >&2; exit 2; }
done
if [ -e "$dest" ] && [ -n "$(ls -A "$dest" 2>/dev/null)" ]; then
    echo "pg-releases-repo: $dest exists and is not empty" >&2
    exit 1
fi
tarballs=()
kept=()
for r in "${releases[@]}"; do
    suite=${r#*:}
    if t=$(pg_tarball "postgresql-${r%%:*}" "${suite%\?}" "$cache"); then
        tarballs+=("$t")
        kept+=("$r")
    elif [[ "$r" == *\? ]]; then
        echo "pg-releases-repo: WARNING: postgresql-${r%%:*} from ${suite%\?} could not be downloaded; left out" >&2
    else
        exit 1
    fi
done
releases=("${kept[@]}")

export GIT_AUTHOR_NAME="perffarm" GIT_AUTHOR_EMAIL="perffarm@localhost"
export GIT_COMMITTER_NAME="perffarm" GIT_COMMITTER_EMAIL="perffarm@localhost"
g() { git -C "$dest" -c init.defaultBranch=master -c commit.gpgsign=false -c tag.gpgsign=false "$@"; }
mkdir -p "$dest"
g init -q
day=1
for i in "${!releases[@]}"; do
    package="postgresql-${releases[$i]%%:*}"
    tarball=${tarballs[$i]}
    version=$(pg_version "$tarball" "$package")
    tag="REL_${version//./_}"
    echo "pg-releases-repo: $(basename "$tarball") -> $tag"
    g rm -rqf --ignore-unmatch . >/dev/null
    find "$dest" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
    tar -xf "$tarball" -C "$dest" --strip-components=1
    export GIT_AUTHOR_DATE="2025-01-$(printf %02d "$day")T00:00:00Z" GIT_COMMITTER_DATE="2025-01-$(printf %02d "$day")T00:00:00Z"
    g add -A
    g commit -q -m "PostgreSQL $version release tarball (Debian $package)"
    g tag -a "$tag" -m "PostgreSQL $version"
    day=$((day + 1))
done
echo "pg-releases-repo: done: $(g rev-list --count HEAD) releases on master, tags $(g tag --list 'REL_*' | tr '\n' ' ')"
