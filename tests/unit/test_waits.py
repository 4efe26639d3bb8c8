"""Wait events sampled during pgbench samples (issue #29 item 2): the sampler's parsing and the result's form
(recipes/pg/waits.py), the master's check of what a worker reports (recipes/result.py), the store (a real SQLite
file through the real ingest), and which moves are claimed (master/explain/waits.py). The sampler against a real
server is tests/integration/test_postgres_recipes.py."""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace

import pytest

from master import ingest, store
from master.explain import report
from master.explain import waits as explain
from recipes.api import BenchFailed
from recipes.pg import waits
from recipes.result import ResultError, validate, validate_job
from tests.unit.test_publish import farm, farm_template  # noqa: F401 - fixtures
from tests.unit.test_result_schema import good
from tests.unit.test_store_ingest import env, put, result_for, run_ctx  # noqa: F401 - env is a fixture


def test_the_samplers_answer_is_waits_with_their_backends_and_anything_else_is_refused() -> None:
    got = waits.parse_answer(["CPU|3", "LWLock:WALWrite|2", "Client:ClientRead|1"])
    assert got == {"CPU": 3, "LWLock:WALWrite": 2, "Client:ClientRead": 1}
    for bad in ("ERROR:  relation does not exist", "LWLock:<b>|2", "CPU|", "CPU|-1", "|3"):
        with pytest.raises(ValueError, match="unexpected line"):
            waits.parse_answer([bad])


def test_a_sample_is_stored_as_shares_with_the_rare_waits_folded_into_other() -> None:
    doc = waits.Waits({"CPU": 6, "LWLock:WALWrite": 3, "IO:DataFileRead": 1}, ticks=5, hz=20.0).to_json()
    assert doc == {
        "observations": 10,
        "ticks": 5,
        "hz": 20.0,
        "shares": {"CPU": 0.6, "IO:DataFileRead": 0.1, "LWLock:WALWrite": 0.3},
    }
    many = waits.Waits({f"LWLock:L{i}": 1 for i in range(70)} | {"CPU": 100}, ticks=10, hz=20.0).to_json()
    assert len(many["shares"]) == waits.MAX_WAITS and many["shares"]["Other"] == pytest.approx(
        8 / 170, abs=1e-6
    )  # 71 waits: 63 named
    assert sum(many["shares"].values()) == pytest.approx(1.0, abs=1e-4)
    assert waits.Waits({}, ticks=3, hz=20.0).to_json()["shares"] == {}  # nothing active: no share of nothing
    assert waits.merge([waits.Waits({"CPU": 1}, 2, 20.0), waits.Waits({"CPU": 2, "Lock:tuple": 1}, 3, 20.0)]) == (
        waits.Waits({"CPU": 3, "Lock:tuple": 1}, 5, 20.0)
    )


@pytest.mark.parametrize("value", ["fast", "-1", "1e9", "nan"])
def test_a_sampling_rate_that_is_no_rate_says_what_to_write(value: str) -> None:
    with pytest.raises(BenchFailed, match=re.escape("expected a sampling rate in Hz from 0 (off) to 1000")):
        waits.rate({"waits": value})
    assert waits.rate({}) == waits.DEFAULT_HZ and waits.rate({"waits": "0"}) == 0


def _sample(shares: dict, observations: int = 100) -> dict:
    return {"observations": observations, "ticks": 50, "hz": 20.0, "shares": shares}


def _with_waits(member: object, key: str = "waits") -> dict:
    doc = good()
    doc[key] = member
    return doc


