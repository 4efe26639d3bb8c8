"""scripts/debian_sources.py: deb-src lines derived from the machine's own apt sources, never a hard-coded host."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "debian_sources.py"
spec = importlib.util.spec_from_file_location("debian_sources", SCRIPT)
assert spec is not None and spec.loader is not None
ds = importlib.util.module_from_spec(spec)
sys.modules["debian_sources"] = ds
spec.loader.exec_module(ds)

DEB822 = """\
Types: deb
# a comment
URIs: http://mirror.example.test/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.test/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
THIRD_PARTY = """\
Types: deb
URIs: https://vendor.example.test/apt
Suites: nodistro
Components: main
Signed-By: /usr/share/keyrings/vendor.gpg
"""


def etc(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "etc-apt"
    (root / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_the_archive_of_the_machines_debian_entries_gives_the_deb_src_lines(tmp_path):
    root = etc(tmp_path, {"sources.list.d/a-vendor.sources": THIRD_PARTY, "sources.list.d/debian.sources": DEB822})
    lines = ds.source_lines(ds.machine_entries(root), ["bullseye", "sid"])
    assert lines == [
        "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example.test/debian "
        "bullseye main",
        "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example.test/debian sid main",
    ]


def test_one_line_sources_and_files_apt_ignores(tmp_path):
    root = etc(
        tmp_path,
        {
            "sources.list": "# deb http://old.example.test/debian buster main\n"
            "deb http://security.example.test/debian-security bookworm-security main\n"
            "deb [arch=amd64] http://one.example.test/debian bookworm main contrib\n",
            "sources.list.d/off.sources.disabled": DEB822,  # apt reads only *.list and *.sources
        },
    )
    assert ds.source_lines(ds.machine_entries(root), ["trixie"]) == [
        "deb-src http://one.example.test/debian trixie main"
    ]


def test_no_debian_entry_says_what_to_configure(tmp_path):
    root = etc(tmp_path, {"sources.list.d/vendor.sources": THIRD_PARTY, "sources.list.d/off.sources": "Enabled: no\n"})
    with pytest.raises(LookupError, match="configure apt for a Debian archive"):
        ds.source_lines(ds.machine_entries(root), ["sid"])


def test_the_command_writes_a_private_configuration_and_prints_apt_options(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "apt"), "bookworm"], capture_output=True, text=True
    )
    if out.returncode == 2 and "no enabled Debian" in out.stderr:
        pytest.skip("this machine has no Debian apt entry")  # the parsing tests above still ran
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:2] == [
        f"-oDir::Etc::SourceList={tmp_path / 'apt' / 'sources.list'}",
        "-oDir::Etc::SourceParts=/dev/null",
    ]
    assert (tmp_path / "apt" / "sources.list").read_text().startswith("deb-src ")
    bad = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "x"), "../etc"], capture_output=True, text=True)
    assert bad.returncode == 2 and "is not a suite name" in bad.stderr
