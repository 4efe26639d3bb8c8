"""`perffarm detect` CLI: JSON shape, directions, and input errors that exit 2 naming the row."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from master.verbs import detect as cli


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
    assert cli.main([_step_csv(tmp_path), "--format", "json"]) == 1  # a regression: the gate fails
    out = json.loads(capsys.readouterr().out)
    assert sorted(out) == ["change_points", "commits", "newest", "regression", "samples"]
    assert out["regression"] is True and out["commits"] == 120 and out["samples"] == 360
    assert out["newest"]["judged"] is True
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
    assert cli.main([_step_csv(tmp_path, samples=2)]) == 1
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
    assert cli.run(args) == 1
    assert json.loads(capsys.readouterr().out)["change_points"][0]["index"] == 70


def test_no_change_prints_empty_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = "\n".join(["commit,value"] + [f"c{i},{100 + (i % 7) * 0.1}" for i in range(50)])
    assert cli.main([_write(tmp_path, rows + "\n"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["change_points"] == [] and out["regression"] is False


def test_the_exit_status_is_a_ci_gate_and_too_few_commits_are_not_called_consistent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #31: `detect` exits 1 on a regression (a CI gate can use it) and, with too few commits for the gate,
    says so instead of "consistent with the recent baseline"."""
    assert cli.main([_step_csv(tmp_path), "--direction", "lower"]) == 0  # the same step is an improvement
    capsys.readouterr()
    assert cli.main([_write(tmp_path, "commit,value\na,100\nb,50\n")]) == 0
    out = capsys.readouterr().out
    assert "too few to judge (2 commits" in out and "consistent" not in out
    assert cli.main([_write(tmp_path, "commit,value\na,100\nb,50\n"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["newest"] == {"judged": False, "change": None}


# ------------------------------------------------------------------------ hostile input: one line, exit 2 (#12)


@pytest.mark.parametrize(
    "data, expect",
    [
        (b"commit,value\nc1,1\nc2,\xff\xfe2\n", "line 3: not UTF-8 text"),
        ("commit,value\nc1,1\n".encode("utf-16"), "line 1: not UTF-8 text"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "line 1: not UTF-8 text"),
        (b"commit,value\nc1,1\nc2,2\x00\n", "row 3"),
        (b"commit,value\n" + b"c1," + b"9" * 200_000 + b"\n", "row 2"),
    ],
    ids=["latin1", "utf16", "png", "nul", "huge-field"],
)
def test_binary_and_malformed_input_is_one_line_and_exit_2(tmp_path: Path, capsys, data: bytes, expect: str) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(data)
    assert cli.main([str(path)]) == cli.EXIT_INPUT
    err = capsys.readouterr().err
    assert err.startswith("perffarm detect: ") and err.count("\n") == 1 and expect in err, err
    assert err.isprintable() or err[:-1].isprintable()


def test_random_bytes_never_crash(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(12)
    path = tmp_path / "noise.csv"
    for i in range(200):
        blob = rng.integers(0, 256, size=int(rng.integers(0, 400)), dtype=np.uint8).tobytes()
        if i % 2:
            blob = b"commit,value\n" + blob
        path.write_bytes(blob)
        assert cli.main([str(path)]) in (cli.EXIT_OK, cli.EXIT_INPUT)
        capsys.readouterr()


def test_perffarm_detect_on_a_binary_file_prints_no_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "bin.csv"
    path.write_bytes(b"commit,value\nc1,1\n\xc3\x28 broken\n")
    proc = subprocess.run(
        [sys.executable, "-m", "master.cli", "detect", str(path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"perffarm detect: {path}: line 3: not UTF-8 text (byte 0xc3 at column 1); save the file as UTF-8 "
        "(a CSV with columns commit,value)"
    ]
