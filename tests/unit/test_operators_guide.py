"""The operator's guide (docs/operators.md) and its systemd units say only what the code does (issue #31, part
4): every setting it sets exists, every helper option it uses exists, and the units run the farm's commands."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
