"""`perffarm status` reads the running master's REST API with the standard library (master/webapi.py): the answers
it must tell apart, from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from master import webapi

ANSWERS = {
    "/api/v2/masters": (200, b'{"masters": [{"name": "m"}]}'),
    "/api/v2/broken": (200, b"<html>not json"),
    "/api/v2/fails": (500, b'{"error": "boom"}'),
}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        status, body = ANSWERS.get(self.path, (404, b'{"error": "not found"}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_json_answer_is_returned(port: int) -> None:
    assert webapi.get(port, "masters") == {"masters": [{"name": "m"}]}


@pytest.mark.parametrize("path", ["broken", "fails", "missing"])
def test_an_error_status_or_a_broken_answer_is_none(port: int, path: str) -> None:
    assert webapi.get(port, path) is None


def test_no_master_listening_is_none() -> None:
    with socket.socket() as s:  # bound, never listening: a connection is refused at once
        s.bind(("127.0.0.1", 0))
        assert webapi.get(s.getsockname()[1], "masters") is None
