"""recipes/paired.py and recipes/pg/paired.py: the reference option and how a paired run's result is assembled
(no PostgreSQL needed; tests/integration/test_postgres_recipes.py runs the paired bench on real servers)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from recipes import paired as pairing
from recipes.api import BuildFailed, Context, Metric, WorkloadResult
from recipes.pg import paired
from recipes.pg.build import BuildSpec, Install

SHA = "a" * 40


def ctx(tmp_path: Path, **options: str) -> Context:
    return Context(
        src_dir=tmp_path / "src",
        work_dir=tmp_path / "work",
        state_dir=tmp_path / "state",
        sha=SHA,
        ref="master",
        options=options,
    )


def test_no_reference_is_an_unpaired_run(tmp_path):
    assert pairing.requested(ctx(tmp_path)) is None
    assert pairing.requested(ctx(tmp_path, reference=" ")) is None


@pytest.mark.parametrize("value", ["REL_17_0", "A" * 40, "a" * 39, "--upload-pack=x", "a" * 40 + "\n" + "b"])
def test_a_reference_that_is_not_a_full_sha_is_refused(tmp_path, value):
    with pytest.raises(BuildFailed, match="expected the reference commit's full 40-hex sha"):
        pairing.requested(ctx(tmp_path, reference=value))


def test_a_full_sha_is_the_reference(tmp_path):
    assert pairing.requested(ctx(tmp_path, reference="0123456789abcdef" * 2 + "01234567")) == (
        "0123456789abcdef" * 2 + "01234567"
    )


def wr(name, *metrics):
    return WorkloadResult(name, tuple(Metric(*m) for m in metrics))


def test_merge_adds_the_reference_samples_and_per_round_ratios_of_throughput_only():
    run = [
        wr("ro-c1", ("tps", "tx/s", "higher", (110.0, 99.0, 102.0)), ("latency_avg", "ms", "lower", (1.0, 1.1, 1.0))),
        wr("instr", ("instructions", "instructions/query", "lower", (5000.0, 5000.0))),
    ]
    ref = [
        wr("ro-c1", ("tps", "tx/s", "higher", (100.0, 100.0, 100.0)), ("latency_avg", "ms", "lower", (1.0, 1.0, 1.0)))
    ]
    out = {w.name: {m.name: m for m in w.metrics} for w in pairing.merge(run, ref)}
    assert list(out["ro-c1"]) == ["tps", "latency_avg", "tps.reference", "tps.rqps"]
    assert out["ro-c1"]["tps.reference"].samples == (100.0, 100.0, 100.0)
    assert out["ro-c1"]["tps.rqps"].samples == pytest.approx((1.10, 0.99, 1.02))
    assert (out["ro-c1"]["tps.rqps"].unit, out["ro-c1"]["tps.rqps"].direction) == ("ratio", "higher")
    assert list(out["instr"]) == ["instructions"]  # exact counts are not paired


def test_merge_pairs_the_first_common_rounds_when_one_side_has_fewer():
    run = [wr("ins", ("inserts", "rows/s", "higher", (200.0, 210.0, 190.0)))]
    ref = [wr("ins", ("inserts", "rows/s", "higher", (100.0, 100.0)))]
    (w,) = pairing.merge(run, ref)
    assert {m.name: m.samples for m in w.metrics}["inserts.rqps"] == pytest.approx((2.0, 2.1))


def test_merged_metric_names_pass_the_result_schema():
    from recipes.result import NAME_RE

    side = [wr("w", ("qps", "queries/s", "higher", (1.0,)))]
    (w,) = pairing.merge(side, side)
    assert all(NAME_RE.match(m.name) for m in w.metrics)


def test_the_commit_itself_as_reference_reuses_its_install(tmp_path):
    own = Install(tmp_path, SHA, 17, "17.0", "built")
    assert paired.build_reference(ctx(tmp_path), BuildSpec(), SHA, own) is own


def test_a_reference_outside_the_workers_clone_says_what_to_do(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    own = Install(tmp_path, SHA, 17, "17.0", "built")
    with pytest.raises(BuildFailed, match="is not in this worker's clone of master: choose a reference on the branch"):
        paired.build_reference(ctx(tmp_path), BuildSpec(), "b" * 40, own)


def test_the_reference_tree_is_exported_from_the_workers_clone(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    g = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    (src / "configure").write_text("old\n")
    subprocess.run([*g, "add", "-A"], check=True)
    subprocess.run([*g, "commit", "-qm", "one"], check=True)
    old = subprocess.run([*g, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (src / "configure").write_text("new\n")
    subprocess.run([*g, "commit", "-qam", "two"], check=True)
    c = ctx(tmp_path)
    c.work_dir.mkdir()
    tree = pairing.reference_tree(c, old)
    assert (tree / "configure").read_text() == "old\n"
    assert (src / "configure").read_text() == "new\n"  # the commit's own checkout is untouched
    assert not (c.work_dir / "reference-src.tar").exists()
