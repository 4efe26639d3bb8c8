"""Settings: defaults, file and environment overrides, and errors that name the bad key."""

from __future__ import annotations

import pytest

from master.settings import SettingsError, describe, load_settings


def test_defaults_are_selective_and_local():
    s = load_settings(environ={})
    assert s.repository_url == "https://git.postgresql.org/git/postgresql.git"
    assert s.web_host == "127.0.0.1" and s.worker_host == "127.0.0.1"
    assert s.results_db.name == "results.sqlite" and s.results_db != s.master_dir / "state.sqlite"
    assert all(source == "default" for _, _, source in describe(s))


@pytest.mark.parametrize(
    "ref, watched",
    [
        ("refs/heads/master", True),
        ("refs/heads/REL_17_STABLE", True),
        ("refs/heads/REL_13_STABLE", True),
        ("refs/heads/REL_12_STABLE", False),
        ("refs/heads/REL9_6_STABLE", False),
        ("refs/heads/feature/x", False),
        ("refs/tags/REL_17_5", True),
        ("refs/tags/REL_18_BETA1", True),
        ("refs/tags/REL_18_RC1", True),
        ("refs/tags/REL9_6_24", False),
        ("refs/tags/REL_17_5-evil", False),
        ("refs/pull/1/head", False),
        ("HEAD", False),
    ],
)
def test_default_ref_filter(ref, watched):
    assert load_settings(environ={}).ref_matches(ref) is watched


def test_environment_overrides_file_overrides_default(tmp_path):
    cfg = tmp_path / "farm.toml"
    cfg.write_text('[master]\nweb_port = 8123\ndata_dir = "state"\n[recipes]\nenabled = ["fixture"]\n')
    s = load_settings(
        environ={
            "PERFFARM_CONFIG": str(cfg),
            "PERFFARM_MASTER_WEB_PORT": "8200",
            "PERFFARM_REPOSITORY_BRANCHES": "master, REL_18_STABLE",
        }
    )
    assert s.web_port == 8200
    assert s.data_dir == (tmp_path / "state").resolve()  # relative to the file that set it
    assert s.branches == ("master", "REL_18_STABLE")
    sources = {k: src for k, _, src in describe(s)}
    assert sources["master.web_port"] == "env PERFFARM_MASTER_WEB_PORT"
    assert sources["master.data_dir"] == str(cfg)


@pytest.mark.parametrize(
    "env, key",
    [
        ({"PERFFARM_MASTER_WEB_PORT": "eighty"}, "master.web_port"),
        ({"PERFFARM_MASTER_WEB_PORT": "70000"}, "master.web_port"),
        ({"PERFFARM_REPOSITORY_POLL_INTERVAL": "0"}, "repository.poll_interval"),
        ({"PERFFARM_REPOSITORY_BRANCHES": "master,REL_(["}, "repository.branches"),
        ({"PERFFARM_WORKERS_NAMES": "local,../etc"}, "workers.names"),
        ({"PERFFARM_WORKERS_RUN_LOCAL": "maybe"}, "workers.run_local"),
        ({"PERFFARM_MASTER_WEB_PROT": "1"}, "PERFFARM_MASTER_WEB_PROT"),
        ({"PERFFARM_WORKERS_HOSTS": "nobody=box1"}, "workers.hosts"),
        ({"PERFFARM_MASTER_WORKER_PORT": "8010"}, "master.worker_port"),
    ],
)
def test_invalid_settings_name_the_key(env, key):
    with pytest.raises(SettingsError) as e:
        load_settings(environ=env)
    assert str(e.value).startswith(key)


def test_unknown_key_in_file_is_named(tmp_path):
    cfg = tmp_path / "farm.toml"
    cfg.write_text("[master]\nweb_prot = 1\n")
    with pytest.raises(SettingsError, match=r"^master\.web_prot: unknown setting"):
        load_settings(environ={"PERFFARM_CONFIG": str(cfg)})


def test_broken_toml_names_the_file(tmp_path):
    cfg = tmp_path / "farm.toml"
    cfg.write_text("[master\n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(environ={"PERFFARM_CONFIG": str(cfg)})


def test_worker_hosts_share_a_measurement_lock_key():
    s = load_settings(environ={"PERFFARM_WORKERS_NAMES": "local,a,b", "PERFFARM_WORKERS_HOSTS": "a=box,b=box"})
    assert s.host_of("a") == s.host_of("b") == "box"
    assert s.host_of("local") == "local"


def test_site_defaults_overrides_and_port_clash(tmp_path):
    s = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "d")})
    assert s.site_out_dir is None and s.site_dir == (tmp_path / "d" / "site").resolve()
    assert s.site_port == 8011 and s.site_url == "http://127.0.0.1:8011/"
    assert s.alerts.site_url == s.site_url  # alert links point where `perffarm run` serves the site
    assert dict((k, v) for k, v, _ in describe(s))["site.out_dir"] == ""
    s = load_settings(environ={"PERFFARM_SITE_OUT_DIR": str(tmp_path / "www"), "PERFFARM_SITE_PORT": "8111"})
    assert s.site_dir == (tmp_path / "www").resolve() and s.site_url == "http://127.0.0.1:8111/"
    with pytest.raises(SettingsError, match=r"^site\.port: 8010 is already used"):
        load_settings(environ={"PERFFARM_SITE_PORT": "8010"})
    with pytest.raises(SettingsError, match=r"^site\.port"):
        load_settings(environ={"PERFFARM_SITE_PORT": "http"})


