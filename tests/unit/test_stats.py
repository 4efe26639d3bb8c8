"""The A/B statistics: paired median ratios, bootstrap CIs, interleaving order, CV."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from recipes import stats
from recipes.stats import (
    bootstrap_median_ratio,
    cv,
    interleaved_order,
    median_rank_interval,
    paired_ratios,
    percentile,
)


def test_percentile_interpolates() -> None:
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10], 99) == 10
    with pytest.raises(ValueError):
        percentile([], 50)


def test_cv() -> None:
    assert cv([5.0]) == 0.0
    assert cv([10, 10, 10]) == 0.0
    assert cv([9, 11]) == pytest.approx(1.41421356 / 10, rel=1e-6)


def test_paired_ratios_need_equal_lengths() -> None:
    assert paired_ratios([2, 4], [3, 2]) == [1.5, 0.5]
    with pytest.raises(ValueError):
        paired_ratios([1, 2], [1])


def test_identical_sides_give_ratio_one_and_zero_width() -> None:
    a = [100.0, 103.0, 97.0, 101.0]
    est = bootstrap_median_ratio(a, a)
    assert est.ratio == 1.0 and est.low == 1.0 and est.high == 1.0
    assert not est.excludes_one()


def test_bootstrap_separates_a_real_shift_from_noise() -> None:
    rng = random.Random(7)
    # Shared drift per round (the neighbour load) plus independent noise: pairing cancels the drift.
    drift = [rng.uniform(0.7, 1.3) for _ in range(30)]
    a = [1000 * d * rng.gauss(1, 0.01) for d in drift]
    same = [1000 * d * rng.gauss(1, 0.01) for d in drift]
    slower = [970 * d * rng.gauss(1, 0.01) for d in drift]
    aa = bootstrap_median_ratio(a, same)
    ab = bootstrap_median_ratio(a, slower)
    assert not aa.excludes_one()
    assert ab.excludes_one() and ab.high < 1.0
    assert ab.ratio == pytest.approx(0.97, abs=0.01)
    assert aa.half_width < 0.02


def test_median_interval_is_the_distribution_free_one() -> None:
    # n = 10: P(Bin(10, 1/2) <= 1) = 11/1024 <= 0.025 < P(<= 2) = 56/1024, so x_(2)..x_(9) (0-based 1..8).
    assert median_rank_interval(10) == (1, 8)
    assert median_rank_interval(20) == (5, 14)  # P(<= 5) = 0.0207
    assert median_rank_interval(5) == (0, 4) and median_rank_interval(1) == (0, 0)
    with pytest.raises(ValueError):
        median_rank_interval(0)


def test_ci_is_never_narrower_than_the_order_statistic_interval() -> None:
    # Ten ratios whose middle six coincide: the bootstrap alone says +-0 around 1.0; x_(2)..x_(9) does not.
    a = [100.0] * 10
    b = [97.0, 98.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 102.0, 103.0]
    est = bootstrap_median_ratio(a, b)
    assert est.ratio == 1.0 and est.low == pytest.approx(0.98) and est.high == pytest.approx(1.02)


def test_bootstrap_is_reproducible_for_a_seed() -> None:
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0], [1.1, 1.9, 3.3, 4.1, 5.2]
    assert bootstrap_median_ratio(a, b, seed=3) == bootstrap_median_ratio(a, b, seed=3)


def test_interleaved_order_alternates_who_goes_first() -> None:
    assert interleaved_order(4) == ["A", "B", "B", "A", "A", "B", "B", "A"]
    three = interleaved_order(5, ("x", "y", "z"))
    assert len(three) == 15 and all(sorted(three[i : i + 3]) == ["x", "y", "z"] for i in range(0, 15, 3))


def test_ab_verdicts_follow_direction_and_ignore_tiny_exact_changes() -> None:
    from recipes.ab import compare
    from recipes.api import Metric, WorkloadResult

    def run(tps: list[float], instr: list[float]) -> list[WorkloadResult]:
        return [
            WorkloadResult(
                "w", (Metric("tps", "tx/s", "higher", tuple(tps)), Metric("instructions", "i/q", "lower", tuple(instr)))
            )
        ]

    a = run([100, 101, 99, 100, 100], [50_000] * 5)
    slower = {c.metric: c for c in compare(a, run([90, 91, 89, 90, 90], [50_003] * 5))}
    assert slower["tps"].verdict == "regression"
    assert slower["instructions"].verdict == "same"  # +0.006%: a rebuild, not a change
    more = {c.metric: c for c in compare(a, run([110, 111, 109, 110, 110], [51_000] * 5))}
    assert more["tps"].verdict == "improvement" and more["instructions"].verdict == "regression"


def test_sweep_removes_dirs_of_dead_owners_only(tmp_path) -> None:
    import os
    import tempfile
    from pathlib import Path

    from recipes.pg.server import sweep_stale

    dead, alive = tmp_path / "pf-run-dead", tmp_path / "pf-run-alive"
    for d in (dead, alive):
        (d / "data").mkdir(parents=True)
    sock = Path(tempfile.mkdtemp(prefix="pf-sock-"))
    (dead / "owner.pid").write_text("999999999")
    (dead / "sockdir").write_text(str(sock))
    (alive / "owner.pid").write_text(str(os.getpid()))
    assert sweep_stale(tmp_path) == [dead]
    assert not dead.exists() and not sock.exists() and alive.exists()


def test_a_directory_a_live_run_counts_instructions_in_is_never_swept(tmp_path) -> None:
    """An instruction count's copy of the data directory lives under the pgdata root beside servers' directories;
    another run's sweep removed it mid-count (FileNotFoundError: .../pf-instr-*/output.txt) when it had no owner."""
    from recipes.pg.server import owned_dir, sweep_stale

    counting = owned_dir(tmp_path, "pf-instr-")
    orphan = tmp_path / "pf-instr-left-by-a-killed-run"
    orphan.mkdir()
    assert sweep_stale(tmp_path) == [orphan]
    assert counting.exists()


