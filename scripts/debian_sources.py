#!/usr/bin/env python3
"""Private apt configuration for Debian source packages, derived from this machine's own apt sources.

    scripts/debian_sources.py DIR SUITE [SUITE ...]

writes DIR/sources.list with one `deb-src` line per SUITE (e.g. bullseye bookworm trixie sid) for the archive
this machine's enabled Debian `deb` entries use (their URI and signing key; a mirror or proxy configured here is
used as is), and prints, one per line, the apt-get options that make apt read only that file and keep its lists
and cache under DIR:

    mapfile -t opts < <(scripts/debian_sources.py DIR bookworm); apt-get "${opts[@]}" update

No root, nothing written to /etc, and no host name is hard-coded: the URI comes from /etc/apt.

Which entries count as Debian: `deb` entries (one-line `.list` or deb822 `.sources` files that apt reads)
signed by Debian's archive keyring, or whose suite is a Debian codename, and whose suite is a release (not
`-security`, `-updates` or `-backports`: those archives carry only some packages). Exit 2 with a message that
says what to configure when there is none.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

DEBIAN_KEYRING = "debian-archive-keyring"
CODENAMES = {"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid", "stable", "testing", "unstable"}
POCKET = re.compile(r"-(security|updates|backports|proposed-updates)$")
SUITE = re.compile(r"^[a-z][a-z0-9.-]{0,40}$")


@dataclass(frozen=True)
class Entry:
    """One `deb` or `deb-src` source apt reads: its URI, suites and signing key (may be empty)."""

    types: tuple[str, ...]
    uri: str
    suites: tuple[str, ...]
    signed_by: str

    def is_debian_release(self) -> bool:
        if "deb" not in self.types or not self.uri.startswith(("http://", "https://", "file:/")):
            return False
        releases = [s for s in self.suites if not POCKET.search(s)]
        if not releases:
            return False
        return DEBIAN_KEYRING in self.signed_by or any(s in CODENAMES for s in releases)


def parse_one_line(text: str) -> list[Entry]:
    """Entries of a one-line-style file (sources.list, *.list)."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^(deb|deb-src)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)", line)
        if not m:
            continue
        options = dict(o.split("=", 1) for o in (m.group(2) or "").split() if "=" in o)
        out.append(Entry((m.group(1),), m.group(3), (m.group(4),), options.get("signed-by", "")))
    return out


def parse_deb822(text: str) -> list[Entry]:
    """Entries of a deb822 file (*.sources): stanzas separated by blank lines."""
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        last = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and last:
                fields[last] += " " + line.strip()
                continue
            key, sep, value = line.partition(":")
            if sep:
                last = key.strip().lower()
                fields[last] = value.strip()
        if fields.get("enabled", "yes").lower() == "no" or "uris" not in fields:
            continue
        for uri in fields["uris"].split():
            out.append(
                Entry(
                    tuple(fields.get("types", "").split()),
                    uri,
                    tuple(fields.get("suites", "").split()),
                    fields.get("signed-by", ""),
                )
            )
    return out


def machine_entries(etc: Path = Path("/etc/apt")) -> list[Entry]:
    """Every source apt reads on this machine (files apt ignores, like *.disabled, are skipped as apt does)."""
    entries = []
    main = etc / "sources.list"
    if main.is_file():
        entries += parse_one_line(main.read_text(errors="replace"))
    parts = etc / "sources.list.d"
    if parts.is_dir():
        for f in sorted(parts.iterdir()):
            if f.suffix == ".list":
                entries += parse_one_line(f.read_text(errors="replace"))
            elif f.suffix == ".sources":
                entries += parse_deb822(f.read_text(errors="replace"))
    return entries


def source_lines(entries: list[Entry], suites: list[str]) -> list[str]:
    """`deb-src` lines for `suites` on the archive of the first Debian release entry (its URI and key)."""
    debian = [e for e in entries if e.is_debian_release()]
    if not debian:
        raise LookupError(
            "no enabled Debian `deb` entry in /etc/apt/sources.list or /etc/apt/sources.list.d/ (a release suite "
            "such as bookworm, signed by the Debian archive keyring): configure apt for a Debian archive or "
            "mirror first; this script takes the archive from there"
        )
    e = debian[0]
    signed = f"[signed-by={e.signed_by}] " if e.signed_by and "\n" not in e.signed_by and " " not in e.signed_by else ""
    return [f"deb-src {signed}{e.uri} {suite} main" for suite in suites]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = Path(argv[0]).resolve()
    bad = [s for s in argv[1:] if not SUITE.match(s)]
    if bad:
        print(f"debian_sources: {bad[0]!r} is not a suite name (e.g. bookworm)", file=sys.stderr)
        return 2
    try:
        lines = source_lines(machine_entries(), argv[1:])
    except LookupError as e:
        print(f"debian_sources: {e}", file=sys.stderr)
        return 2
    for sub in ("lists/partial", "cache/archives/partial"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "sources.list").write_text("\n".join(lines) + "\n")
    options = [
        f"-oDir::Etc::SourceList={root / 'sources.list'}",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={root / 'lists'}",
        f"-oDir::Cache={root / 'cache'}",
        "-oDebug::NoLocking=1",
    ]
    if os.geteuid() == 0:  # root's private cache is not readable by apt's sandbox user: download as root, quietly
        options.append("-oAPT::Sandbox::User=root")
    print("\n".join(options))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
