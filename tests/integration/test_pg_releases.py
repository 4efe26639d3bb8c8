"""Every major the recipes support, on real release trees: an autoconf-only major (13) and a meson major (18).

The session fixture `pg_releases` (tests/pg_support.py) makes a repository with one commit per real release from
Debian's source packages (scripts/pg-releases-repo.sh: REL_13_16 from bullseye, REL_18_6 from sid) and builds both
once per run with the recipes' build code; one three-way `perffarm compare` runs the whole quick profile on them,
interleaved in one job, with a third side (18 plus an injected busy loop in the executor) that shows each ratio is
to the first version. Builds are cached like the other PostgreSQL tests' (install cache by sha, ccache), so a rerun
on the same machine starts warm.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from master import compare
from recipes.api import BenchFailed, Context, checkout_layout
from recipes.pg import idle
from recipes.pg.profile import conf_text, load_profile, result_names, workloads
from recipes.pg.server import Server
from tests.benchmarks.pg_inject import busy_loop_patch
from tests.pg_support import RELEASES_WORK, Releases

pytestmark = [pytest.mark.slow, pytest.mark.integration]

WORK = RELEASES_WORK
QUICK_FAST = [
    *("--option", "samples=2"),
    *("--option", "duration_s=1"),
    *("--option", "warmup_s=0"),
    *("--option", "scale=1"),
    *("--option", "ab_slices=2"),
    *("--option", "instruction_samples=2"),
]


@pytest.fixture
def releases(pg_releases: Releases) -> Path:
    return pg_releases.repo


@pytest.mark.timeout(3600)  # the fixture: two cold builds (~4 + 5 min on 2 cores); then the quick profile
def test_an_autoconf_and_a_meson_major_build_and_run_the_quick_profile_in_one_nway_compare(
    releases: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the third side is 18 plus a per-query busy loop: its instructions go up against 13 by more than 18's own
    subprocess.run(["git", "-C", str(releases), "checkout", "--quiet", "REL_18_6"], check=True)
    patch = tmp_path / "busy.patch"
    patch.write_text(busy_loop_patch(releases, 2000))
    out = tmp_path / "releases.json"
    argv = ["--repo", str(releases), "--work", str(WORK), "REL_13_16", "REL_18_6", "REL_18_6", "--patch", str(patch)]
    assert compare.main([*argv, *QUICK_FAST, "--json", str(out)]) in (0, 1)  # 1: a side measured worse than A
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    versions = [(v["label"], v["major"], v["version"]) for v in doc["versions"]]
    assert versions == [("A", 13, "13.16"), ("B", 18, "18.6"), ("C", 18, "18.6")]
    assert "A 13.16" in printed and "C 18.6" in printed and "ratio to A" in printed
    quick = {name for w in workloads(load_profile("quick")) for name in result_names(w)}  # op-join-hash, tpch-q01…
    for label in ("B", "C"):
        measured = {c["workload"] for c in doc["vs_first"][label]}
        assert measured == quick, f"{label}: missing {sorted(quick - measured)}"
        for c in doc["vs_first"][label]:
            assert len(c["a"]) == len(c["b"]) > 0, c
            if c["ratio"] is None:  # no ratio to take (a counter at 0 on both sides): said, never a guess
                assert c["problem"], c
                continue
            assert c["ci_low"] <= c["ratio"] <= c["ci_high"], c

    def instructions(label: str) -> float:
        return next(
            c["ratio"]
            for c in doc["vs_first"][label]
            if c["workload"] == "instr-point-select" and c["metric"] == "instructions"
        )

    assert instructions("C") > instructions("B") * 1.02  # the injected loop, measured against 13 like the rest
    print(
        f"\n18.6 / 13.16 instructions per point select: {instructions('B'):.4f}; with the loop {instructions('C'):.4f}"
    )


@pytest.mark.timeout(1800)
def test_idle_connections_are_held_open_next_to_the_measured_client_on_both_majors(
    releases: Path, tmp_path: Path
) -> None:
    # seed 003: one active client next to 1,000 idle connections, 13 against 18 in one job (builds cached above)
    out = tmp_path / "idle.json"
    argv = ["--repo", str(releases), "--work", str(WORK), "REL_13_16", "REL_18_6", "--profile", "sweeps"]
    opts = [
        *("--option", "workloads=idle-connections-c1-i0,idle-connections-c1-i1000"),
        *("--option", "samples=2"),
        *("--option", "duration_s=2"),
        *("--option", "warmup_s=0"),
        *("--option", "scale=1"),
    ]
    assert compare.main([*argv, *opts, "--json", str(out)]) in (0, 1)  # 1: a side measured worse than A
    doc = json.loads(out.read_text())
    by = {(c["workload"], c["metric"]): c for c in doc["comparisons"]}
    held = by[("idle-connections-c1-i1000", "idle_connections")]
    assert held["a"] == held["b"] == [1000.0, 1000.0]  # every sample of both sides had all 1,000 connected
    assert ("idle-connections-c1-i0", "idle_connections") not in by  # none held: not recorded
    tps = {w: by[(w, "tps")] for w in ("idle-connections-c1-i0", "idle-connections-c1-i1000")}
    for c in tps.values():
        assert len(c["a"]) == len(c["b"]) == 2 and min(c["a"] + c["b"]) > 0
    print(
        "\nidle connections, tps of one active client: "
        + "; ".join(f"{w}: 13.16 {c['a']} / 18.6 {c['b']} (18/13 {c['ratio']:.3f})" for w, c in tps.items())
    )


@pytest.mark.timeout(1800)
def test_overlay_effects_are_measured_on_the_newer_release_in_the_same_job(releases: Path, tmp_path: Path) -> None:
    # 18 runs with since-14.conf (compute_query_id = off) and since-18.conf (io_method = 'sync'); 13 with neither:
    # the same 18 install also runs without each, so a release table can say what the settings change
    out = tmp_path / "overlays.json"
    argv = ["--repo", str(releases), "--work", str(WORK), "REL_13_16", "REL_18_6", "--overlay-effects"]
    opts = [*("--option", "workloads=instr-point-select-prepared,pgbench-ro-prepared-c1"), *QUICK_FAST]
    assert compare.main([*argv, *opts, "--json", str(out)]) in (0, 1)  # 1: a side measured worse than A
    doc = json.loads(out.read_text())
    effects = doc["overlay_effects"]
    assert sorted(effects) == ["since-14.conf", "since-18.conf"]
    for name, cs in effects.items():
        got = {(c["workload"], c["metric"]) for c in cs}
        assert {("instr-point-select-prepared", "instructions"), ("pgbench-ro-prepared-c1", "tps")} <= got, name
        for c in cs:
            if c["ratio"] is None:  # no ratio to take (a counter at 0 on both sides): said, never a guess
                assert c["problem"], (name, c)
                continue
            assert c["ci_low"] <= c["ratio"] <= c["ci_high"], (name, c)
    print(
        "\noverlay effects on 18.6 (with / without): "
        + "; ".join(
            f"{name} {c['workload']} {c['metric']} {c['ratio']:.4f} [{c['ci_low']:.4f}, {c['ci_high']:.4f}]"
            for name, cs in effects.items()
            for c in cs
            if c["metric"] in ("tps", "instructions")
        )
    )


def test_idle_connections_that_do_not_sleep_are_refused(
    pg_releases: Releases, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pgbench 13 keeps \sleep in microseconds in an int: 3600 s overflowed into no sleep at all, and 1,000 "idle"
    # connections ran SELECT 1 flat out. The holder checks that its connections are idle before any measurement.
    install = pg_releases.installs["REL_13_16"]
    assert install.major == 13
    (tmp_path / "state").mkdir()
    ctx = Context(
        src_dir=checkout_layout(WORK)[0],
        work_dir=checkout_layout(WORK)[1],
        state_dir=tmp_path / "state",
        sha=install.sha,
        ref="compare",
        options={},
    )
    with Server(ctx, install, conf_text(load_profile("sweeps"), 13), tmp_path / "run", name="idle") as srv:
        with idle.held(srv, 50) as held:
            assert held == 50
        monkeypatch.setattr(idle, "IDLE_SQL", "SELECT 1;\n\\sleep 3600 s\n")
        with pytest.raises(BenchFailed, match="idle connections are not idle"):
            with idle.held(srv, 50):
                pass
        assert srv.alive()
