"""`perffarm alerts set-state ID STATE --link URL`: where an alert is tracked (a thread, a bug), checked, kept, shown
by `alerts show`, on the alert's page and in the Atom feed; a link that is not an http(s) URL is refused with one
line and nothing changes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from master import store
from master.cli import main
from master.publish import publish_all
from tests.site_support import settings_for
from tests.unit.test_alerts_cli import make

THREAD = "https://www.postgresql.org/message-id/CA+abc@mail.gmail.com"
BUG = 'https://bugs.example.org/show?id=42&x="><script>alert(1)</script>'  # valid, hostile: escaped wherever shown
ATOM = "{http://www.w3.org/2005/Atom}"


def test_links_are_kept_shown_and_published(tmp_path: Path, capsys) -> None:
    farm, aid = make(tmp_path / "data")
    db = ["--db", str(farm.path)]
    assert main(["alerts", "set-state", aid, "investigating", "--link", THREAD, "--link", BUG, *db]) == 0
    assert capsys.readouterr().out.strip() == f"{aid}: new -> investigating; link {THREAD}; link {BUG}"
    assert main(["alerts", "ack", aid, "--link", THREAD, *db]) == 0  # the same link again: kept once
    capsys.readouterr()
    assert main(["alerts", "show", aid, "--format", "json", *db]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [k["url"] for k in doc["links"]] == [THREAD, BUG] and doc["links"][0]["added_by"]
    assert main(["alerts", "show", aid, *db]) == 0
    assert f"link      {THREAD} (by " in capsys.readouterr().out

    settings = settings_for(tmp_path / "data", tmp_path / "no-repo")
    assert settings.results_db == farm.path
    publish_all(settings, tmp_path / "www", now=1_800_000_000.0)
    page = next((tmp_path / "www/alerts").glob("alert-*.html")).read_text()
    assert f'<a href="{THREAD}" rel="nofollow noopener noreferrer">' in page
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    feed = ET.parse(tmp_path / "www/alerts.atom").getroot()  # well-formed, the hostile URL escaped
    (entry,) = feed.findall(f"{ATOM}entry")
    related = [e.get("href") for e in entry.findall(f"{ATOM}link") if e.get("rel") == "related"]
    assert related == [THREAD, BUG]


@pytest.mark.parametrize(
    ("link", "why"),
    [
        ("javascript:alert(1)", "not an http(s) URL with a host"),
        ("/threads/42", "not an http(s) URL with a host"),
        ("https:///no-host", "not an http(s) URL with a host"),
        ("https://example.org/a b", "whitespace or control characters"),
        ("https://example.org/\u202eevil", "whitespace or control characters"),
        ("https://example.org/" + "a" * 2000, "longer than 2000 characters"),
    ],
)
def test_a_bad_link_is_refused_and_nothing_changes(tmp_path: Path, capsys, link: str, why: str) -> None:
    farm, aid = make(tmp_path)
    db = ["--db", str(farm.path)]
    assert main(["alerts", "set-state", aid, "investigating", "--link", THREAD, "--link", link, *db]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and why in err and "Traceback" not in err
    assert err.startswith("perffarm alerts: --link ") and "https://" in err.split(";", 1)[1]
    assert "\u202e" not in err
    conn = store.connect(farm.path)
    try:
        assert store.alerts.alert(conn, aid).state == "new" and store.alerts.links(conn) == {}
    finally:
        conn.close()
