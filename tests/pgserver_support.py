"""A throwaway PostgreSQL server from the Debian package, for Buildbot's database in tests and benchmarks.

The binaries come from `postgresql` (scripts/apt-packages-buildbot-db.txt, installed by `make setup`): nothing is
installed at test time. The cluster lives in a temp dir, listens on 127.0.0.1 on a free port and on a Unix socket
in its own directory (never /var/run/postgresql). initdb refuses to run as root, so as root the server runs as the
package's `postgres` user. Local socket connections are trusted (the superuser sets up roles); TCP connections,
which the farm uses, need a password (scram-sha-256).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness import free_port

SERVER_USER = "postgres"  # the Debian package's system user


def find_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<major>/bin with initdb, or None when the package is not installed."""
    candidates = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return candidates[-1] if candidates else None


@dataclass
class PgServer:
    """One PostgreSQL cluster; `start()` it, `stop()` removes it."""

    bindir: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="perffarm-pg-")))
    port: int = field(default_factory=free_port)

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    def _as_server_user(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", SERVER_USER, "--", *argv] if os.geteuid() == 0 else argv

    def _run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self._as_server_user(argv), check=True, capture_output=True, text=True, **kwargs)

    def start(self) -> PgServer:
        self.socket_dir.mkdir(parents=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam(SERVER_USER)
            for path in (self.root, self.socket_dir):
                os.chown(path, pw.pw_uid, pw.pw_gid)
        self._run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-instructions",
            ]
        )
        return self.resume()

    def resume(self) -> PgServer:
        """Start the server (again, after `pause`)."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.socket_dir}"
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-l",
                str(self.root / "server.log"),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        return self

    def pause(self) -> None:
        """Stop the server (fast shutdown: open connections are terminated), keeping the cluster."""
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"])

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete the cluster."""
        if (self.datadir / "postmaster.pid").exists():
            subprocess.run(
                self._as_server_user(
                    [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"]
                ),
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def psql(self, sql: str, database: str = "postgres", **variables: str) -> str:
        """Run `sql` as the superuser over the socket; `variables` are psql variables (`:'name'` quotes one as a
        literal, `:"name"` as an identifier), so values are never spliced into SQL text."""
        argv = [
            str(self.bindir / "psql"),
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.socket_dir),
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            database,
        ]
        for name, value in variables.items():
            argv += ["-v", f"{name}={value}"]
        return subprocess.run(argv, input=sql, check=True, capture_output=True, text=True).stdout.strip()

    def create_role_and_database(self, role: str, password: str, database: str) -> None:
        """A login role with `password` that owns a new `database` (Buildbot creates its tables in it)."""
        self.psql("CREATE ROLE :\"role\" LOGIN PASSWORD :'password';", role=role, password=password)
        self.psql('CREATE DATABASE :"db" OWNER :"role";', role=role, db=database)

    def url(self, role: str, database: str) -> str:
        """The farm's master.buildbot_db_url for `role` (no password: that is a secret)."""
        return f"postgresql://{role}@127.0.0.1:{self.port}/{database}"
