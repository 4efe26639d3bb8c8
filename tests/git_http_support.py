"""A real git smart-HTTP server on 127.0.0.1 that wants HTTP Basic auth: `git http-backend` behind http.server.

Every request is recorded (path, query, the user it authenticated as, or None), so a test can see that git
really sent the credentials and that no token ever travelled in a URL.
"""

from __future__ import annotations

import base64
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class GitRequest:
    method: str
    path: str  # with the query string
    user: str | None  # the authenticated user, None when refused


@dataclass
class GitHttpServer:
    """Serves the bare repositories under `root` (http://127.0.0.1:PORT/NAME.git) to `user`:`password` only."""

    root: Path
    user: str
    password: str
    requests: list[GitRequest] = field(default_factory=list)

    def start(self) -> GitHttpServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _auth(self) -> str | None:
                kind, _, token = (self.headers.get("Authorization") or "").partition(" ")
                if kind != "Basic":
                    return None
                user, _, password = base64.b64decode(token).decode().partition(":")
                return user if (user, password) == (server.user, server.password) else None

            def _serve(self) -> None:
                user = self._auth()
                server.requests.append(GitRequest(self.command, self.path, user))
                if user is None:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="perffarm-test"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path, _, query = self.path.partition("?")
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                env = {
                    "GIT_PROJECT_ROOT": str(server.root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "REQUEST_METHOD": self.command,
                    "CONTENT_TYPE": self.headers.get("Content-Type") or "",
                    "CONTENT_LENGTH": str(len(body)),
                    "REMOTE_USER": user,
                    "REMOTE_ADDR": "127.0.0.1",
                    "PATH": "/usr/bin:/bin",
                }
                if self.headers.get("Git-Protocol"):
                    env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
                proc = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60)
                head, _, payload = proc.stdout.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _serve  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}.git"

    def authenticated(self) -> int:
        return sum(1 for r in self.requests if r.user is not None)


def publish(repo_path: Path, root: Path, name: str) -> Path:
    """A bare clone of `repo_path` at root/NAME.git (push to it with `git push`)."""
    bare = root / f"{name}.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(repo_path), str(bare)], check=True)
    return bare