# ----------------------------------------------- samples that form no ratio (stored before #26 item 4 refused them)


@pytest.mark.parametrize(
    "a, b, says",
    [
        ([0.0, 0.0, 0.0], [1000.0, 1010.0, 990.0], "side A has no positive samples of tps"),  # side A measured 0
        ([-5.0, -5.0], [1000.0, 1000.0], "side A has no positive samples of tps"),
        ([1000.0, 1000.0], [-5.0, 900.0], "side B has negative samples of tps"),
        ([1e-300, 1e-300], [1e300, 1e300], "the ratios of side B to side A of tps overflow"),  # was inf, CI nan
    ],
)
def test_samples_that_form_no_ratio_raise_no_ratio_saying_which_side(a, b, says) -> None:
    from recipes.stats import NoRatio, ratio_problem

    with pytest.raises(NoRatio) as e:
        bootstrap_median_ratio(a, b)
    assert e.value.describe(metric="tps").startswith(says) and e.value.describe().endswith(": cannot form a ratio")
    assert ratio_problem(a, b) is not None and isinstance(e.value, ValueError)


def test_a_round_where_a_measured_zero_is_left_out_and_the_rest_form_the_ratio() -> None:
    """A lower-is-better count can honestly be 0 in one round (context switches per tx): that round has no ratio."""
    est = bootstrap_median_ratio([0.0, 2.0, 2.0], [1.0, 3.0, 3.0])
    assert est.ratio == 1.5 and est.n == 2


def test_t_quantiles_match_the_tables() -> None:
    from scipy import stats as sp

    for df in (1, 2, 3, 4, 5, 9, 30, 200):
        for p in (0.9, 0.975, 0.995):
            assert stats.t_quantile(p, df) == pytest.approx(float(sp.t.ppf(p, df)), rel=1e-9)
    assert stats.t_quantile(0.025, 4) == pytest.approx(-stats.t_quantile(0.975, 4))


