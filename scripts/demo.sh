#!/usr/bin/env bash
# `make demo`: the offline tour. Makes a local PostgreSQL repository from Debian's source package (a release tag
# and a few commits), starts the farm on it with the pg-quick recipe, adds one new commit so there is something
# to measure, waits until its result is stored, and prints where to look. Ctrl-C stops the farm.
#
# Environment: PF_DEMO_DIR (default var/demo) holds the repository and the farm's data; the web UI port is
# PERFFARM_MASTER_WEB_PORT (default 8010). The first run compiles PostgreSQL (~6 min on 2 cores; ccache makes
# later runs faster) and the quick profile takes ~5 min.
set -euo pipefail
cd "$(dirname "$0")/.."

demo=${PF_DEMO_DIR:-var/demo}
timeout_s=${PF_DEMO_TIMEOUT:-3600}
mkdir -p "$demo"
demo=$(cd "$demo" && pwd)
repo="$demo/postgres"
data="$demo/data"

if [ ! -d "$repo/.git" ]; then
    echo "demo: making a PostgreSQL git repository from Debian's source package in $repo"
    scripts/pg-source-repo.sh "$repo"
fi

export PERFFARM_REPOSITORY_URL="$repo"
export PERFFARM_RECIPES_ENABLED=pg-quick
export PERFFARM_MASTER_DATA_DIR="$data"
export PERFFARM_REPOSITORY_POLL_INTERVAL=${PERFFARM_REPOSITORY_POLL_INTERVAL:-10}
export PERFFARM_REPOSITORY_BRANCHES=${PERFFARM_REPOSITORY_BRANCHES:-master}
web_port=${PERFFARM_MASTER_WEB_PORT:-8010}

log="$demo/farm.log"
echo "demo: starting the farm (log: $log)"
.venv/bin/perffarm run >"$log" 2>&1 &
farm=$!
stop() {
    if kill -0 "$farm" 2>/dev/null; then
        echo "demo: stopping the farm"
        kill -INT "$farm" 2>/dev/null || true
        wait "$farm" 2>/dev/null || true
    fi
}
trap stop EXIT INT TERM

# The poller's first poll only records where each ref is; a commit made after it is what gets measured.
sleep $((PERFFARM_REPOSITORY_POLL_INTERVAL * 2 + 15))
kill -0 "$farm" 2>/dev/null || { echo "demo: the farm exited; see $log" >&2; tail -n 30 "$log" >&2; exit 1; }
n=$(git -C "$repo" rev-list --count HEAD)
printf '\n/* perffarm demo commit %s: comment only */\n' "$n" >>"$repo/src/backend/tcop/postgres.c"
git -C "$repo" -c user.name=perffarm-demo -c user.email=demo@localhost commit -q -am "demo commit $n: a comment in postgres.c"
echo "demo: committed $(git -C "$repo" rev-parse --short HEAD); the farm will build it and run pg-quick"
echo "demo: watch it live at http://127.0.0.1:$web_port/ (Builds > Builders > pg-quick@local)"

deadline=$(( $(date +%s) + timeout_s ))
while :; do
    if .venv/bin/perffarm results list --limit 1 --format json 2>/dev/null | grep -q '"status"'; then
        break
    fi
    kill -0 "$farm" 2>/dev/null || { echo "demo: the farm exited; see $log" >&2; exit 1; }
    [ "$(date +%s)" -lt "$deadline" ] || { echo "demo: no result after ${timeout_s}s; see $log" >&2; exit 1; }
    sleep 15
done

echo
echo "demo: a result is stored. Where to look:"
echo "  .venv/bin/perffarm results list                      # runs (PERFFARM_MASTER_DATA_DIR=$data)"
echo "  .venv/bin/perffarm results export --format csv       # every raw sample"
echo "  .venv/bin/perffarm status                            # workers, queue, newest result per ref"
echo "  http://127.0.0.1:$web_port/                              # Buildbot UI: build logs, the recipe output"
echo "  .venv/bin/perffarm compare --repo $repo REL_15_18 HEAD   # A/B two commits locally"
echo
.venv/bin/perffarm results list --limit 5 || true
echo
echo "demo: the farm keeps running and measures every new commit in $repo; Ctrl-C stops it."
wait "$farm"