def test_a_result_carries_waits_and_the_master_refuses_malformed_ones_with_the_path() -> None:
    fine = {"loop": [_sample({"CPU": 0.7, "LWLock:WALWrite": 0.3})]}
    assert validate(_with_waits(fine))["waits"] == fine
    assert validate(_with_waits(fine, "waits_reference"))["waits_reference"] == fine
    for bad, where, says in (
        ({"other": fine["loop"]}, "$.waits.other", "names no workload of this result"),
        ({"loop": []}, "$.waits.loop", "expected a list of 1 to 10,000 samples"),
        ({"loop": [_sample({"CPU": 1.5})]}, "$.waits.loop[0].shares.CPU", "expected a share from 0 to 1"),
        ({"loop": [_sample({"CPU": -0.1})]}, "$.waits.loop[0].shares.CPU", "expected a share from 0 to 1"),
        ({"loop": [_sample({"CPU": 0.7, "IO:X": 0.7})]}, "$.waits.loop[0].shares", "add up to 1.4000"),
        ({"loop": [_sample({"<script>": 0.1})]}, '$.waits.loop[0].shares["<script>"]', "Type:Event or CPU"),
        ({"loop": [_sample({"CPU": 1.0}, -1)]}, "$.waits.loop[0].observations", "expected an integer from 0"),
        ({"loop": [_sample({"CPU": 1.0}, 10**10)]}, "$.waits.loop[0].observations", "to 1,000,000,000"),
        ({"loop": [_sample({"CPU": 1.0}, 0)]}, "$.waits.loop[0].shares", "shares of no observation"),
        ({"loop": [_sample({f"W{i}": 0.01 for i in range(65)})]}, "$.waits.loop[0].shares", "more than the 64"),
        ({"loop": [{**_sample({}), "hz": 0}]}, "$.waits.loop[0].hz", "expected a rate in Hz above 0"),
        ({"loop": [{**_sample({}), "x": 1}]}, "$.waits.loop[0]", "unknown member 'x'"),
        ({"loop": [_sample({"CPU": True})]}, "$.waits.loop[0].shares.CPU", "expected a share"),
        ([], "$.waits", "expected an object"),
    ):
        with pytest.raises(ResultError) as e:
            validate(_with_waits(bad))
        assert str(e.value).startswith(where + ":") and says in str(e.value), (bad, str(e.value))


def test_a_job_sides_waits_are_checked_against_that_sides_workloads() -> None:
    from tests.unit.test_jobs import result_for as job_result

    sides = [SimpleNamespace(label=x, sha=x.lower() * 40, patched=False) for x in "AB"]
    doc = job_result(SimpleNamespace(id=7, sides=sides))
    name = doc["sides"][0]["workloads"][0]["name"]
    doc["sides"][1]["waits"] = {name: [_sample({"CPU": 1.0})]}
    assert validate_job(doc)["sides"][1]["waits"][name][0]["shares"] == {"CPU": 1.0}
    doc["sides"][1]["waits"] = {name: [_sample({"CPU": 2.0})]}
    with pytest.raises(ResultError, match=re.escape(f"$.sides[1].waits.{name}[0].shares.CPU: expected a share")):
        validate_job(doc)


def _draws(rng: random.Random, shares: dict[str, float], samples: int, per: int) -> list[dict]:
    """`samples` samples of `per` backend-samples each, every one drawn from `shares` (as the stored form)."""
    out = []
    for _ in range(samples):
        counts: dict[str, int] = {}
        for _ in range(per):
            w = rng.choices(list(shares), weights=list(shares.values()))[0]
            counts[w] = counts.get(w, 0) + 1
        out.append(_sample({k: v / per for k, v in counts.items()}, per))
    return out


BEFORE = {"CPU": 0.9, "LWLock:WALWrite": 0.06, "IO:DataFileRead": 0.03, "Lock:transactionid": 0.01}
AFTER = {"CPU": 0.5, "LWLock:WALWrite": 0.46, "IO:DataFileRead": 0.03, "Lock:transactionid": 0.01}


def test_a_wait_that_moved_is_named_with_both_shares_and_the_same_distribution_claims_nothing() -> None:
    rng = random.Random(29)
    a, b = _draws(rng, BEFORE, 6, 300), _draws(rng, AFTER, 6, 300)
    got = explain.compare({"w": a}, {"w": b})
    assert got is not None and [c.wait for c in got.changes] == ["LWLock:WALWrite", "CPU"]  # the wait, then CPU
    top = got.changes[1]
    assert top.before == pytest.approx(0.9, abs=0.03) and top.after == pytest.approx(0.5, abs=0.04)
    assert top.low < top.delta < top.high < 0
    assert explain.summary(got.changes).startswith("w: LWLock:WALWrite 5.7% → 45%")
    assert ", CPU 9" in explain.summary(got.changes)
    # A against A: 200 pairs of the same distribution, four waits each: a claim in at most 1% of them (the
    # family-wise 99% of the Bonferroni-corrected intervals), here 0-2
    claims = sum(
        bool(explain.compare({"w": _draws(rng, BEFORE, 4, 150)}, {"w": _draws(rng, BEFORE, 4, 150)}).changes)
        for _ in range(200)
    )
    assert claims <= 3, claims


