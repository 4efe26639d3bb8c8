"""The fault-and-hostile-input suite (issue #12): ground truth, fault injectors, recovery and invariants.

`tests/benchmarks/chaos.py` is the command that runs it; `tests/integration/test_chaos_smoke.py` runs its smoke
scenario under `make test`. See docs/reliability.md.
"""
