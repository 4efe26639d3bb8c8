"""`perffarm detect FILE.csv`: run the change detector on anyone's CSV, as Otava's users do.

Input: a UTF-8 CSV with a header and at least the columns ``commit`` and ``value``, rows in first-parent
commit order; consecutive rows with the same commit are samples of that commit. The detectors use the farm's
``[detection] min_effect`` (perffarm.toml), so the command lists what the service would report. Exit codes
(a CI gate): 0 no regression, 1 a regression (a change point or the newest commits), 2 bad input (one line on
stderr naming the row or line, also for binary or non-UTF-8 files) or invalid settings.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from master.detect.config import DetectionSettings
from master.detect.direction import Direction
from master.redact import redact_text
from master.settings import SettingsError, load_settings
from master.textsafe import visible

if TYPE_CHECKING:  # the detectors load numpy and scipy: `run` imports them, `--help` does not
    from master.detect import online
    from master.detect.model import ChangePoint, Series

EXIT_OK = 0
EXIT_FOUND = 1  # a regression: the gate failed
EXIT_INPUT = 2


class InputError(Exception):
    """A problem with the user's CSV; the message names the row."""


@dataclass(frozen=True)
class Report:
    """What the command prints: retrospective change points and the gate's view of the newest commits."""

    change_points: tuple[ChangePoint, ...]
    gate: online.GateResult
    n_commits: int
    n_samples: int
    steady: bool = False  # samples repeat exactly: judged by magnitude (master/detect/steady.py)
    gate_needs: int = 0  # commits the newest-commits gate needs before it can judge (baseline + persistence)

    @property
    def regression(self) -> bool:
        """Whether a change point or the newest commits are a regression: the gate's verdict."""
        found = [cp.kind for cp in self.change_points] + ([self.gate.change.kind] if self.gate.change else [])
        return any(k.value == "regression" for k in found)


