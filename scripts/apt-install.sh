#!/usr/bin/env bash
# Install the Debian packages listed in the given files (one name per line, '#' comments) that are missing.
# Used by `make run` and `make test` so a fresh machine needs nothing installed by hand.
set -euo pipefail

wanted=()
for list in "$@"; do
    [ -f "$list" ] || continue
    while read -r name _; do
        [ -n "$name" ] && [ "${name:0:1}" != "#" ] && wanted+=("$name")
    done < "$list"
done

missing=()
for pkg in "${wanted[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
    echo "apt-install: these packages are needed but this is not a Debian-like system: ${missing[*]}" >&2
    exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo=(sudo); else
        echo "apt-install: run as root or install sudo; needed packages: ${missing[*]}" >&2
        exit 1
    fi
fi
echo "apt-install: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
