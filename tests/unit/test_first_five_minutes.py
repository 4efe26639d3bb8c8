"""A newcomer's first five minutes (issue #31, part 6): the README leads with what you will see and what you need,
`make run` says how to measure the head now, and the project has a license, a changelog and a version."""

from __future__ import annotations

import tomllib
from pathlib import Path

from master import launcher
from master.settings import load_settings

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_readme_leads_with_what_you_will_see_then_what_you_need() -> None:
    readme = (ROOT / "README.md").read_text()
    heads = [line for line in readme.splitlines() if line.startswith("## ")]
    assert heads[:3] == ["## What you will see, and where", "## Requirements", "## The first five minutes"], heads
    seen = readme.index("## What you will see")
    assert "history site" in readme[seen : readme.index("## Requirements")].lower()
    needs = readme[readme.index("## Requirements") : readme.index("## The first five minutes")]
    assert "Debian" in needs and "Python 3.11" in needs
    first = readme[readme.index("## The first five minutes") : readme.index("## What is where")]
    assert "make test" in first and "CPU-minutes" in first and "Measure a commit" in first


def test_make_run_says_how_to_measure_the_head_now(tmp_path: Path) -> None:
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path), "PERFFARM_REPOSITORY_URL": "/srv/postgres.git"}
    )
    text = launcher.banner(settings, tmp_path / "master")
    assert "first poll only records the refs" in text
    assert f"{settings.web_url}#/builders" in text and f"{settings.recipes[0]}@local" in text
    assert '"Measure a commit"' in text and "git ls-remote /srv/postgres.git refs/heads/master" in text


def test_license_changelog_and_version_agree() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "PostgreSQL"}
    assert (ROOT / "LICENSE").read_text().startswith("PostgreSQL License")
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {project['version']}" in changelog and "## Unreleased" in changelog
