"""The static history site: view models, jinja2 rendering, atomic publishing (pure: no Buildbot/Twisted)."""

from __future__ import annotations

from master.publish.publisher import (
    PublishReport,
    publish_all,
    publish_bisections,
    publish_health,
    publish_incremental,
    publish_jobs,
    site_dir,
)
from master.publish.serve import serve

__all__ = [
    "PublishReport",
    "publish_all",
    "publish_bisections",
    "publish_health",
    "publish_incremental",
    "publish_jobs",
    "serve",
    "site_dir",
]
