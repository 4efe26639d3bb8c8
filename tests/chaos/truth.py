"""Ground truth: every commit the suite pushes prints a value no other commit prints.

The fixture recipe samples what the commit's `perffarm_bench.c` prints (`ops <value>`), so a stored run's samples
say which commit's program really ran: a run stored under commit C whose samples are not C's value measured
another commit (misattributed). Values are `level + k/1000` for the k-th commit, the level flipping between two
values every few commits so change detection and alerts have real change points to work on.
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.harness import BENCH_C, GitRepo

LEVELS = (1000.0, 1250.0)
BENCH_FILE = "perffarm_bench.c"
# Every commit's benchmark sleeps this long per sample (5 samples): a bench step of about a second is a window
# the suite can hit on purpose, and a constant sleep keeps the recipe's wall-time series steady.
SLEEP_US = 200_000

# Commit text that has broken parsers before: git's own record separators in the subject (the mirror parses
# `git log` output split on them), terminal controls, a bidi override, markup, and sheer length.
HOSTILE_SUBJECTS = (
    "record\x1eseparator in the subject",
    "unit\x1fseparator in the subject",
    "escape \x1b[31mred\x1b[0m \x1b]0;title\x07 and a bell \x07",
    "bidi \u202egnp.exe\u202c override",
    "<script>alert(1)</script> &amp; <img src=x onerror=alert(2)>",
    "all of it: \x1e\x1f\x1b[2J\x07\u202e<script>x</script>",
    "long " + "subject " * 1200,
)
ALL_IN_ONE_SUBJECT = "all of it: \x1e \x1f \x1b[2J \x07 \u202e <script>x</script>" + " long" * 1000
HOSTILE_AUTHORS = (
    "Mal\x1elory",
    "Eve\x1f\x1b[2J\x07",
    "\u202eLIVE Trudy",
    "<script>alert('author')</script>",
)


@dataclass(frozen=True)
class Pushed:
    """A commit the suite made, and the value its program prints."""

    sha: str
    value: float
    subject: str
    author: str
    on_master: bool  # on master's first-parent chain (the watched branch every commit of which must be measured)
    step: int  # the scenario step that pushed it (0: before the farm started)


class Truth:
    """The watched repository as the suite changes it, and what every commit in it prints."""

    def __init__(self, repo: GitRepo, rng: random.Random) -> None:
        self.repo = repo
        self.rng = rng
        self.commits: dict[str, Pushed] = {}
        self.k = 0
        self.level = 0
        self.next_flip = rng.randint(5, 12)
        head = repo.head()
        self.commits[head] = Pushed(head, self._value_of_file(), "initial commit", "Test Er", True, 0)

    def _value_of_file(self) -> float:
        text = (self.repo.path / BENCH_FILE).read_text()
        return float(text.split('printf("ops ', 1)[1].split("\\n", 1)[0])

    def _next_value(self) -> float:
        self.k += 1
        if self.k >= self.next_flip:
            self.level = 1 - self.level
            self.next_flip = self.k + self.rng.randint(5, 12)
        return float(f"{LEVELS[self.level] + self.k / 1000:.3f}")

    # ---------------------------------------------------------------------------------------- pushes
    def push(
        self, n: int, step: int, subjects: list[str] | None = None, authors: list[str] | None = None
    ) -> list[Pushed]:
        """Commit `n` benchmark changes on master (the repository the farm polls); `subjects`/`authors` give the
        text of the first ones (hostile text), the rest are plain."""
        out = []
        for i in range(n):
            value = self._next_value()
            subject = subjects[i] if subjects and i < len(subjects) else f"bench {self.k}: ops {value}"
            author = authors[i] if authors and i < len(authors) else "Test Er"
            (self.repo.path / BENCH_FILE).write_text(BENCH_C.format(value=f"{value:.3f}", sleep_us=SLEEP_US))
            self.repo.git("add", BENCH_FILE)
            # verbatim: the subject reaches the farm byte for byte (no whitespace or comment clean-up)
            self.repo.git("-c", f"user.name={author}", "commit", "--quiet", "--cleanup=verbatim", "-m", subject)
            sha = self.repo.head()
            real_author = self.repo.git("log", "-1", "--format=%an", sha)
            out.append(Pushed(sha, value, subject, real_author, True, step))
            self.commits[sha] = out[-1]
        return out

    def side_commit(self, step: int, subject: str = "side commit") -> Pushed:
        """A commit off master (its parent is master's head) that no branch points at yet: plumbing only, the
        working tree stays on master."""
        value = self._next_value()
        blob = self._git_stdin(
            ["hash-object", "-w", "--stdin"], BENCH_C.format(value=f"{value:.3f}", sleep_us=SLEEP_US)
        )
        tree = self._git_stdin(["mktree"], f"100644 blob {blob}\t{BENCH_FILE}\n")
        sha = self._git_stdin(["commit-tree", tree, "-p", self.repo.head(), "-m", subject], "")
        self.commits[sha] = Pushed(sha, value, subject, "Test Er", False, step)
        return self.commits[sha]

    def _git_stdin(self, args: list[str], text: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.repo.path, input=text, check=True, capture_output=True, text=True
        ).stdout.strip()

    # ---------------------------------------------------------------------------------------- refs
    def update_ref(self, ref: str, sha: str) -> str:
        """Create or move `ref` with `git update-ref` (which checks the name as git does); returns how."""
        self.repo.git("update-ref", ref, sha)
        return "git update-ref"

    def write_raw_ref(self, ref: str, sha: str) -> str:
        """Write a ref file directly, bypassing git's name checks (a ref git itself would refuse to create)."""
        path = self.repo.path / ".git" / ref
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sha + "\n")
        return "written directly"

    # ---------------------------------------------------------------------------------------- queries
    def value_of(self, sha: str) -> float | None:
        c = self.commits.get(sha)
        return c.value if c else None

    def master_commits(self) -> list[Pushed]:
        """Commits pushed to master after the farm started (the first poll only records refs), oldest first."""
        return [c for c in self.commits.values() if c.on_master and c.step > 0]

    def first_parent_chain(self) -> list[str]:
        """Master's first-parent history in the repository, oldest first."""
        return self.repo.git("rev-list", "--first-parent", "--reverse", "master").split()


def marker_paths(markers_dir: Path) -> list[Path]:
    """Files a hostile ref or form field would create if it ever ran a command."""
    return sorted(markers_dir.glob("PWNED*"))
