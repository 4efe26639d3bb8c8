#!/usr/bin/env bash
# The test suite as `make test` runs it: the lint tier (ruff check, ruff format --check, mypy; seconds), then
# pytest. Both always run; either failing fails the suite. pytest's exit code 5 (no tests collected) is a failure.
# Arguments go to pytest (`make test-unit` passes -m "not integration and not slow"). LINT=0 skips the lint tier.
# pytest runs in PF_TEST_WORKERS processes (pytest-xdist; default 4 on the 2-core reference box, whose tests wait on
# polls and builds a third of the time: 19 min 35 s with 4, 23 min 15 s with 3 and 27 min 36 s with 2, clean clones
# of 2026-11-27; 0 runs everything in this process): each file stays in one worker, files start in collection order, which puts the
# real-PostgreSQL files first, those with the most tests first, so each worker starts one (tests/conftest.py).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-artifacts
lint_rc=0
if [ "${LINT:-1}" != 0 ]; then
    start=$(date +%s)
    .venv/bin/ruff check . || lint_rc=1
    .venv/bin/ruff format --check . || lint_rc=1
    .venv/bin/mypy || lint_rc=1
    if [ $lint_rc -ne 0 ]; then
        echo "make test: LINT FAILED (see above; \`make fix\` applies ruff's safe fixes and formats)" >&2
    else
        echo "make test: lint passed in $(( $(date +%s) - start )) s"
    fi
fi
# The site's browser tests use Debian's chromium (scripts/apt-packages-site.txt): never let Playwright download one.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
start=$(date +%s)
.venv/bin/pytest -n "${PF_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder --junitxml=test-artifacts/junit.xml --durations=15 "$@"
rc=$?
echo "make test: pytest finished in $(( $(date +%s) - start )) s with exit code $rc"
if [ $rc -eq 5 ]; then
    echo "make test: FAILED: no tests were collected" >&2
    exit 1
fi
if [ $rc -eq 0 ] && [ $lint_rc -ne 0 ]; then
    exit 1
fi
exit $rc
