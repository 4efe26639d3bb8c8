"""The alerts' HTTP client (requests) against a real local HTTP server: statuses, redirects never followed, and
errors and logs that never show the webhook URL (it is a secret)."""

from __future__ import annotations

import http.server
import logging
import socket
import threading

import pytest

from master.alerts.channels import RequestsHttpClient

SECRET_PATH = "/hooks/T000/B000/SECRETTOKEN"


class _Handler(http.server.BaseHTTPRequestHandler):
    got: list[tuple[str, bytes, dict]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Handler.got.append((self.path, body, dict(self.headers)))
        status = int(self.path.rsplit("/", 1)[-1]) if self.path.rsplit("/", 1)[-1].isdigit() else 200
        self.send_response(status)
        if 300 <= status < 400:
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/elsewhere")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def do_GET(self) -> None:  # noqa: N802 - a followed redirect would arrive here
        _Handler.got.append((self.path, b"", dict(self.headers)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    _Handler.got = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    srv.server_close()


def test_a_post_arrives_with_its_body_and_headers_and_returns_the_status(server):
    status = RequestsHttpClient().post(server + SECRET_PATH, b'{"x":1}', {"Idempotency-Key": "k1"}, 5)
    assert status == 200
    ((path, body, headers),) = _Handler.got
    assert path == SECRET_PATH and body == b'{"x":1}' and headers["Idempotency-Key"] == "k1"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_returned_never_followed(server, status):
    assert RequestsHttpClient().post(f"{server}/hook/{status}", b"{}", {}, 5) == status
    assert [p for p, _b, _h in _Handler.got] == [f"/hook/{status}"]  # nothing went to the Location


@pytest.mark.parametrize("status", [404, 500, 503])
def test_an_http_error_is_a_status_not_an_exception(server, status):
    assert RequestsHttpClient().post(f"{server}/hook/{status}", b"{}", {}, 5) == status


def test_no_answer_is_an_os_error_that_quotes_neither_host_nor_path(caplog):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    caplog.set_level(logging.DEBUG)
    with pytest.raises(OSError) as caught:
        RequestsHttpClient().post(f"http://127.0.0.1:{port}{SECRET_PATH}", b"{}", {}, 5)
    text = str(caught.value)
    assert text == "ConnectionRefusedError: Connection refused", text
    assert "SECRETTOKEN" not in caplog.text


def test_urllib3_debug_lines_with_the_path_never_appear(server, caplog):
    caplog.set_level(logging.DEBUG)  # an operator who turns on debug logging for everything
    logging.getLogger("urllib3").setLevel(logging.NOTSET)
    RequestsHttpClient().post(server + SECRET_PATH, b"{}", {}, 5)
    assert "SECRETTOKEN" not in caplog.text
    assert _Handler.got  # it was sent


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://x/y", "http://", "http://exa mple.com/SECRETTOKEN"])
def test_an_unusable_url_is_a_value_error_without_its_text(url):
    with pytest.raises(ValueError) as caught:
        RequestsHttpClient().post(url, b"{}", {}, 5)
    assert "SECRETTOKEN" not in str(caught.value) and "passwd" not in str(caught.value)
