"""Make untrusted text (commit subjects, authors) inert in every channel: no markup, links or mentions.

Commit subjects and authors are written by anyone who can get a commit into the watched repository. Before
they reach a chat room, a mail client or a webhook consumer they lose everything that could act: control and
bidi-override characters, line breaks, angle brackets (HTML tags, Slack's `<!channel>`/`<@U1>`/`<url|text>`),
`@` mentions (`@here`, `@channel`, `@all`, `@user`) and, for chat, Markdown/mrkdwn punctuation. Replacements
are look-alike characters, so a human still reads the same words in every renderer (Slack does not honour
backslash escapes; Mattermost does; a look-alike works in both).
"""

from __future__ import annotations

import re
import unicodedata

ZWSP = "\u200b"
MAX_LEN = 200
_BIDI = dict.fromkeys(map(ord, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"))
_ANGLES = str.maketrans({"<": "\u2039", ">": "\u203a"})  # ‹ ›
# Markdown / mrkdwn punctuation that can format, link, quote or mention, and look-alikes that cannot.
_CHAT = str.maketrans(
    {
        "*": "\u2217",  # ∗
        "_": "\uff3f",  # ＿
        "~": "\u223c",  # ∼
        "`": "\u02cb",  # ˋ
        "[": "\uff3b",  # ［
        "]": "\uff3d",  # ］
        "|": "\u2502",  # │
        "#": "\uff03",  # ＃
        "!": "\uff01",  # ！ (Slack's <!here> and Markdown images)
        ":": "\ua789",  # ꞉ (no :emoji: codes, no auto-linked scheme:)
    }
)
_MENTION = re.compile(r"@(?=[^\s\u200b])")  # idempotent: an already-broken mention stays as it is


def plain(text: str | None, limit: int = MAX_LEN) -> str:
    """One line of inert text for any channel: no control/bidi characters, no tags, no working mentions."""
    if not text:
        return ""
    t = "".join(" " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch for ch in text.translate(_BIDI))
    t = "".join(ch for ch in t if unicodedata.category(ch) != "Cf" or ch == ZWSP)
    t = " ".join(t.split())
    t = t.translate(_ANGLES)
    t = _MENTION.sub("@" + ZWSP, t)
    if len(t) > limit:
        t = t[: limit - 1].rstrip() + "\u2026"
    return t


def inert(text: str | None, limit: int = MAX_LEN) -> str:
    """`plain` plus Markdown/mrkdwn punctuation replaced: safe wherever a consumer might render Markdown."""
    return plain(text, limit).translate(_CHAT)


def chat(text: str | None, limit: int = MAX_LEN) -> str:
    """`inert` plus Slack's required &-escaping, for Slack and Mattermost."""
    return inert(text, limit).replace("&", "&amp;")


def header(text: str | None, limit: int = 160) -> str:
    """Text safe for an email header: one line, inert, bounded."""
    return plain(text, limit)


def ident(text: str | None, limit: int = MAX_LEN) -> str:
    """Names the farm controls (workload, recipe, machine, branch): `plain`, with Slack's &-escaping safe to add."""
    return plain(text, limit)


def chat_ident(text: str | None, limit: int = MAX_LEN) -> str:
    """A farm-controlled name in a chat message: `plain` plus &-escaping, underscores kept readable."""
    return plain(text, limit).replace("&", "&amp;")
