#!/usr/bin/env bash
# Make a git repository with real PostgreSQL history from Debian's postgresql-15 source package.
#
# Usage: scripts/pg-source-repo.sh DEST [CACHE_DIR]
#
# Why: tests and `make demo` need a real PostgreSQL tree with a release tag and a few commits to watch, and the
# machine has no internet except package registries. Debian's source package is reachable through apt: the script
# uses a private apt configuration whose deb-src line is derived from this machine's own Debian entries
# (scripts/pg-source-lib.sh; no root, nothing written to /etc), downloads the source once into CACHE_DIR (default
# ~/.cache/perffarm/pg-source) and turns the upstream tarball into:
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
suite=bookworm
# shellcheck source=scripts/pg-source-lib.sh
. "$(dirname "$0")/pg-source-lib.sh"

tarball=$(pg_tarball "$package" "$suite" "$cache")

version=$(pg_version "$tarball" "$package")
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
