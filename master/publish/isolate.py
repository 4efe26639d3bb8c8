"""One page's failure never stops the others: a page whose view model or rendering raises is written as a page
that says what went wrong, the publish goes on, and the failure is reported (docs/site.md, "A page that fails").

`page(w, name, rel, title)` is a context manager around building and writing one page (or one page writer's
whole call, from the publisher): an exception inside it is caught, logged as one line, recorded in `w.failures`
and, where the page has a file (`rel`; data files have none), that file is written with what went wrong instead.
The publish state records that some pages failed, so the next publish is a full one that builds them again.
"""

from __future__ import annotations

import contextlib
import html
import logging
import sqlite3
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger("perffarm.publish")
MAX_ERROR = 500  # characters of the exception's message kept in the report and on the page
# Not a page's own failure but the machine's (a full disk, the results database locked or unreadable, no
# memory): the whole publish stops and the live site stays as it was, as before; the next publish catches up.
ENVIRONMENT = (OSError, sqlite3.Error, MemoryError)


@dataclass(frozen=True)
class PageFailure:
    """A page that could not be built: the page (PAGES name), the file written in its place (None: a data file,
    or a failure before the page's files were known) and the error, one line."""

    page: str
    file: str | None
    error: str

    def line(self) -> str:
        return f"{self.file or self.page} ({self.page}): {self.error}"

    def to_json(self) -> dict[str, str | None]:
        return {"page": self.page, "file": self.file, "error": self.error}

    @classmethod
    def from_json(cls, d: dict[str, str | None]) -> PageFailure:
        return cls(str(d["page"]), d.get("file"), str(d["error"]))


class _Writer(Protocol):
    failures: list[PageFailure]

    def write(self, rel: str, text: str) -> None: ...


def describe(e: BaseException) -> str:
    """The exception in one line: its type, its message (bounded) and where it was raised (file:line)."""
    message = " ".join(str(e).split())[:MAX_ERROR]
    where = ""
    tb = traceback.extract_tb(e.__traceback__)
    if tb:
        frame = tb[-1]
        parts = Path(frame.filename).parts
        short = "/".join(parts[parts.index("master") :]) if "master" in parts else Path(frame.filename).name
        where = f" (at {short}:{frame.lineno})"
    return f"{type(e).__name__}: {message}{where}" if message else f"{type(e).__name__}{where}"


def failure_page(rel: str, page: str, title: str, error: str) -> str:
    """The HTML written in place of a page that could not be built (the error escaped, as all text here)."""
    root = "../" * rel.count("/")
    try:
        from master.publish.render import render

        return render("page_failed.html", root=root, title=title, page=page, error=error)
    except Exception:  # noqa: BLE001 - the templates themselves may be what failed: plain HTML then
        return (
            f'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)} · '
            f"perffarm</title>\n</head>\n<body>\n<h1>This page could not be built</h1>\n<p>{html.escape(error)}</p>\n"
            "</body>\n</html>\n"
        )


@contextlib.contextmanager
def page(w: _Writer, name: str, rel: str | None = None, title: str | None = None) -> Iterator[None]:
    """Build and write one page (page writer `name`; its file `rel`, None for data files) inside: an exception is
    caught, logged and recorded in `w.failures`, and `rel` is written as a page that says what went wrong. The
    machine's failures (ENVIRONMENT) are not a page's: they stop the publish."""
    try:
        yield
    except ENVIRONMENT:
        raise
    except Exception as e:  # noqa: BLE001 - one page's failure must not stop the others (the point of this module)
        error = describe(e)
        failure = PageFailure(name, rel, error)
        log.warning("publish: %s could not be built: %s", rel or f"page {name!r}", error)
        if rel is not None:
            try:
                w.write(rel, failure_page(rel, name, title or rel, error))
            except ENVIRONMENT:
                raise
            except Exception as e2:  # noqa: BLE001 - e.g. a file name the writer refuses: reported with the error
                failure = PageFailure(name, None, f"{error}; writing the page that says so failed too: {describe(e2)}")
        w.failures.append(failure)