def test_a_side_whose_first_slice_is_slow_does_not_bias_the_balanced_ratio() -> None:
    """Issue #28's fixture: rounds alternate which side takes the first slice (A in even rounds), and that side
    loses 4%. The true ratio is 1; the median of 5 per-round ratios says 1.04 (A went first 3 times), the
    order-balanced estimate says 1, with or without an odd round, and its CI does not pay for the order effect."""
    noise = [1.0, 1.002, 0.999, 1.001, 0.998, 1.0]
    for n in (5, 6):
        a = [1000.0 * (0.96 if r % 2 == 0 else 1.0) for r in range(n)]
        b = [1000.0 * (1.0 if r % 2 == 0 else 0.96) * noise[r] for r in range(n)]
        est = stats.balanced_ratio(a, b)
        assert est.ratio == pytest.approx(math.exp(sum(math.log(x) for x in noise[:n]) / n), abs=2e-3)
        assert est.low < 1.0 < est.high and est.half_width < 0.005
        assert stats.paired_estimate(a, b) == est
    # what the farm stored before: the median of per-round ratios, won by the order that went first more often
    a = [1000.0 * (0.96 if r % 2 == 0 else 1.0) for r in range(5)]
    b = [1000.0 * (1.0 if r % 2 == 0 else 0.96) for r in range(5)]
    assert statistics.median(stats.paired_ratios(a, b)) == pytest.approx(1 / 0.96)


def test_the_balanced_ratio_of_one_order_only_is_a_mean_log_ratio_and_of_two_rounds_their_range() -> None:
    est = stats.balanced_ratio([1.0, 1.0], [1.02, 0.98])
    assert est.ratio == pytest.approx(math.sqrt(1.02 * 0.98)) and (est.low, est.high) == (0.98, 1.02)
    one = stats.balanced_ratio([2.0], [3.0])
    assert (one.ratio, one.low, one.high, one.n) == (1.5, 1.5, 1.5, 1)
    with pytest.raises(stats.NoRatio):
        stats.balanced_ratio([1.0, 1.0], [1.0, 0.0])
    # a metric that can read 0 keeps the median estimate
    assert stats.paired_estimate([1.0, 1.0, 1.0], [0.0, 1.0, 1.0]).ratio == 1.0


def test_block_ratios_are_geometric_means_of_opposite_order_rounds() -> None:
    assert stats.block_ratios([1.0] * 5, [1.04, 0.96, 1.04, 0.96, 1.04]) == pytest.approx([math.sqrt(1.04 * 0.96)] * 2)
    assert stats.block_ratios([2.0], [3.0]) == [1.5]
    with pytest.raises(stats.NoRatio):
        stats.block_ratios([1.0, 0.0], [1.0, 1.0])


def test_an_instruction_count_in_progress_survives_another_runs_sweep(tmp_path, monkeypatch) -> None:
    # Two runs on one host share /dev/shm/perffarm-<uid>: each sweeps stale run directories when it starts, and the
    # instruction counter's scratch directory (pf-instr-*) had no owner file, so a second run deleted it under a
    # running valgrind (seen with two test files at once: FileNotFoundError on its output.txt).
    import subprocess

    from recipes.api import BenchFailed, Context
    from recipes.pg import instructions
    from recipes.pg.build import Install
    from recipes.pg.server import sweep_stale

    swept: list = []

    def valgrind_while_another_run_starts(argv, **kw):  # the other run starts while valgrind runs
        swept.extend(sweep_stale(tmp_path / "shm"))
        return subprocess.CompletedProcess(argv, 1)

    monkeypatch.setattr(instructions.subprocess, "run", valgrind_while_another_run_starts)
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    install = Install(tmp_path / "install", "0" * 40, 15, "15.18", "built")
    ctx = Context(src_dir=tmp_path, work_dir=tmp_path, state_dir=tmp_path, sha="0" * 40, ref="t", options={})
    with pytest.raises(BenchFailed, match="exited with 1"):  # not FileNotFoundError: output.txt is still there
        instructions.count(ctx, install, snapshot, ["SELECT 1;"], tmp_path / "shm")
    assert swept == []
    assert list((tmp_path / "shm").iterdir()) == []  # and the count cleans up after itself