def test_queued_mode_and_recipe_options_from_the_environment():
    s = load_settings(
        environ={
            "PERFFARM_MASTER_QUEUED": "newest",
            "PERFFARM_RECIPES_ENABLED": "pg-quick,fixture",
            "PERFFARM_RECIPES_OPTIONS": "pg-quick:workloads=a,b  pg-quick:instruction_samples=3",
        }
    )
    assert s.queued == "newest"
    assert s.recipe_options == {"pg-quick": ("workloads=a,b", "instruction_samples=3")}
    assert (
        "recipes.options",
        ["pg-quick:workloads=a,b", "pg-quick:instruction_samples=3"],
        "env PERFFARM_RECIPES_OPTIONS",
    ) in describe(s)
    assert load_settings(environ={}).queued == "every" and load_settings(environ={}).recipe_options == {}


@pytest.mark.parametrize(
    "env, key",
    [
        ({"PERFFARM_MASTER_QUEUED": "oldest"}, "master.queued"),
        ({"PERFFARM_RECIPES_OPTIONS": "workloads=a"}, "recipes.options"),
        ({"PERFFARM_RECIPES_OPTIONS": "pg-quick:Bad Key=1"}, "recipes.options"),
        ({"PERFFARM_RECIPES_OPTIONS": "pg-full:samples=3"}, "recipes.options"),  # not an enabled recipe
    ],
)
def test_queued_and_options_errors_name_the_key(env, key):
    with pytest.raises(SettingsError, match=key.replace(".", r"\.")):
        load_settings(environ=env)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "perf.example.org"])
def test_a_web_ui_beyond_loopback_without_users_is_refused(host):
    with pytest.raises(SettingsError, match=r"master.web_host: .*no login.*web_users.*SSH tunnel"):
        load_settings(environ={"PERFFARM_MASTER_WEB_HOST": host})
    s = load_settings(
        environ={
            "PERFFARM_MASTER_WEB_HOST": host,
            "PERFFARM_MASTER_WEB_USERS": "alice,bob",
            "PERFFARM_MASTER_WEB_URL": "https://perf.example.org",
        }
    )
    assert s.web_exposed and s.web_users == ("alice", "bob") and s.web_url == "https://perf.example.org/"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_users(host):
    s = load_settings(environ={"PERFFARM_MASTER_WEB_HOST": host})
    assert not s.web_exposed and s.web_users == ()


@pytest.mark.parametrize("url", ["ftp://x/", "https://user:pw@x/", "x", "https://"])
def test_web_url_must_be_a_plain_http_url(url):
    with pytest.raises(SettingsError, match="master.web_url"):
        load_settings(environ={"PERFFARM_MASTER_WEB_URL": url})


def test_perffarm_run_refuses_a_web_user_without_a_password_secret(tmp_path, capsys):
    from master import launcher

    s = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path), "PERFFARM_MASTER_WEB_USERS": "alice"})
    assert launcher.run(s, check_repo=False) == 2
    err = capsys.readouterr().err
    assert "no password secret for web user(s) alice" in err and "web-user-NAME" in err
    assert not s.master_dir.exists(), "nothing may start before the secrets are there"


@pytest.mark.parametrize(
    "ref",
    [
        "refs/heads/-x1",
        "refs/heads/--upload-pack=touch",
        "refs/tags/-x",
        "refs/heads/a b",
        "refs/heads/a..b",
        "refs/heads/x.lock",
    ],
)
def test_a_ref_git_would_not_create_is_never_watched_even_by_a_wide_filter(ref):
    # one such ref in the repository made the poller's single `git fetch` fail on every poll (chaos suite)
    s = load_settings(environ={"PERFFARM_REPOSITORY_BRANCHES": ".*", "PERFFARM_REPOSITORY_TAGS": ".*"})
    assert not s.ref_matches(ref)
    assert s.ref_matches("refs/heads/<script>alert(1)</script>") and s.ref_matches("refs/heads/bidi-\u202e1")


def test_workers_about_names_each_workers_machine(tmp_path):
    """Issue #31: workers.about gives each worker's machine a name, an owner and a description; in the
    environment the entries are separated by ';' (descriptions hold commas)."""
    env = {
        "PERFFARM_MASTER_DATA_DIR": str(tmp_path),
        "PERFFARM_WORKERS_NAMES": "local,w2",
        "PERFFARM_WORKERS_ABOUT": "local=dandelion|Alice <a@x.org>|Xeon, 64 GiB; w2=tern",
    }
    s = load_settings(environ=env)
    assert dict(s.worker_about) == {"local": ("dandelion", "Alice <a@x.org>", "Xeon, 64 GiB"), "w2": ("tern", "", "")}
    assert s.alerts.machine_about == (
        ("local", "dandelion", "Alice <a@x.org>", "Xeon, 64 GiB"),
        ("w2", "tern", "", ""),
    )
    for bad, needle in (
        ("nobody=x", "not in workers.names"),
        ("local=bad name", "worker=NAME|OWNER|DESCRIPTION"),
        ("local=a; w2=a", "given twice"),
        ("local=a|b|c|d", "worker=NAME|OWNER|DESCRIPTION"),
    ):
        with pytest.raises(SettingsError, match="workers.about") as e:
            load_settings(environ={**env, "PERFFARM_WORKERS_ABOUT": bad})
        assert needle in str(e.value)


def test_perffarm_run_says_in_one_line_when_it_cannot_make_its_data_directory(tmp_path, capsys):
    # docs/operators.md: a service runs the farm as its own user, which may not own where master.data_dir points
    from master import launcher

    (tmp_path / "a-file").write_text("")
    s = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "a-file" / "var")})
    assert launcher.run(s, check_repo=False) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perffarm: master.data_dir {tmp_path / 'a-file' / 'var'}: ") and len(err.splitlines()) == 1
    assert "Traceback" not in err
