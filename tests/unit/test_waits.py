"""Wait events sampled during pgbench samples (issue #29 item 2): the sampler's parsing and the result's form
(recipes/pg/waits.py) and the master's check of what a worker reports (recipes/result.py). The sampler against a
real server is tests/integration/test_postgres_recipes.py."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from recipes.api import BenchFailed
from recipes.pg import waits
from recipes.result import ResultError, validate, validate_job
from tests.unit.test_result_schema import good


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
