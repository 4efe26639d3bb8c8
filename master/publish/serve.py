"""Serve the published site over HTTP (what `make run` uses); the symlink swap makes every request see one version."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


def make_server(directory: Path | str, host: str = "127.0.0.1", port: int = 8011) -> http.server.ThreadingHTTPServer:
    """An HTTP server for `directory` (not started); port 0 picks a free port."""
    handler = functools.partial(_Quiet, directory=str(directory))
    return http.server.ThreadingHTTPServer((host, port), handler)


def serve(
    directory: Path | str, host: str = "127.0.0.1", port: int = 8011
) -> tuple[str, threading.Thread, http.server.ThreadingHTTPServer]:
    """Start serving in a daemon thread; return (URL, thread, server) — call server.shutdown() to stop."""
    Path(directory).parent.mkdir(parents=True, exist_ok=True)
    server = make_server(directory, host, port)
    thread = threading.Thread(target=server.serve_forever, name="perffarm-site", daemon=True)
    thread.start()
    h, p = server.server_address[:2]
    return f"http://{h}:{p}/", thread, server
