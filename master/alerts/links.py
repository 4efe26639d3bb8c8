"""Links to where an alert is tracked (a mailing-list thread, a bug): `perffarm alerts set-state ID STATE --link URL`.

A link is shown on the alert's page and in the Atom feed, so it is checked before it is stored: an absolute
http(s) URL with a host, no whitespace, control, bidi or invisible characters (master/textsafe.py), at most
MAX_LENGTH characters. Anything else (`javascript:`, a relative path, a URL with a space) is refused with a message
that says what to give instead."""

from __future__ import annotations

from urllib.parse import urlsplit

from master.textsafe import visible

MAX_LENGTH = 2000


class LinkError(ValueError):
    """A link that cannot be stored: the message names it and says what to give."""


def check_link(url: str) -> str:
    """The link as stored, or LinkError."""
    shown = visible(url)[:80]
    what = "give the thread's or bug's address, e.g. https://www.postgresql.org/message-id/..."
    if len(url) > MAX_LENGTH:
        raise LinkError(f"--link {shown!r}...: longer than {MAX_LENGTH} characters; {what}")
    if visible(url) != url or any(c.isspace() for c in url):
        raise LinkError(f"--link {shown!r}: has whitespace or control characters; {what}")
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise LinkError(f"--link {shown!r}: not a URL ({e}); {what}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise LinkError(f"--link {shown!r}: not an http(s) URL with a host; {what}")
    return url
