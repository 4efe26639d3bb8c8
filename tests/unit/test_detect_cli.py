"""`perffarm detect` CLI: JSON shape, directions, and input errors that exit 2 naming the row."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from master.detect import cli


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "series.csv"
    path.write_text(text)
    return str(path)


def _step_csv(tmp_path: Path, samples: int = 3) -> str:
    rng = np.random.default_rng(0)
    rows = ["commit,value,machine"]
    for i in range(120):
        for _ in range(samples):
            rows.append(f"c{i:03d},{rng.normal(100.0 if i < 70 else 95.0, 1.0):.4f},m1")
    return _write(tmp_path, "\n".join(rows) + "\n")


def test_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([_step_csv(tmp_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["change_points"]
    (cp,) = out["change_points"]
    assert set(cp) == {"commit", "index", "ratio", "kind", "pvalue"}
    assert cp["commit"] == "c070" and cp["index"] == 70
    assert cp["kind"] == "regression"
    assert 0.93 < cp["ratio"] < 0.97
    assert 0 <= cp["pvalue"] < 1e-6


def test_direction_lower(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([_step_csv(tmp_path), "--format", "json", "--direction", "lower"]) == 0
    assert json.loads(capsys.readouterr().out)["change_points"][0]["kind"] == "improvement"


def test_text_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([_step_csv(tmp_path, samples=2)]) == 0
    out = capsys.readouterr().out
    assert "c070" in out and "regression" in out


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "row 1"),
        ("commit,val\na,1\n", "row 1"),
        ("value\n1\n", "row 1"),
        ("commit,value\n", "row 1"),
        ("commit,value\na,1\nb,1\nc,abc\n", "row 4"),
        ("commit,value\na,1\nb,nan\n", "row 3"),
        ("commit,value\na,1\n,2\n", "row 3"),
        ("commit,value\na,1\nb,2\na,3\n", "row 4"),
        ("commit,value\na,1\nb\n", "row 3"),
    ],
)
def test_input_errors_exit_2_naming_the_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    assert cli.main([_write(tmp_path, text)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert needle in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([str(tmp_path / "nope.csv")]) == 2
    assert "cannot open" in capsys.readouterr().err


def test_help_explains(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "commit,value" in out and "--direction" in out and "--format" in out


def test_mountable_as_subcommand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="perffarm")
    sub = parser.add_subparsers(dest="command")
    cli.add_arguments(sub.add_parser("detect"))
    args = parser.parse_args(["detect", _step_csv(tmp_path), "--format", "json"])
    assert cli.run(args) == 0
    assert json.loads(capsys.readouterr().out)["change_points"][0]["index"] == 70


def test_no_change_prints_empty_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = "\n".join(["commit,value"] + [f"c{i},{100 + (i % 7) * 0.1}" for i in range(50)])
    assert cli.main([_write(tmp_path, rows + "\n"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"change_points": []}