def _decode(path: str, data: bytes) -> str:
    """The file's text (UTF-8, a BOM allowed); InputError names the line and column of the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(
            f"{path}: line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column}); save the file "
            "as UTF-8 (a CSV with columns commit,value)"
        ) from None


def read_series(path: str) -> Series:
    """Parse the CSV into a Series, raising InputError that names the offending row (header = row 1)."""
    from master.detect.model import Series

    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror}") from None
    with io.StringIO(_decode(path, data), newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise InputError(f"{path}: row 1: {exc}") from None
        if header is None or not any(h.strip() for h in header):
            raise InputError(f"{path}: empty file (row 1: expected a header with columns commit,value)")
        names = [h.strip().lower() for h in header]
        for required in ("commit", "value"):
            if required not in names:
                raise InputError(f"{path}: row 1: missing column {required!r} in header {header!r}")
        ci, vi = names.index("commit"), names.index("value")
        commits: list[str] = []
        groups: list[list[float]] = []
        seen: set[str] = set()
        row_no = 1
        try:
            for row in reader:
                row_no += 1
                if not row or all(not cell.strip() for cell in row):
                    continue
                if len(row) <= max(ci, vi):
                    raise InputError(f"{path}: row {row_no}: expected {len(header)} fields, got {len(row)}")
                commit, text = row[ci].strip(), row[vi].strip()
                if not commit:
                    raise InputError(f"{path}: row {row_no}: empty commit")
                try:
                    value = float(text)
                except ValueError:
                    raise InputError(f"{path}: row {row_no}: value {text!r} is not a number") from None
                if not math.isfinite(value):
                    raise InputError(f"{path}: row {row_no}: value {text!r} is not finite")
                if commits and commits[-1] == commit:
                    groups[-1].append(value)
                    continue
                if commit in seen:
                    raise InputError(
                        f"{path}: row {row_no}: commit {commit!r} appears again after other commits; "
                        "rows must be in commit order with each commit's samples together"
                    )
                seen.add(commit)
                commits.append(commit)
                groups.append([value])
        except csv.Error as exc:  # raised while reading the row after the last one counted
            raise InputError(f"{path}: row {row_no + 1} (line {reader.line_num}): {exc}") from None
    if not commits:
        raise InputError(f"{path}: empty file (no data rows after the header in row 1)")
    return Series.from_samples(groups, commits)


def analyse(series: Series, direction: Direction, detection: DetectionSettings | None = None) -> Report:
    """Run both detectors the way the service does for one series (a steady series: the magnitude rule)."""
    from master.detect import offline, online, steady
    from master.detect.tracker import detector_settings

    off, on, st = detector_settings(detection or DetectionSettings())
    found_steady = steady.detect_if_steady(series, direction, st)
    if found_steady is not None:
        return Report(tuple(found_steady), online.QUIET, len(series), len(series.values), steady=True)
    cps = offline.detect(series, direction, off)
    verdict = online.gate_with_history(series, direction, on, cuts=[cp.index for cp in cps])
    return Report(tuple(cps), verdict, len(series), len(series.values), gate_needs=on.baseline_min + on.persistence)


def render_text(report: Report) -> str:
    """Human-readable table of change points plus one line on the newest commits."""
    lines = [f"{report.n_commits} commits, {report.n_samples} samples"]
    if not report.change_points:
        lines.append("no change points")
    else:
        lines.append(f"{'index':>6}  {'commit':<14} {'ratio':>8}  {'kind':<11} {'pvalue':>9}")
        for cp in report.change_points:
            lines.append(
                f"{cp.index:>6}  {visible(cp.commit[:14]):<14} {cp.ratio:>8.4f}  {cp.kind.value:<11} {cp.pvalue:>9.2g}"
            )
    g = report.gate
    if report.steady:
        lines.append(
            "steady series (every commit's samples agree within 0.01%): changes judged by magnitude, "
            "a step must last 2 commits"
        )
    elif g.change is None and report.n_commits < report.gate_needs:
        lines.append(
            f"newest commits: too few to judge ({report.n_commits} commits; the gate needs {report.gate_needs}: a "
            "baseline and a run of new commits)"
        )
    elif g.change is None:
        lines.append("newest commits: consistent with the recent baseline")
    else:
        lines.append(
            f"newest commits: {g.tier.value} {g.change.kind.value} starting at {visible(g.change.commit)} "
            f"(index {g.change.index}, ratio {g.change.ratio:.4f}, p={g.change.pvalue:.2g}, "
            f"{g.run_length} commits)"
        )
    return "\n".join(lines)


def render_json(report: Report) -> str:
    """The documented JSON shape: {"change_points": [{commit, index, ratio, kind, pvalue}], "regression": bool,
    "commits": int, "samples": int, "newest": {"judged": bool, "change": {...} | null}}."""
    g = report.gate
    return json.dumps(
        {
            "change_points": [cp.to_json() for cp in report.change_points],
            "regression": report.regression,
            "commits": report.n_commits,
            "samples": report.n_samples,
            "newest": {
                "judged": report.steady or g.change is not None or report.n_commits >= report.gate_needs,
                "change": g.change.to_json() if g.change else None,
            },
        },
        sort_keys=True,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the `detect` arguments on a (sub)parser so the perffarm CLI can mount this command."""
    parser.add_argument(
        "file",
        metavar="FILE.csv",
        help="CSV with a header and at least the columns commit,value; rows in first-parent commit "
        "order; consecutive rows with the same commit are samples of that commit",
    )
    parser.add_argument(
        "--direction",
        choices=[d.value for d in Direction],
        default=Direction.HIGHER.value,
        help="higher (default): higher values are better, e.g. TPS; lower: e.g. latency",
    )
    parser.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help='text (default) or json: {"change_points": [{"commit", "index", "ratio", "kind", "pvalue"}], '
        '"regression": true|false, "commits", "samples", "newest": {"judged", "change"}}',
    )


def build_parser(prog: str = "perffarm detect") -> argparse.ArgumentParser:
    """Stand-alone parser with a help text that explains the input and the output."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Find change points in a benchmark series. A change point's index is the 0-based "
        "position, among distinct commits, of the first commit after the change; ratio is the median "
        "after over the median before; pvalue is corrected for the choice of the split. Uses ranks, so "
        "skewed noise and outliers do not matter; uses every sample of every commit.",
        epilog="Exit status: 0 no regression, 1 a regression found (a CI gate), 2 bad input (the message names the "
        "row).",
    )
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Execute a parsed `detect` command; returns the exit code."""
    try:
        detection = load_settings(getattr(args, "config", None)).detection
    except SettingsError as exc:
        print(f"perffarm detect: invalid settings: {visible(redact_text(str(exc)))}", file=sys.stderr)
        return EXIT_INPUT
    try:
        series = read_series(args.file)
    except InputError as exc:
        print(f"perffarm detect: {visible(exc)}", file=sys.stderr)
        return EXIT_INPUT
    report = analyse(series, Direction.parse(args.direction), detection)
    print(render_json(report) if args.format == "json" else render_text(report))
    return EXIT_FOUND if report.regression else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse ``argv`` (default sys.argv[1:]) and run."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_INPUT
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
