"""The idle-connections workloads (seed 003) and the sweeps profile, as data: names, identities, room to connect.
The workload itself runs on real PostgreSQL in tests/integration/test_pg_releases.py."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest

from recipes.pg import idle
from recipes.pg.profile import conf_text, identities, load_profile, profile_names, workloads


def test_an_idle_list_makes_one_workload_per_count_each_with_its_own_identity():
    entry = {"name": "idle-connections", "kind": "pgbench", "args": ["-S"], "clients": [1], "idle": [0, 100, 1000]}
    profile = {**load_profile("quick"), "workloads": [entry]}
    made = workloads(profile)
    assert [(w.name, w.spec["idle_connections"], w.args[-4:]) for w in made] == [
        ("idle-connections-c1-i0", 0, ("-c", "1", "-j", "1")),
        ("idle-connections-c1-i100", 100, ("-c", "1", "-j", "1")),
        ("idle-connections-c1-i1000", 1000, ("-c", "1", "-j", "1")),
    ]
    found = identities(profile, {})
    assert [found[w.name]["workload"]["idle"] for w in made] == [0, 100, 1000]
    assert found["idle-connections-c1-i0"] != found["idle-connections-c1-i100"]  # series of their own


def test_idle_applies_to_pgbench_workloads_only():
    entry = {"name": "x", "kind": "instructions", "queries": "point-select", "idle": [10]}
    with pytest.raises(ValueError, match="`idle` applies to pgbench workloads only"):
        workloads({**load_profile("quick"), "workloads": [entry]})


@pytest.mark.parametrize("name", ["sweeps", "full"])
def test_every_profile_with_idle_connections_leaves_room_for_them(name):
    profile = load_profile(name)
    limit = int(re.findall(r"^max_connections = (\d+)", conf_text(profile, 18), re.M)[-1])
    need = max(
        w.spec.get("idle_connections", 0) + int(dict(zip(w.args, w.args[1:])).get("-c", 1)) + idle.HEADROOM
        for w in workloads(profile)
    )
    assert need <= limit, f"{name}: max_connections {limit} < {need}"


def test_the_sweeps_profile_has_the_seeds_sweeps():
    assert "sweeps" in profile_names()
    names = {w.name for w in workloads(load_profile("sweeps"))}
    assert {f"txid-contention-c{c}" for c in (1, 2, 4, 8, 16, 32, 64, 128)} <= names  # seed 000 (quick variant)
    assert {f"select-only-c{c}" for c in (1, 2, 4, 8, 16, 64, 256, 1000)} <= names  # seeds 003 (active), 004
    assert {f"idle-connections-c1-i{m}" for m in (0, 100, 1000)} <= names  # seed 003 (idle)


def test_an_overlay_can_be_left_out_to_measure_what_it_changes():
    from recipes.pg.profile import overlays_for

    quick = load_profile("quick")
    assert overlays_for(quick, 13) == [] and overlays_for(quick, 18) == ["since-14.conf", "since-18.conf"]
    full = conf_text(quick, 18)
    assert "compute_query_id = off" in full and "io_method = 'sync'" in full
    without = conf_text(quick, 18, without={"since-18.conf"})
    assert "compute_query_id = off" in without and "io_method" not in without
    assert "overlay since-18.conf left out" in without


def test_the_holder_stops_a_pgbench_that_inherited_sigint_ignored():
    """A job a shell starts in the background without job control (`make test > log &` in a script) gets SIGINT
    ignored, and its children inherit that across exec. pgbench installs no SIGINT handler outside `-i`, so a SIGINT
    left the idle connections' pgbench running until the 30-s SIGKILL, once per side and sample with idle
    connections (test_pg_releases' idle tests: 155 s and 63 s instead of about 35 and 5). The holder stops it with
    SIGTERM, which no shell ignores. `sleep` stands in for pgbench here (no SIGINT handler either); the real pgbench
    is stopped this way in tests/integration/test_pg_releases.py."""
    proc = subprocess.Popen(
        ["sleep", "600"],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509 - the inherited state
        start_new_session=True,
    )
    try:
        idle._stop(proc)
        assert proc.returncode == -signal.SIGTERM, proc.returncode  # -SIGKILL: SIGINT went unheard for 30 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
