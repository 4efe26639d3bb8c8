"""Validate the branch, tag and revision names that reach git from outside (force form, API, bisection, CLI).

A name a user types ends up in argv of git on a worker (`git fetch <repo> <branch>`, `git checkout <rev>`) and
in the results database. argv lists stop the shell, but not git's own option parser: a "branch" such as
`--upload-pack=touch /tmp/X` is an option to `git fetch` and runs a command. So every name is checked before
any build is dispatched: a ref name must be one `git check-ref-format` accepts and must not start with `-`; a
revision must be a hexadecimal object name or such a ref name. Pure and stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MAX_REF_LENGTH = 255
_HEX_RE = re.compile(r"^[0-9a-fA-F]{4,64}$")
# Characters git refuses anywhere in a ref name (git-check-ref-format(1), rules 3-5 and 8), plus every ASCII
# control character and DEL.
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
# For the force form's text fields (Buildbot checks a regex there): no leading '-', none of the characters
# above. The full rules are enforced again by check_ref before a build is dispatched.
FORM_REF_REGEX = r"^(?!-)[^\x00-\x20\x7f~^:?*\[\\]{0,255}$"
FORM_REVISION_REGEX = r"^(?:[0-9a-fA-F]{4,64}|(?!-)[^\x00-\x20\x7f~^:?*\[\\]{1,255})?$"


class RefNameError(ValueError):
    """A branch, tag or revision name is not acceptable; the message says what is wrong and what to do."""


def ref_problem(name: str) -> str | None:
    """Why `name` is not a safe ref name (branch or tag, optionally under refs/), or None when it is.

    Implements git-check-ref-format(1)'s rules for a name with at least one component (as `--allow-onelevel`),
    refuses names starting with '-' (git would read them as options) and bounds the length.
    """
    if not isinstance(name, str) or not name:
        return "is empty"
    if len(name) > MAX_REF_LENGTH:
        return f"is longer than {MAX_REF_LENGTH} characters"
    if name.startswith("-"):
        return "starts with '-' (git would read it as an option)"
    bad = _FORBIDDEN.search(name)
    if bad:
        return f"contains {bad.group()!r}, which git does not allow in a ref name"
    if name == "@":
        return "is '@', which git does not allow as a ref name"
    if "@{" in name:
        return "contains '@{', which git does not allow in a ref name"
    if ".." in name:
        return "contains '..', which git does not allow in a ref name"
    if name.startswith("/") or name.endswith("/") or "//" in name:
        return "has an empty path component ('/' at the start or end, or '//')"
    if name.endswith("."):
        return "ends with '.', which git does not allow"
    for part in name.split("/"):
        if part.startswith("."):
            return f"has a component {part!r} starting with '.', which git does not allow"
        if part.endswith(".lock"):
            return f"has a component {part!r} ending with '.lock', which git does not allow"
    return None


def check_ref(name: str, what: str = "branch") -> str:
    """Return `name` if it is a safe ref name, else raise RefNameError naming `what` and the rule."""
    problem = ref_problem(name)
    if problem is not None:
        raise RefNameError(
            f"{what} {show(name)} {problem}; give a branch or tag name as git accepts it "
            "(`git check-ref-format --branch NAME`)"
        )
    return name


def revision_problem(rev: str) -> str | None:
    """Why `rev` is not a safe revision (a hex object name or a safe ref name), or None when it is."""
    if not isinstance(rev, str) or not rev:
        return "is empty"
    if _HEX_RE.match(rev):
        return None
    problem = ref_problem(rev)
    return None if problem is None else f"is neither a commit sha (4-64 hex digits) nor a ref name: it {problem}"


def check_revision(rev: str, what: str = "revision") -> str:
    """Return `rev` if it is a hex object name or a safe ref name, else raise RefNameError."""
    problem = revision_problem(rev)
    if problem is not None:
        raise RefNameError(f"{what} {show(rev)} {problem}")
    return rev


def is_sha(rev: str) -> bool:
    return isinstance(rev, str) and bool(_HEX_RE.match(rev))


def show(value: object) -> str:
    """The value for an error message: repr (control characters escaped), cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# PostgreSQL's release tags: REL9_6_24 / REL_9_6_BETA1 before 10 (a major has two numbers), REL_16_3 / REL_16_RC1 since
_RELEASE_OLD = re.compile(r"^REL_?([1-9])_(\d+)_(\d+|(?:ALPHA|BETA|RC)\d+)$")
_RELEASE_NEW = re.compile(r"^REL_?(\d+)_(\d+|(?:ALPHA|BETA|RC)\d+)$")
_STAGES = {"ALPHA": 0, "BETA": 1, "RC": 2}
_FINAL = len(_STAGES)


def release_version(tag: str) -> tuple[tuple[int, ...], int, int] | None:
    """(major, stage, number) of a PostgreSQL release tag, None for another name: REL_16_BETA1 is ((16,), 1, 1),
    REL_16_0 ((16,), 3, 0) after every beta and release candidate of 16, REL9_6_24 ((9, 6), 3, 24)."""
    m = _RELEASE_OLD.match(tag)
    if m is not None:
        major: tuple[int, ...] = (int(m.group(1)), int(m.group(2)))
        rest = m.group(3)
    else:
        m = _RELEASE_NEW.match(tag)
        if m is None:
            return None
        major, rest = (int(m.group(1)),), m.group(2)
    if rest.isdigit():
        return major, _FINAL, int(rest)
    stage = rest.rstrip("0123456789")
    return major, _STAGES[stage], int(rest[len(stage) :])


def release_order(tags: Iterable[str], authored: Mapping[str, int] | None = None) -> list[str]:
    """Tags oldest release first: PostgreSQL's release tags by version (9.6.24 < 10.0; 16 beta 1 < 16 rc 1 <
    16.0 < 16.1), then any other tag by `authored` time (tag -> epoch seconds, when known) and the numbers in its
    name. The one order of releases: jobs' sides and the site's release pages."""
    when = authored or {}

    def key(tag: str) -> tuple:
        version = release_version(tag)
        if version is not None:
            return (0, version, tag)
        return (1, when.get(tag, 0), tuple(int(x) for x in re.findall(r"\d+", tag)), tag)

    return sorted(tags, key=key)
