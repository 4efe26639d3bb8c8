"""Repository URLs without their secrets: one place that decides what of a URL may be shown.

A git URL can carry credentials: `https://user:token@host/repo.git`, a token as the user name
(`https://TOKEN@host/…`), or a token in the query string (`?private_token=…`). The farm never keeps such a URL
(settings refuse it, see `credentials_problem`; credentials come from a Buildbot secret, docs/security.md), but
anything it shows that may hold a URL — settings, banners, build logs, git's error texts, rejection reasons —
passes through `redact_url` / `redact_text` as belt and braces. Pure: no I/O, no Buildbot.
"""

from __future__ import annotations

import re

MASK = "***"
# Schemes that authenticate with a key, where the user name (git@…) is no secret.
SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git")
# A URL inside free text: scheme://, then up to whitespace, a quote or an angle bracket.
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]*")


def _split(url: str) -> tuple[str, str | None, str, str | None, str] | None:
    """(scheme, user info, host and path, query, fragment) of a scheme:// URL, else None; user info and query
    are None when absent. The user info ends at the *last* '@' before the query, so a password holding '/' or
    '@' is still taken as user info (masking part of a path that holds '@' is the safe mistake)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return None
    rest, _, fragment = rest.partition("#")
    head, qmark, query = rest.partition("?")
    userinfo, at, tail = head.rpartition("@")
    if not at or scheme.lower() == "file":  # file:///srv/a@b/pg.git: a path, no authority
        return scheme, None, head, query if qmark else None, fragment
    return scheme, userinfo, tail, query if qmark else None, fragment


def redact_url(url: str) -> str:
    """`url` with its secrets masked: the password (`user:***@`), a user name that may be a token (`***@`, not
    for ssh), every query value (`?token=***`). Local paths and scp-like `git@host:path` come back unchanged."""
    parts = _split(url)
    if parts is None:
        return url
    scheme, userinfo, tail, query, fragment = parts
    out = f"{scheme}://"
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        if colon:
            out += f"{user}:{MASK}@"
        elif user and scheme.lower() in SSH_SCHEMES:
            out += f"{user}@"
        else:
            out += f"{MASK}@"
    out += tail
    if query is not None:
        pairs = (p.partition("=") for p in query.split("&"))
        out += "?" + "&".join(f"{k}={MASK}" if eq else MASK for k, eq, _ in pairs)
    if fragment:
        out += "#" + fragment
    return out


def redact_text(text: str) -> str:
    """`text` (a log line, git's stderr, an exception's message) with every scheme:// URL in it redacted."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


def credentials_problem(url: str) -> str | None:
    """Why `url` must not be a setting because it holds credentials (None: it holds none).

    Refused: any user info in a non-ssh URL (a user name alone may be a token: GitHub accepts
    `https://TOKEN@github.com/…`), a password in an ssh URL, and a query string (git hosts need none; it is
    where tokens go). A user name in an ssh URL (`ssh://git@host/…`, `git@host:path`) is fine: ssh
    authenticates with a key.
    """
    parts = _split(url)
    if parts is None:
        return None
    scheme, userinfo, _, query, _ = parts
    if query is not None:
        return "it has a query string, which may hold a token"
    if userinfo is None:
        return None
    if scheme.lower() in SSH_SCHEMES:
        return "it holds a password" if ":" in userinfo else None
    return "it holds credentials (user:password@ or a token as the user name)"
