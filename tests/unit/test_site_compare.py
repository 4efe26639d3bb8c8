"""What the compare page reads: every point's raw samples in its commit's data (as stored, or null beyond
commits.ROW_SAMPLES), each series' workload family and the statistics settings in data/refs.js."""

from __future__ import annotations

import filecmp
import json

import pytest

from master.publish import commits, publish_all
from master.publish.pages.compare import CONFIDENCE, FDR_Q, family
from master.publish.render import join_columns, js_literal, literal_column, text_column
from recipes.ab import MIN_EFFECT
from tests.compare_support import HOSTILE, MANY, WORKLOADS, build_compare

NOW = 1_800_000_000.0


def call_args(text: str, func: str) -> list:
    assert text.startswith(f"perffarm.{func}(") and text.endswith(");\n")
    return json.loads("[" + text[len(f"perffarm.{func}(") : -3] + "]")


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    settings, shas = build_compare(tmp / "data")
    publish_all(settings, tmp / "www", now=NOW)
    return settings, shas, tmp / "www"


def test_commit_data_carries_every_points_samples_as_stored(published):
    _, shas, out = published
    refs = call_args((out / "data/refs.js").read_text(), "refs")[0]
    for sha in shas:
        name, data = call_args((out / f"data/commits/{sha}.js").read_text(), "commit")
        assert name == sha and len(data["rows"]) == len(WORKLOADS)
        for row in data["rows"]:
            sid, n, samples = row[0], row[2], row[9]
            chunk = json.loads((out / f"data/series/{sid}/0.json").read_text())
            stored = chunk["samples"][chunk["sha"].index(sha)]
            if n > commits.ROW_SAMPLES:
                assert n == MANY and samples is None
            else:
                assert samples == stored and len(samples) == n
    assert {s["family"] for s in refs["series"].values()} == {
        "pgbench-ro",
        "pgbench-rw",
        "select1",
        "latency",
        "copy-big",
        HOSTILE[: -len("-c1")],
    }
    assert refs["stats"] == {"confidence": CONFIDENCE, "fdr_q": FDR_Q, "min_effect": MIN_EFFECT}


def test_the_encoders_rows_carry_the_same_samples(published, tmp_path, monkeypatch):
    # where a median's text is not proven the rows come from the JSON encoder one by one: the same bytes
    settings, _, _ = published
    publish_all(settings, tmp_path / "columns", now=NOW, jobs=1)
    monkeypatch.setattr(commits, "_rows_text", lambda *_a: None)
    publish_all(settings, tmp_path / "encoder", now=NOW, jobs=1)
    a = sorted(p.relative_to(tmp_path / "columns") for p in (tmp_path / "columns").rglob("data/commits/*.js"))
    assert a and all(filecmp.cmp(tmp_path / "columns" / k, tmp_path / "encoder" / k, shallow=False) for k in a)


def test_a_text_column_splices_json_texts_script_safe():
    texts = ["[1.5, 2.0]", "null", "[]", '["</script>&"]', "[1e+30, 3.25]"]
    blob, off = join_columns([text_column(texts), literal_column(";", len(texts))])
    assert blob.decode().split(";")[:-1] == [js_literal(json.loads(t)).replace(",", ", ") for t in texts]
    assert b"<" not in blob and b"&" not in blob


@pytest.mark.parametrize(
    ("workload", "expect"),
    [("pgbench-ro-c8", "pgbench-ro"), ("idle-connections-c1-i1000", "idle-connections"), ("select1", "select1")],
)
def test_a_workloads_family_drops_a_sweeps_counts(workload, expect):
    assert family(workload) == expect
