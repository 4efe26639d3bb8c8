"""The operator's guide (docs/operators.md) and its systemd units say only what the code does (issue #31, part
4): every setting it sets exists, every helper option it uses exists, and the units run the farm's commands."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests import guide_support

ROOT = Path(__file__).resolve().parent.parent.parent
GUIDE = (ROOT / "docs" / "operators.md").read_text()
UNITS = ROOT / "scripts" / "systemd"


def test_the_settings_in_the_guide_are_settings() -> None:
    block = GUIDE[GUIDE.index("```toml") + len("```toml") : GUIDE.index("```", GUIDE.index("```toml") + 7)]
    mine = tomllib.loads(block)
    defaults = tomllib.loads((ROOT / "perffarm.toml").read_text())
    for section, keys in mine.items():
        for key in keys:
            assert key in defaults[section], f"the guide sets {section}.{key}, which perffarm.toml does not know"
    assert mine["master"]["worker_host"] != defaults["master"]["worker_host"] == "127.0.0.1"


def test_the_helper_options_in_the_guide_exist() -> None:
    text = (ROOT / "workers" / "create_worker.py").read_text()
    call = GUIDE[GUIDE.index("workers/create_worker.py bench1") :].split("```")[0]
    used = set(re.findall(r"(--[a-z][a-z-]*)", call))
    assert used == {"--master", "--basedir"}
    for option in used:
        assert f'p.add_argument(\n        "{option}"' in text or f'p.add_argument("{option}"' in text, option


def test_the_units_run_the_farm_and_the_worker_in_the_foreground() -> None:
    master = (UNITS / "perffarm-master.service").read_text()
    worker = (UNITS / "perffarm-worker@.service").read_text()
    assert "ExecStart=/srv/perffarm/checkout/.venv/bin/perffarm run" in master and "User=perffarm" in master
    assert "buildbot-worker start --nodaemon /srv/perffarm/workers/%i" in worker and "User=perffarm" in worker
    for unit in (master, worker):
        assert "Restart=on-failure" in unit and "WantedBy=multi-user.target" in unit
    for name in ("perffarm-master.service", "perffarm-worker@.service"):
        assert f"scripts/systemd/{name}" in GUIDE


# The integration test follows the guide's marked blocks (tests/guide_support.py): these hold its reading of them.


def test_every_block_a_reader_runs_is_marked_for_the_test() -> None:
    assert guide_support.unmarked_fences(GUIDE) == []
    sample = "1.\n   <!-- guide: master -->\n   ```sh\n   ls\n   ```\n\n```sh\nrm x\n```\n"
    assert guide_support.unmarked_fences(sample) == [7]  # the second block: a reader runs it, the test would not
    assert [(b.host, b.text, b.line) for b in guide_support.blocks(sample)] == [("master", "ls", 2)]
    hosts = {b.host for b in guide_support.blocks(GUIDE)}
    assert hosts == {"master", "bench1"}
    assert guide_support.blocks(GUIDE)[0].host == "master"


def test_every_substitution_the_test_makes_is_of_a_command_the_guide_has() -> None:
    # a substitution that matches nothing is stale; a command the guide gains that needs one shows in the
    # integration test (it runs everything else as written)
    used = {
        guide_support.substitution_for(c)
        for b in guide_support.blocks(GUIDE)
        if b.kind == "sh"
        for c in guide_support.commands(b.text)
    }
    assert {key for key, _ in guide_support.SUBSTITUTIONS} <= used
    files = [b for b in guide_support.blocks(GUIDE) if b.kind == "file"]
    for old, _, _ in guide_support.FILE_SUBSTITUTIONS:
        assert sum(b.text.count(old) for b in files) == 1, old


def test_commands_are_split_as_the_shell_runs_them() -> None:
    text = "cd /a && make setup\n# a comment\nPATH=/v/bin:$PATH python3 x.py n \\\n    --master m:1\n"
    assert guide_support.commands(text) == ["cd /a", "make setup", "PATH=/v/bin:$PATH python3 x.py n  --master m:1"]
    assert guide_support.substitution_for("/srv/perffarm/venv/bin/pip install 'buildbot-worker==4.3.*'") == (
        "pip install"
    )
    assert guide_support.substitution_for("chown -R perffarm: /srv/perffarm") == "perffarm:"
    assert guide_support.substitution_for("rm worker-bench1") is None


def test_units_parse_as_systemd_reads_them() -> None:
    unit = guide_support.parse_unit(
        "perffarm-worker@bench1.service", (UNITS / "perffarm-worker@.service").read_text(), "bench1"
    )
    assert unit.get("Service", "ExecStart") == (
        "/srv/perffarm/venv/bin/buildbot-worker start --nodaemon /srv/perffarm/workers/bench1"
    )
    assert unit.get("Service", "WorkingDirectory") == "/srv/perffarm/workers/bench1"
    master = guide_support.parse_unit("m.service", (UNITS / "perffarm-master.service").read_text())
    assert master.all("Service", "Environment") == ["PERFFARM_CONFIG=/srv/perffarm/perffarm.toml"]
    with pytest.raises(ValueError, match="specifier"):
        guide_support.parse_unit("x.service", "[Service]\nExecStart=/bin/true %h\n")