def test_samples_that_disagree_widen_the_interval_beyond_the_binomial_one() -> None:
    """Two samples at 10% and two at 40% of a wait: the pooled 25% is no better known than those four samples say,
    however many backend-samples each holds, so a side at 31% is not a change; at 70% it is."""
    spread = [_sample({"Lock:tuple": s, "CPU": 1 - s}, 10_000) for s in (0.1, 0.4, 0.1, 0.4)]
    near = [_sample({"Lock:tuple": s, "CPU": 1 - s}, 10_000) for s in (0.3, 0.32, 0.31, 0.31)]
    assert explain.changed("w", explain.samples_from_json(spread), explain.samples_from_json(near)) == []
    far = [_sample({"Lock:tuple": s, "CPU": 1 - s}, 10_000) for s in (0.7, 0.71, 0.69, 0.7)]
    assert [c.wait for c in explain.changed("w", explain.samples_from_json(spread), explain.samples_from_json(far))]


def test_too_few_samples_or_observations_are_not_judged_and_say_so() -> None:
    one = [_sample({"CPU": 1.0}, 1000)]
    two = [_sample({"CPU": 0.5, "LWLock:X": 0.5}, 1000)] * 2
    assert explain.changed("w", explain.samples_from_json(one), explain.samples_from_json(two)) is None
    thin = [_sample({"CPU": 1.0}, 10)] * 2
    assert explain.changed("w", explain.samples_from_json(thin), explain.samples_from_json(two)) is None
    judged = explain.compare({"w": one}, {"w": two})
    assert judged is not None and judged.unjudged == ("w",) and not judged.changes
    assert explain.table(judged) == "no wait was judged (w: too few samples to judge)"
    assert explain.compare({"w": one}, {"v": two}) is None  # no workload sampled on both sides: nothing to say


def test_a_culprits_waits_come_from_its_and_its_parents_stored_runs(env) -> None:  # noqa: F811
    """Through the real ingest into a real SQLite file: each commit's own side of its runs (not a paired run's
    reference, which is another commit) is pooled, and the culprit's page gets the moved waits."""
    repo, settings = env
    rng = random.Random(7)
    parent, culprit = repo.head(), repo.commit("culprit", allow_empty=True)
    for i, (sha, shares) in enumerate(((parent, BEFORE), (culprit, AFTER)), start=1):
        doc = result_for(sha, samples=[1.0, 2.0, 3.0, 4.0])
        doc["waits"] = {"loop": _draws(rng, shares, 4, 200)}
        doc["waits_reference"] = {"loop": _draws(rng, AFTER if sha == parent else BEFORE, 4, 200)}
        ingest.ingest_file(settings, put(settings, doc, f"b-{i}.json"), run_ctx(i, sha), "fixture")
    conn = store.connect(settings.results_db)
    machine = conn.execute("SELECT machine_id FROM runs LIMIT 1").fetchone()[0]
    assert conn.execute("SELECT COUNT(*) FROM waits").fetchone()[0] == 4  # (run, side, workload)
    assert len(store.runs.waits_of(conn, culprit, machine, "fixture")["loop"]) == 4
    b = SimpleNamespace(state="culprit", culprit=culprit, parent=parent, machine_id=machine, recipe="fixture")
    r = report.waits_for_bisection(conn, b)
    assert r is not None and r.summary.startswith("loop: LWLock:WALWrite ") and ", CPU" in r.summary
    assert report.waits_for_bisection(conn, SimpleNamespace(**{**vars(b), "state": "running"})) is None
    conn.close()


