"""Read the running master's REST API on this host: is it up, its workers, its queue.

The standard library's HTTP client, not requests: `perffarm status` asks a few questions of 127.0.0.1 and should
not pay for loading an HTTP stack it does not need (issue #30). No proxy: the master is this host's.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from http.client import HTTPException

TIMEOUT = 3  # seconds: a master that does not answer in that time is reported as not running

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(port: int, path: str) -> dict | None:
    """The JSON answer of GET /api/v2/`path` on the master at 127.0.0.1:`port`, or None when it does not answer,
    answers with an error status or with something that is not JSON."""
    try:
        with _opener.open(f"http://127.0.0.1:{port}/api/v2/{path}", timeout=TIMEOUT) as r:
            return json.loads(r.read())
    except (OSError, HTTPException, ValueError):  # refused, timed out, 4xx/5xx (HTTPError), a broken answer
        return None
