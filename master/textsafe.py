"""Show untrusted text (commit subjects, authors, ref and workload names) so it cannot act on what displays it.

Whoever can push to the watched repository writes commit subjects and author names; ref names allow most of
Unicode. Printed raw, an ESC starts a terminal escape sequence (colours, cursor moves, window titles, OSC 8
links), BEL rings, CR overwrites the line; a bidi override (U+202E) reverses what a terminal or a web page shows
after it. `visible` writes each such character as a visible escape instead (`\\x1b`, `\\u202e`), so the reader
sees that it is there and nothing acts on it. Pure, stdlib only; used by every CLI verb and the history site
(where tab and newline stay: HTML and JSON cannot be steered by them).
"""

from __future__ import annotations

import re

# C0 controls (tab and newline too: every field is one line), DEL, C1 controls; every format (Cf) character,
# which includes bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), marks (U+200E/F, U+061C),
# zero-width characters and tag characters; line and paragraph separators; lone surrogates.
_FORMAT_CHARS = (
    "\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_UNSAFE = re.compile(f"[\x00-\x1f{_FORMAT_CHARS}]")
_UNSAFE_IN_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_FORMAT_CHARS}]")  # keeps tab and newline


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: object, lines: bool = False) -> str:
    """`text` (None as "") with every control, bidi and invisible format character shown as an escape; with
    `lines`, tab and newline are kept (multi-line text such as a build log on a web page)."""
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    pattern = _UNSAFE_IN_LINES if lines else _UNSAFE
    return pattern.sub(_escape, s) if pattern.search(s) else s


# A link shown to readers (a commit's `Discussion:` thread, the commit URL): https only, a plain host name, and no
# character that could end or re-target a link in a chat (`<url|text>`), a mail client or HTML (space, quotes,
# angle brackets, `|`, backslash, controls). PostgreSQL's threads are https://postgr.es/m/<message-id>.
_LINK = re.compile(r"^https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?/[A-Za-z0-9._~:/?#\[\]@!$&()*+,;=%-]*$")
MAX_LINK_LEN = 300


def safe_link(text: str | None) -> str | None:
    """`text` when it is an https link that cannot break out of where it is shown, else None."""
    if not text or len(text) > MAX_LINK_LEN or not _LINK.match(text):
        return None
    return text
