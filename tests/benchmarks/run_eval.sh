#!/usr/bin/env bash
# Rerunnable change-detection evaluation: ours vs Apache Otava vs MongoDB E-divisive.
# Creates .venv-eval at the repository root on first use (peers are test-only dependencies and pin
# numpy differently from the product), then runs tests/benchmarks/evaluate.py with any arguments,
# e.g.  tests/benchmarks/run_eval.sh --sets dev --scale 0.25   for a quick look.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${EVAL_VENV:-$root/.venv-eval}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
stamp="$venv/.perffarm-eval-requirements"
wanted="$(cat "$here/requirements-eval.txt" "$here/requirements-eval-nodeps.txt")"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$here/requirements-eval.txt"
    "$venv/bin/python" -m pip install --quiet --no-deps -r "$here/requirements-eval-nodeps.txt"
    printf '%s' "$wanted" > "$stamp"
fi
cd "$root"
exec "$venv/bin/python" "$here/evaluate.py" "$@"
