"""What a web page in the operator's browser, and a user without a login, can do to a real master's web UI.

A real master and worker (fixture recipe), Debian's headless Chromium for the attacker's pages, a real HTTP
server for the attacker's site. Issue #12 item 1: control needs a login once users are configured; the UI
answers only to its own host names (DNS rebinding) and origins (cross-site WebSocket reads).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from tests.harness import Farm, free_port, make_repo, wait_until

pytestmark = pytest.mark.integration
os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
playwright = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # DNS rebinding, simulated: the attacker's host name resolves to this machine's loopback
    "--host-resolver-rules=MAP rebind.test 127.0.0.1",
]
BUILDER = "fixture@local"


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    base = tmp_path_factory.mktemp("websec")
    repo = make_repo(base / "repo")
    f = Farm(base / "data", str(repo.path))
    f.repo = repo
    f.start()
    try:
        repo.bench_commit("one build, so there is something to read", 1500)
        f.wait_for_runs(1)
        yield f
    finally:
        f.stop()


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed: `make test` installs it (scripts/apt-packages-site.txt)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _ws_handshake(port: int, host: str, origin: str | None) -> str:
    """The status line a WebSocket upgrade of /ws gets (no library: the raw HTTP a browser sends)."""
    lines = [
        "GET /ws HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    ]
    if origin:
        lines.append(f"Origin: {origin}")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return s.recv(4096).decode("latin-1").split("\r\n")[0]


def test_the_ui_answers_only_to_its_own_host_names_and_origins(farm):
    port = farm.settings.web_port
    url = f"http://127.0.0.1:{port}/api/v2/builds"
    assert requests.get(url, timeout=10).status_code == 200
    assert requests.get(url, headers={"Host": f"localhost:{port}"}, timeout=10).status_code == 200
    foreign = requests.get(url, headers={"Host": f"rebind.test:{port}"}, timeout=10)
    assert foreign.status_code == 421 and "answers only to" in foreign.text and "builds" not in foreign.text
    assert requests.get(url, headers={"Origin": "http://evil.example"}, timeout=10).status_code == 403
    assert requests.get(url, headers={"Origin": "null"}, timeout=10).status_code == 403
    assert requests.get(url, headers={"Origin": f"http://127.0.0.1:{port}"}, timeout=10).status_code == 200
    # a WebSocket is not covered by CORS: without the guard any page could stream the farm's events
    assert " 101 " in _ws_handshake(port, f"127.0.0.1:{port}", f"http://127.0.0.1:{port}") + " "
    assert " 403 " in _ws_handshake(port, f"127.0.0.1:{port}", "http://evil.example") + " "
    assert " 421 " in _ws_handshake(port, f"rebind.test:{port}", None) + " "


ATTACK = """<!doctype html><html><body><script>
const target = "http://127.0.0.1:%(port)d";
const rpc = JSON.stringify({jsonrpc: "2.0", method: "force", id: 1, params: {builderid: "1", branch: "master",
    revision: "", reason: "csrf", perffarm_options: "", project: "perffarm", repository: %(repo)s}});
window.report = {ws: "pending", messages: 0, cors_json: "pending", simple: "pending", read: "pending"};
fetch(target + "/api/v2/forceschedulers/force", {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "text/plain"}, body: rpc})
  .then(() => report.simple = "sent", e => report.simple = "failed: " + e);
fetch(target + "/api/v2/forceschedulers/force", {method: "POST", headers: {"Content-Type": "application/json"},
      body: rpc}).then(r => report.cors_json = "status " + r.status, e => report.cors_json = "failed: " + e);
fetch(target + "/api/v2/builds").then(r => r.text()).then(t => report.read = "read " + t.length,
      e => report.read = "failed: " + e);
const ws = new WebSocket("ws://127.0.0.1:%(port)d/ws");
ws.onopen = () => { report.ws = "open";
  ws.send(JSON.stringify({cmd: "startConsuming", path: "builds/*/*", _id: 1})); };
ws.onmessage = () => report.messages += 1;
ws.onerror = () => { if (report.ws === "pending") report.ws = "refused"; };
</script>
<form id="f" method="POST" enctype="text/plain" target="sink"
      action="http://127.0.0.1:%(port)d/api/v2/forceschedulers/force">
<input name='{"jsonrpc":"2.0","method":"force","id":1,"params":{"builderid":"1","x":"' value='"}}'></form>
<iframe name="sink"></iframe><script>document.getElementById("f").submit();</script>
</body></html>"""


def _serve(html: str) -> tuple[str, ThreadingHTTPServer]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{port}/", server


def test_a_page_of_another_site_cannot_force_a_build_or_read_the_farm(farm, browser):
    import json

    builds_before = len(farm.builds())
    page_url, server = _serve(
        ATTACK % {"port": farm.settings.web_port, "repo": json.dumps(farm.settings.repository_url)}
    )
    page = browser.new_page()
    try:
        page.goto(page_url, wait_until="load")
        report = wait_until(
            lambda: (r := page.evaluate("window.report")) and "pending" not in r.values() and r,
            20,
            "the attacker page's attempts to finish",
        )
        time.sleep(2)  # a WebSocket that opened would have received events by now
        report = page.evaluate("window.report")
    finally:
        page.close()
        server.shutdown()
    assert report["ws"] == "refused" and report["messages"] == 0, report
    assert report["read"].startswith("failed"), report  # CORS: no Access-Control-Allow-Origin for that page
    assert report["cors_json"].startswith("failed"), report  # the preflight is refused
    time.sleep(3)
    assert len(farm.builds()) == builds_before, f"a page of another site forced a build: {report}"


def test_a_rebound_host_name_gets_nothing_from_the_ui(farm, browser):
    page = browser.new_page()
    try:
        response = page.goto(f"http://rebind.test:{farm.settings.web_port}/api/v2/builds", wait_until="load")
        assert response.status == 421
        assert "answers only to" in page.content() and "buildid" not in page.content()
        response = page.goto(f"http://rebind.test:{farm.settings.web_port}/", wait_until="load")
        assert response.status == 421
    finally:
        page.close()


def test_with_web_users_control_needs_a_login(tmp_path):
    repo = make_repo(tmp_path / "repo")
    farm = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_MASTER_WEB_USERS": "alice"})
    secret = farm.settings.secrets_dir / "web-user-alice"
    secret.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret.write_text("correct horse\n")
    secret.chmod(0o600)
    farm.start()
    try:
        repo.bench_commit("measured", 1500)
        farm.wait_for_runs(1)
        before = len(farm.builds())
        with pytest.raises(RuntimeError, match="role"):
            farm.force(BUILDER, revision=repo.head())
        base = f"http://127.0.0.1:{farm.settings.web_port}"
        wrong = requests.Session()
        assert wrong.get(f"{base}/auth/login", auth=("alice", "wrong"), timeout=10).status_code == 401
        with pytest.raises(RuntimeError, match="role"):
            farm.force(BUILDER, revision=repo.head(), session=wrong)
        assert len(farm.builds()) == before
        alice = requests.Session()
        assert alice.get(f"{base}/auth/login", auth=("alice", "correct horse"), timeout=10).status_code == 200
        farm.force(BUILDER, revision=repo.head(), session=alice)
        wait_until(lambda: len(farm.builds()) > before, 30, "the forced build to appear")
        # reading stays open without a login
        assert requests.get(f"{base}/api/v2/builds", timeout=10).status_code == 200
    finally:
        farm.stop()
