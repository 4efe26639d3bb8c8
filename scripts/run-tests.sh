#!/usr/bin/env bash
# The test suite as `make test` runs it. pytest's exit code 5 (no tests collected) is a failure here.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-artifacts
# The site's browser tests use Debian's chromium (scripts/apt-packages-site.txt): never let Playwright download one.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
start=$(date +%s)
.venv/bin/pytest --junitxml=test-artifacts/junit.xml --durations=15 "$@"
rc=$?
echo "make test: pytest finished in $(( $(date +%s) - start )) s with exit code $rc"
if [ $rc -eq 5 ]; then
    echo "make test: FAILED: no tests were collected" >&2
    exit 1
fi
exit $rc
