"""Shared helpers for the alerts tests and benchmark: a results DB with change points, real local receivers.

The receivers are real servers on 127.0.0.1: an HTTP receiver (http.server in a thread) that records every
request and counts deliveries per Idempotency-Key, and a minimal SMTP sink (socketserver) that speaks enough
SMTP for smtplib (EHLO/HELO, AUTH PLAIN, MAIL, RCPT, DATA, RSET, NOOP, QUIT).
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import socketserver
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from master import store

HOSTILE_SUBJECT = (
    "<!channel> @here *FREE* [click](http://evil.example/x) <script>alert(1)</script> `rm -rf` "
    "\u202egnp.exe\r\nBcc: victim@example.com"
)
HOSTILE_AUTHOR = "Mallory <@U024BE7LH> <mallory@example.com>"


def sha_of(i: int, salt: str = "") -> str:
    return hashlib.sha1(f"{salt}commit-{i}".encode()).hexdigest()


class Farm:
    """A results DB with one branch of commits, series and change points, written as analysis would."""

    def __init__(self, path: Path, branch: str = "master", n_commits: int = 50, salt: str = "") -> None:
        self.path = path
        self.conn = store.connect(path)
        self.branch = branch
        self.shas = [sha_of(i, salt) for i in range(n_commits)]
        commits = [
            store.CommitInfo(
                s,
                f"commit number {i}",
                "Alice Example <alice@example.com>",
                1_700_000_000 + i,
                1_700_000_000 + i,
                (self.shas[i - 1],) if i else (),
            )
            for i, s in enumerate(self.shas)
        ]
        with store.transaction(self.conn):
            self.conn.execute("INSERT OR IGNORE INTO machines (id, fingerprint, first_seen) VALUES ('m-1', '{}', 0)")
            self.conn.execute("INSERT OR IGNORE INTO machines (id, fingerprint, first_seen) VALUES ('m-2', '{}', 0)")
            store.append_branch(self.conn, branch, commits, 0)

    def set_subject(self, i: int, subject: str, author: str | None = None) -> None:
        self.conn.execute(
            "UPDATE commits SET subject = ?, author = COALESCE(?, author) WHERE sha = ?",
            (subject, author, self.shas[i]),
        )

    def series(self, workload: str, machine: str = "m-1", direction: str = "higher", metric: str = "tps") -> int:
        self.conn.execute(
            "INSERT OR IGNORE INTO series (machine_id, recipe, recipe_version, config_hash, workload, metric, branch, "
            "unit, direction) VALUES (?, 'pg_quick', 1, 'cfg1', ?, ?, ?, 'tps', ?)",
            (machine, workload, metric, self.branch, direction),
        )
        return self.conn.execute(
            "SELECT id FROM series WHERE machine_id = ? AND workload = ? AND metric = ? AND branch = ?",
            (machine, workload, metric, self.branch),
        ).fetchone()[0]

    def change_point(
        self,
        series_id: int,
        pos: int,
        ratio: float,
        *,
        prev: int | None = None,
        pvalue: float = 1e-6,
        ci: tuple[float, float] | None = None,
        kind: str | None = None,
        first: int | None = None,
        now: float = 1000.0,
    ) -> int:
        """Insert or move (same identity commit) a change point at branch position `pos`."""
        prev = pos - 1 if prev is None else prev
        direction = self.conn.execute("SELECT direction FROM series WHERE id = ?", (series_id,)).fetchone()[0]
        if kind is None:
            worse = ratio < 1 if direction == "higher" else ratio > 1
            kind = "regression" if worse else "improvement"
        if ci is None:
            ci = (ratio * 0.99, ratio * 1.01)
        first_sha = self.shas[first if first is not None else pos]
        return self.conn.execute(
            "INSERT INTO change_points (series_id, first_sha, sha, prev_sha, position, prev_position, kind, ratio, "
            "ci_low, ci_high, pvalue, first_seen, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(series_id, first_sha) DO UPDATE SET sha = excluded.sha, prev_sha = excluded.prev_sha, "
            "position = excluded.position, prev_position = excluded.prev_position, ratio = excluded.ratio, "
            "ci_low = excluded.ci_low, ci_high = excluded.ci_high, pvalue = excluded.pvalue, "
            "updated_at = excluded.updated_at RETURNING id",
            (
                series_id,
                first_sha,
                self.shas[pos],
                self.shas[prev] if prev >= 0 else None,
                pos,
                prev if prev >= 0 else None,
                kind,
                ratio,
                ci[0],
                ci[1],
                pvalue,
                now,
                now,
            ),
        ).fetchone()[0]

    def retract(self, cp_id: int) -> None:
        self.conn.execute("UPDATE change_points SET state = 'retracted' WHERE id = ?", (cp_id,))

    def outbox(self) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM alert_outbox ORDER BY id").fetchall()


# ----------------------------------------------------------------------------------------------- receivers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    method: str = "POST"

    @property
    def json(self) -> dict:
        return json.loads(self.body)

    @property
    def key(self) -> str | None:
        return self.headers.get("Idempotency-Key")


@dataclass
class HttpReceiver:
    """A webhook receiver on 127.0.0.1 that honours Idempotency-Key: a repeated key is acknowledged, not processed."""

    port: int = 0
    status: int = 200
    delay: float = 0.0  # seconds between reading the request and answering (to kill a sender mid-send)
    location: str | None = None  # sent as the Location header (with a 3xx status: a redirect)
    requests: list[Received] = field(default_factory=list)
    processed: dict[str, Received] = field(default_factory=dict)
    got_request: threading.Event = field(default_factory=threading.Event)

    def start(self) -> HttpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                rec = Received(self.path, {k: v for k, v in self.headers.items()}, body, self.command)
                receiver.requests.append(rec)
                if rec.key and rec.key not in receiver.processed and receiver.status < 300:
                    receiver.processed[rec.key] = rec
                receiver.got_request.set()
                if receiver.delay:
                    time.sleep(receiver.delay)
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_GET = do_PUT = do_POST  # noqa: N815 - a followed redirect may arrive as any method

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address) -> None:  # a sender killed mid-request: expected
                pass

        self.server = Server(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook/T000/SECRETPATH"

    def duplicates(self) -> int:
        """Requests beyond the first per key (what a receiver ignoring the key would show twice)."""
        return len([r for r in self.requests if r.key]) - len({r.key for r in self.requests if r.key})


@dataclass
class Mail:
    mail_from: str
    rcpt: list[str]
    data: bytes

    @property
    def message(self):
        return message_from_bytes(self.data, policy=policy.default)


class SmtpSink:
    """A tiny SMTP server on 127.0.0.1 that stores every message; AUTH PLAIN checked against `password`."""

    def __init__(self, password: str | None = None) -> None:
        self.password = password
        self.mails: list[Mail] = []
        self.auth_failures = 0

    def start(self) -> SmtpSink:
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, text: str) -> None:
                self.wfile.write((text + "\r\n").encode())

            def handle(self) -> None:
                self.reply("220 sink ESMTP")
                mail_from, rcpt = "", []
                while True:
                    line = self.rfile.readline()
                    if not line:
                        return
                    cmd = line.decode("utf-8", "replace").strip()
                    verb = cmd.split(" ", 1)[0].upper()
                    if verb == "EHLO":
                        self.wfile.write(b"250-sink\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n")
                    elif verb == "HELO":
                        self.reply("250 sink")
                    elif verb == "AUTH":
                        parts = cmd.split()
                        token = base64.b64decode(parts[2]).split(b"\0") if len(parts) > 2 else []
                        if sink.password is not None and len(token) == 3 and token[2].decode() == sink.password:
                            self.reply("235 ok")
                        else:
                            sink.auth_failures += 1
                            self.reply("535 authentication failed")
                    elif verb == "MAIL":
                        mail_from, rcpt = cmd[10:].strip("<> "), []
                        self.reply("250 ok")
                    elif verb == "RCPT":
                        rcpt.append(cmd[8:].strip("<> "))
                        self.reply("250 ok")
                    elif verb == "DATA":
                        self.reply("354 go ahead")
                        data = []
                        while True:
                            chunk = self.rfile.readline()
                            if chunk in (b".\r\n", b".\n", b""):
                                break
                            data.append(chunk[1:] if chunk.startswith(b"..") else chunk)
                        sink.mails.append(Mail(mail_from, rcpt, b"".join(data)))
                        self.reply("250 queued")
                    elif verb in ("RSET", "NOOP"):
                        self.reply("250 ok")
                    elif verb == "QUIT":
                        self.reply("221 bye")
                        return
                    else:
                        self.reply("502 not implemented")

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
