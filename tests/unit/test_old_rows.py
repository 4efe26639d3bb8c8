"""Every reader of stored results survives samples the validator refuses since issue #26 item 4, which a results
database filled before it may hold (tests/legacy_rows.py): a release job whose side A measured 0 tx/s or -5,
1e-300 against 1e300, farm runs of such values at release tags. `perffarm jobs --status` and `perffarm try
--status` print no traceback and say what is wrong; `perffarm publish` writes every page and the affected
comparisons say why they have no ratio; the comparison tables `perffarm compare` prints do the same. Real SQLite,
real git, the real CLI in this process."""

from __future__ import annotations

import json
import os

import pytest

from master.cli import main
from recipes import ab
from recipes.api import HIGHER, LOWER, Metric, WorkloadResult
from tests.legacy_rows import OLD_JOBS, old_database


@pytest.fixture
def old(tmp_path, monkeypatch):
    settings = old_database(tmp_path)
    for k in [k for k in os.environ if k.startswith("PERFFARM_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", settings.repository_url)
    return settings


SAYS = {  # job id -> what its status and page say about side B (and C)
    2: "side A has no positive samples of tps: cannot form a ratio",
    3: "side A has no positive samples of tps: cannot form a ratio",
    4: "the ratios of side B to side A of tps overflow (samples of implausible magnitude): cannot form a ratio",
    5: "side B has negative samples of tps: cannot form a ratio",
    6: "side A has no positive samples of ctx_switches_per_tx: cannot form a ratio",
}


def _strict(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_jobs_status_says_which_side_has_no_ratio_without_a_traceback(old, capsys):
    assert len(SAYS) == len(OLD_JOBS)
    for job_id, says in SAYS.items():
        assert main(["jobs", "--status", str(job_id), "--all-metrics"]) == 0
        out, err = capsys.readouterr()
        assert says in out and "Traceback" not in out + err, out + err
        assert says.replace("side B", "side C") in out or job_id in (2, 3, 6), out  # every side after A
        assert main(["jobs", "--status", str(job_id), "--all-metrics", "--format", "json"]) == 0
        doc = _strict(capsys.readouterr().out)
        (c,) = doc["vs_first"]["B"]
        assert c["problem"] == says and c["ratio"] is None and c["verdict"] == "no ratio", c
    # the healthy job next to them still has its ratios
    assert main(["jobs", "--status", "1"]) == 0
    assert "1.1000" in capsys.readouterr().out


def test_try_status_reads_the_same_way(old, capsys):
    assert main(["try", "--status", "2"]) == 0
    out, err = capsys.readouterr()
    assert SAYS[2] in out and not err


def test_publish_writes_every_page_and_the_affected_comparisons_say_why(old, tmp_path, capsys):
    out_dir = tmp_path / "site"
    assert main(["publish", "--out", str(out_dir), "--jobs", "1", "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    for job_id, says in SAYS.items():
        page = (out_dir / "jobs" / f"{job_id}.html").read_text()
        assert f'<span class="warn">{says}</span>' in page, page
    assert "1.1000" in (out_dir / "jobs" / "1.html").read_text()
    # the release table: a pair the newest job measured and that forms no ratio says so (job 6 measured
    # ctx_switches_per_tx, job 5 tps with the later releases negative)
    table = (out_dir / "releases" / "m1" / "index.html").read_text()
    assert 'title="job 5: REL_2_0 has negative samples of tps: cannot form a ratio"' in table, table
    assert 'title="job 6: REL_1_0 has no positive samples of ctx_switches_per_tx: cannot form a ratio"' in table
    assert (out_dir / "archaeology" / "m1.html").exists()
    # the series of the farm's runs, 0, -5, 1e-300 and 1e300 among them: pages and data, every number JSON
    assert list((out_dir / "series").glob("*.html"))
    data = list((out_dir / "data" / "series").rglob("*.json"))
    assert data
    for f in data:
        _strict(f.read_text())
    # the next publish builds on it (incremental pages read the same rows)
    assert main(["publish", "--out", str(out_dir), "--jobs", "1", "--quiet"]) == 0


def _sides(tps_a: float, tps_b: float) -> tuple[list[WorkloadResult], list[WorkloadResult]]:
    def side(tps: float, switches: float) -> list[WorkloadResult]:
        return [
            WorkloadResult(
                "ro",
                (
                    Metric("tps", "tx/s", HIGHER, (tps, tps, tps)),
                    Metric("ctx_switches_per_tx", "switches/tx", LOWER, (switches, switches, switches)),
                ),
            )
        ]

    return side(tps_a, 0.0), side(tps_b, 0.0)


def test_compare_tables_print_what_is_wrong_instead_of_failing():
    """`perffarm compare` measures now, so its samples pass the validator's rules; a lower-is-better count that
    is 0 on side A (context switches per transaction) still forms no ratio, and compare() failed on it."""
    a, b = _sides(1000.0, 900.0)
    cs = ab.compare(a, b)
    tps, switches = cs
    assert tps.estimate is not None and tps.estimate.ratio == pytest.approx(0.9)
    assert switches.estimate is None and switches.verdict == "no ratio"
    assert switches.problem == "side A has no positive samples of ctx_switches_per_tx: cannot form a ratio"
    table = ab.format_table(cs, ["ctx_switches_per_tx"])
    assert switches.problem in table and "0.9000" in table
    assert _strict(json.dumps(switches.to_json()))["problem"] == switches.problem
    versions = ab.format_versions("AB", {"A": "13.16", "B": "13.16"}, {"B": cs}, ["ctx_switches_per_tx"])
    assert switches.problem in versions
