"""From a pushed regression to one webhook message, through a real master: detect, alert, deliver.

The regression is in the fixture program's printed throughput (`loop`/`throughput`: a value the commit sets, with
0.5% synthetic noise), so what the test judges does not depend on the machine's load. The recipe also records each
run's wall time (`loop`/`wall`), a real clock reading: under heavy outside load it moves, and detection may rightly
report that too, so the test counts the alerts and change points of the throughput series, not of every series.
"""

from __future__ import annotations

import pytest

from tests.alerts_support import HttpReceiver
from tests.harness import Farm, make_repo, wait_until
from tests.integration.test_bisection import NOISY_C

pytestmark = pytest.mark.integration


def test_a_pushed_regression_is_alerted_once_with_its_commit(tmp_path):
    receiver = HttpReceiver().start()
    repo = make_repo(tmp_path / "repo")
    config = tmp_path / "farm.toml"
    config.write_text(
        "[alerts]\nsettle_seconds = 0\npoll_interval = 1\n"
        '[[alerts.channels]]\nname = "hook"\nkind = "webhook"\nurl_secret = "alerts-hook-url"\n'
        'kinds = ["regression", "improvement"]\n'
    )
    farm = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_CONFIG": str(config)})
    secret = farm.settings.secrets_dir / "alerts-hook-url"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text(receiver.url)
    secret.chmod(0o600)
    farm.start()
    try:
        for i in range(12):
            repo.commit(f"fast {i}", {"perffarm_bench.c": f"/* {i} */\n" + NOISY_C.format(i=i, value=1000, cv=0.005)})
        culprit = repo.commit(
            "make it slower <!channel> <script>x</script>",
            {"perffarm_bench.c": NOISY_C.format(i=12, value=900, cv=0.005)},
        )
        for i in range(13, 24):
            repo.commit(f"slow {i}", {"perffarm_bench.c": f"/* {i} */\n" + NOISY_C.format(i=i, value=900, cv=0.005)})
        farm.wait_for_runs(24, timeout=300)

        def opened() -> list:
            return [
                r
                for r in receiver.processed.values()
                if r.json.get("event") == "opened"
                and any(line["metric"] == "throughput" for line in r.json["alert"]["lines"])
            ]

        wait_until(opened, 60, "the webhook message")
        farm.api("masters")  # one more pass of everything
        wait_until(
            lambda: farm.query("SELECT COUNT(*) FROM alert_outbox WHERE state = 'pending'")[0][0] == 0,
            60,
            "the outbox to drain",
        )
        assert len(opened()) == 1, [r.json for r in receiver.requests]
        body = opened()[0].body.decode()
        assert culprit in body  # the change point's first slow commit, all commits were measured
        assert "<!channel>" not in body and "<script>" not in body
        assert receiver.duplicates() == 0
        throughput = "SELECT c.kind FROM change_points c JOIN series s ON s.id = c.series_id WHERE s.metric = ?"
        assert farm.query(throughput, ("throughput",)) == [("regression",)]
        assert receiver.url.split("/")[-1] not in farm.master_log()  # the secret never reaches the log
    finally:
        farm.stop()
        receiver.stop()
