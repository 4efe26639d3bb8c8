"""Credentials of the watched repository: a user name setting plus a Buildbot secret, never part of the URL.

`repository.user` and `repository.password_secret` (the *name* of a Buildbot secret: the file
`<data_dir>/secrets/NAME` of the farm's SecretInAFile provider). A URL with credentials in it would be printed by
git, stored by Buildbot's GitPoller in every change (web UI, REST API) and shown in build logs; a secret is not:
Buildbot's GitPoller and Git step get the credentials as `auth_credentials` (handed to git's credential store in
a private temporary directory), and the master's own git calls (mirror, reachability check, bisect --local) get
them from a credential helper that reads the environment of that one git process — never an argv, a URL or a log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from master import secretfile

if TYPE_CHECKING:
    from master.settings import Settings

# A git credential helper (`!` runs it with the shell): answers `get` from the environment git was started with.
_HELPER = (
    '!f() { if [ "$1" = get ]; then printf "username=%s\\npassword=%s\\n" '
    '"$_PERFFARM_GIT_USER" "$_PERFFARM_GIT_PASSWORD"; fi; }; f'
)


class CredentialsError(RuntimeError):
    """The repository's password secret is missing or unusable; the message says which file to create."""


@dataclass(frozen=True)
class GitCredentials:
    """User name and password (or token) for an http(s) repository; the password never shows in repr."""

    user: str
    password: str = field(repr=False)

    def config_args(self) -> list[str]:
        """git options that use only our helper: the empty value first drops any helper from the user's git
        config, so git neither asks another helper nor stores the password with one after a success."""
        return ["-c", "credential.helper=", "-c", f"credential.helper={_HELPER}"]

    def env(self) -> dict[str, str]:
        """Environment for the git process that the helper reads (visible only to this user and root)."""
        return {"_PERFFARM_GIT_USER": self.user, "_PERFFARM_GIT_PASSWORD": self.password}


def read_credentials(settings: Settings) -> GitCredentials | None:
    """The repository's credentials from the secrets directory, read on every call (rotation needs no
    restart); None when `repository.password_secret` is not set."""
    name = settings.repository_password_secret
    if not name:
        return None
    value = secretfile.read_line(
        settings.secrets_dir, name, "repository.password_secret", "the repository's password or token", CredentialsError
    )
    return GitCredentials(settings.repository_user, value)
