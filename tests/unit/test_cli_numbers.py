"""Every number a `perffarm` verb takes (ids, counts, ports, seconds) is checked where it is parsed: a value out of
range is a one-line usage error naming the argument (exit 2), never a traceback (issue #26, item 8: `jobs --status
99999999999999999999999` ended in OverflowError)."""

from __future__ import annotations

import pytest

from master import cli, store

HUGE = "99999999999999999999999"

# (argv, the argument the error must name); each through the real `perffarm` parser and verb
CASES = [
    (["jobs", "--status", HUGE], "--status"),
    (["jobs", "--status", "0"], "--status"),
    (["try", "--status", HUGE], "--status"),
    (["try", "--status", "-3"], "--status"),
    (["bisect", "--status", HUGE], "--status"),
    (["bisect", "--status", "x1"], "--status"),
    (["results", "list", "--limit", HUGE], "--limit"),
    (["results", "list", "--limit", "-1"], "--limit"),
    (["alerts", "list", "--limit", HUGE], "--limit"),
    (["alerts", "list", "--limit", "0"], "--limit"),
    (["publish", "--serve", "--port", "70000"], "--port"),
    (["alerts", "deliver", "--interval", "nan"], "--interval"),
    (["alerts", "deliver", "--interval", "-1"], "--interval"),
    (["alerts", "deliver", "--interval", "1e400"], "--interval"),
]


@pytest.fixture
def farm_env(tmp_path, monkeypatch):
    """A data directory with a results database, so a verb that got past its arguments would reach SQLite."""
    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", str(tmp_path / "repo"))
    (tmp_path / "data").mkdir()
    store.connect(tmp_path / "data" / "results.sqlite").close()
    return tmp_path


@pytest.mark.parametrize(("argv", "name"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_an_out_of_range_number_is_a_usage_error_naming_the_argument(argv, name, farm_env, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert f"argument {name}:" in last and "expected" in last, err


def test_ids_in_range_still_reach_the_verb(farm_env, capsys):
    # the largest id SQLite can hold is a well-formed question: "no such job", not a usage error
    assert cli.main(["jobs", "--status", str(2**63 - 1)]) == 2
    assert f"no job with id {2**63 - 1}" in capsys.readouterr().err
    assert cli.main(["results", "list", "--limit", "5"]) == 0