def test_a_culprits_alert_page_says_where_the_backends_waited(farm, tmp_path) -> None:  # noqa: F811
    """The culprit's and its parent's stored runs sampled waits: the alert page names the wait that rose, escaped
    (a wait's name is checked at ingest, but the page never trusts a stored string)."""
    from tests.unit.test_publish import NOW, publish_all, text_of

    rng = random.Random(3)
    conn = store.connect(farm.settings.results_db)
    culprit, parent = conn.execute("SELECT culprit, parent FROM bisections WHERE culprit IS NOT NULL").fetchone()
    with store.transaction(conn):
        for sha, shares in ((parent, BEFORE), (culprit, AFTER | {"CPU": 0.3, "Lock:<b>x": 0.2})):
            run_id = conn.execute("SELECT MAX(id) FROM runs WHERE sha = ? AND status = 'ok'", (sha,)).fetchone()[0]
            samples = _draws(rng, shares, 4, 200)
            conn.execute(
                "INSERT INTO waits (run_id, side, workload, samples) VALUES (?, 'run', 'pgbench-ro-prepared-c2', ?)",
                (run_id, json.dumps(samples)),
            )
    aid = conn.execute("SELECT id FROM alerts").fetchone()[0]
    # and the alert's messages say it too (every channel builds from this snapshot: test_alerts_messages.py)
    from master.alerts.sync import alert_view

    said = alert_view(conn, farm.settings.alerts, aid).waits
    assert said is not None and said.startswith("pgbench-ro-prepared-c2: LWLock:WALWrite 5"), said
    conn.close()
    out = tmp_path / "site"
    publish_all(farm.settings, out, now=NOW)
    detail = text_of(out, farm.settings.alerts.link_template.format(site_url="", alert_id=aid))
    assert "Where the backends waited" in detail
    assert "pgbench-ro-prepared-c2: LWLock:WALWrite 5" in detail and "% → 4" in detail, detail
    assert "Lock:&lt;b&gt;x 0% → 2" in detail and "<b>x" not in detail, detail


def test_a_jobs_page_says_where_each_sides_backends_waited() -> None:
    """Issue #29: a job (a try patch, releases) shows each side's waits against A's from the job result's
    `sides[].waits`, the moved wait named, and a side sampled alike claims nothing; the page escapes wait names."""
    from master.publish.pages.jobs import wait_reports
    from master.publish.render import render

    rng = random.Random(27)
    sides = [
        {"workloads": [], "waits": {"pgbench-ro-prepared-c2": _draws(rng, BEFORE, 6, 300)}},
        {"workloads": [], "waits": {"pgbench-ro-prepared-c2": _draws(rng, AFTER, 6, 300)}},
        {"workloads": [], "waits": {"pgbench-ro-prepared-c2": _draws(rng, BEFORE, 6, 300)}},
    ]
    job = SimpleNamespace(result={"sides": sides}, sides=[SimpleNamespace(label=x) for x in "ABC"])
    (b, rb), (c, rc) = wait_reports(job)
    assert (b, c) == ("B", "C")
    assert rb.summary.startswith("pgbench-ro-prepared-c2: LWLock:WALWrite") and not rc.changes
    assert wait_reports(SimpleNamespace(result={"sides": sides[:1]}, sides=job.sides[:1])) == []
    assert wait_reports(SimpleNamespace(result={"sides": [{"workloads": []}, sides[1]]}, sides=job.sides)) == []
    row = SimpleNamespace(workload="pgbench-ro-prepared-c2", metric="tps", unit="tx/s", direction="higher", base=1.0)
    page = render(
        "job.html",
        root="../",
        title="try job 1",
        job=_job(),
        rows=[SimpleNamespace(**vars(row), cells=[])],
        explained=[],
        counters=[],
        waits=[(b, rb)],
    )
    assert "Where the backends waited: B vs A" in page and "LWLock:WALWrite" in page


def _job() -> SimpleNamespace:
    a = SimpleNamespace(label="A", revision="REL_15_18", patched=False, sha="a" * 40)
    return SimpleNamespace(
        id=1, kind="try", state="done", sides=[a], result={}, error=None, note=None, build_url=None, branch="master",
        builder="pg-quick@local", requested_by="alice", created_at=0, finished_at=0, machine_id=None, options=[],
    )  # fmt: skip
