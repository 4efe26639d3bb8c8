"""Who may use the Buildbot web UI and REST API: a login for control, and only the farm's own host names.

Two threats (docs/security.md):
- **Control from the network.** Force, stop, rebuild and the bisection form start work that runs on the workers.
  With `master.web_users` set, those need a login (Buildbot's auth) and the `operators` role (Buildbot's authz);
  reading stays open. Settings refuse a UI that listens beyond loopback without users (master/settings.py).
- **A web page in the operator's browser.** Buildbot's REST API already refuses JSON-RPC without an
  `application/json` body and a foreign `Origin`, so a cross-site form or fetch cannot force a build. But a page
  that re-binds its own host name to 127.0.0.1 (DNS rebinding) is same-origin with the UI: it could read every
  build log, and a WebSocket (which no CORS rule covers) streams events to any page. HostGuard answers only
  requests whose `Host` is one of the farm's own names and whose `Origin`, when sent, is one of its own origins.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from urllib.parse import urlsplit

from buildbot.plugins import util
from buildbot.util import service
from twisted.internet import reactor
from twisted.python import log
from twisted.web import resource

from master.settings import web_user_secret

OPERATOR_ROLE = "operators"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


class SecretFileAuth(util.CustomAuth):
    """Username and password login; each password is the secret file `web-user-<name>`, read at each login (a
    changed file applies at once, and `buildbot checkconfig` needs no secrets)."""

    def __init__(self, secrets_dir: Path, users: tuple[str, ...], **kwargs) -> None:
        super().__init__(**kwargs)
        self.secrets_dir = Path(secrets_dir)
        self.users = tuple(users)

    def check_credentials(self, username: bytes, password: bytes) -> bool:
        name = username.decode("utf-8", "replace")
        if name not in self.users:
            return False
        try:
            expected = (self.secrets_dir / web_user_secret(name)).read_bytes().strip()
        except OSError:
            return False
        return bool(expected) and hmac.compare_digest(expected, password)


def authz(users: tuple[str, ...]) -> util.Authz:
    """Control endpoints (force, stop, rebuild, any future try-job) need the operators role; reading is open."""
    return util.Authz(
        allowRules=[util.AnyControlEndpointMatcher(role=OPERATOR_ROLE, defaultDeny=True)],
        roleMatchers=[util.RolesFromUsername(roles=[OPERATOR_ROLE], usernames=list(users))],
    )


def allowed_hosts(web_url: str, web_host: str, web_port: int) -> tuple[str, ...]:
    """The `Host` header values the UI answers to: its configured URL's, and loopback names on its port."""
    hosts = {urlsplit(web_url).netloc.lower()}
    hosts.update(f"{name}:{web_port}" for name in LOOPBACK_NAMES)
    if web_host not in ("0.0.0.0", "::", ""):
        hosts.add(f"[{web_host}]:{web_port}" if ":" in web_host else f"{web_host}:{web_port}")
    return tuple(sorted(hosts))


def allowed_origins(hosts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")))


class Refusal(resource.Resource):
    isLeaf = True

    def __init__(self, code: int, message: str) -> None:
        super().__init__()
        self.code = code
        self.message = message

    def render(self, request):  # noqa: D102
        request.setResponseCode(self.code)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return self.message.encode()


class HostGuard(resource.Resource):
    """Wraps the UI's root resource: refuses a foreign Host header (DNS rebinding) or a foreign Origin."""

    def __init__(self, wrapped: resource.Resource, hosts: tuple[str, ...]) -> None:
        super().__init__()
        self.wrapped = wrapped
        self.hosts = frozenset(h.lower() for h in hosts)
        self.origins = frozenset(allowed_origins(hosts))

    def refusal(self, request) -> Refusal | None:
        host = (request.getHeader(b"host") or b"").decode("latin-1").lower()
        if host not in self.hosts:
            return Refusal(
                421,
                f"perffarm: this web UI answers only to {', '.join(sorted(self.hosts))}, not to "
                f"Host {host[:100]!r}. If that is the address you use, set master.web_url to it.\n",
            )
        origin = request.getHeader(b"origin")
        if origin is not None and origin.decode("latin-1").lower() not in self.origins:
            return Refusal(403, "perffarm: requests from pages of other sites are refused (Origin not allowed).\n")
        return None

    def getChildWithDefault(self, path, request):  # noqa: N802 - twisted's name
        return self.refusal(request) or self.wrapped.getChildWithDefault(path, request)

    def render(self, request):  # noqa: D102 - a request for the bare root without a path segment
        refusal = self.refusal(request)
        return refusal.render(request) if refusal else self.wrapped.render(request)


class WebGuard(service.BuildbotService):
    """Installs HostGuard in front of Buildbot's web site once the site exists (and again after a reconfig)."""

    name = "perffarm-web-guard"

    def checkConfig(self, hosts: tuple[str, ...]) -> None:  # noqa: D102
        pass

    def reconfigService(self, hosts: tuple[str, ...]) -> None:  # noqa: D102
        self.hosts = tuple(hosts)
        self._install()

    def startService(self):  # noqa: D102
        result = super().startService()
        self._install()
        return result

    def _install(self, tries: int = 0) -> None:
        www = getattr(self.master, "www", None) if getattr(self, "master", None) else None
        site = getattr(www, "site", None)
        if site is None:  # the web service sets its site up during the first reconfig: try again shortly
            if tries < 600:
                reactor.callLater(0.05, self._install, tries + 1)
            else:
                log.msg("perffarm: the web UI's site never appeared; its Host/Origin guard is not installed")
            return
        root = site.resource
        if isinstance(root, HostGuard):
            root.hosts = frozenset(self.hosts)
            root.origins = frozenset(allowed_origins(self.hosts))
        else:
            site.resource = HostGuard(root, self.hosts)
