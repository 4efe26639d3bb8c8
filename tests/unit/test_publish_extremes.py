"""Chart data never wraps: values beyond what scaled int64 holds are written as exact JSON floats."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from master import ingest
from master.publish import publish_all
from master.publish.encode import fixed
from master.settings import load_settings
from recipes.result import ResultError, validate
from tests.harness import make_repo
from tests.unit.test_store_ingest import put, result_for, run_ctx

INT64_MIN = -(2**63)


def decoded(cols: list[np.ndarray]) -> list[list[float | None]]:
    scale, ints = fixed(*cols)
    assert INT64_MIN not in [x for c in ints for x in c]
    json.dumps(ints, allow_nan=False)  # what js_call will encode
    return [[None if x is None else x / scale for x in c] for c in ints]


@pytest.mark.parametrize(
    "values",
    [
        [1e308, 2.5],  # wrapped to -9223372036854775808 before
        [1e19, -3e19, 12.25],
        [2.0**53, 1.0],
        [9.007199254740991e15, 4.0],  # just below 2**53: still integers
        [1234.5, 0.0001, 0.0],  # the ordinary case stays integers
    ],
)
def test_fixed_is_exact_or_falls_back_to_floats(values):
    col = np.array(values)
    (got,) = decoded([col])
    assert got == pytest.approx(values, rel=1e-12, abs=0)


def test_fixed_writes_nan_and_infinities_as_null():
    (got,) = decoded([np.array([1.0, math.nan, math.inf, 2.0])])
    assert got[0] == 1.0 and got[1] is None and got[2] is None and got[3] == 2.0


def test_ordinary_values_still_use_integers():
    scale, ints = fixed(np.array([1234.5, 1.25]), np.array([1000.0, 1.0]))
    assert scale == 10**5 and ints == [[123450000, 125000], [100000000, 100000]]


def test_an_implausible_sample_is_rejected_at_validation():
    doc = result_for("a" * 40, samples=(1.0, 1e308))
    with pytest.raises(ResultError, match=r"^\$\.workloads\[0\]\.metrics\[0\]\.samples\[1\]: .*not a plausible"):
        validate(doc)


def test_huge_plausible_samples_reach_the_chart_exactly(tmp_path):
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    shas = [repo.head(), repo.bench_commit("b", 2), repo.bench_commit("c", 3)]
    levels = [1e20, 1.25e20, 3e29]  # beyond int64, up to the largest plausible sample (recipes/result.py)
    for i, (sha, level) in enumerate(zip(shas, levels), start=1):
        doc = result_for(sha, samples=(level, level))
        ingest.ingest_file(settings, put(settings, doc, f"b-{i}.json"), run_ctx(i, sha), "fixture")
    out = tmp_path / "site"
    publish_all(settings, out, now=1_800_000_000.0, jobs=1)
    for f in out.rglob("*"):
        if f.is_file() and f.suffix in (".js", ".json", ".html"):
            assert "-9223372036854775808" not in f.read_text(), f  # e.g. the per-commit ratio of 3e29 / 1.25e20
    charts = [p for p in (out / "data" / "series").glob("*/0.js")]
    checked = 0
    for chart in charts:
        text = chart.read_text()
        assert "-9223372036854775808" not in text
        args = json.loads("[" + text[text.index("(") + 1 : text.rindex(")")] + "]")
        points = args[2]
        medians = [m / points["scale"] for m in points["med"]]
        if points["n"] == [2, 2, 2]:  # the throughput series (the other metric is the fixture's wall time)
            assert medians == pytest.approx(levels, rel=1e-5)
            checked += 1
    assert checked == 1
