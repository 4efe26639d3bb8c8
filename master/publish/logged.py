"""The site's partial publishes as one line for a log: what the master's steps and services call after a finished
job, an ended bisection or a refused worker login. The site is derived data: a failure is the line, never raised.
"""

from __future__ import annotations

from collections.abc import Callable

from master.publish.publisher import PublishReport, publish_bisections, publish_health, publish_jobs
from master.settings import Settings


def bisections_line(settings: Settings) -> str:
    """Re-render the pages an ended bisection changes; a message for the master's log."""
    return _line(settings, publish_bisections)


def jobs_line(settings: Settings) -> str:
    """Re-render the pages a finished job changes; a message for the build log."""
    return _line(settings, publish_jobs)


def health_line(settings: Settings) -> str:
    """Re-render the farm health page (a worker was refused, or connected after refusals); a line for the log."""
    return _line(settings, publish_health)


def _line(settings: Settings, publish: Callable[[Settings], PublishReport]) -> str:
    """Run one of the site's partial publishes; what it did, or why it failed, as one line for a log."""
    try:
        report = publish(settings)
    except Exception as e:
        return f"site publish failed: {type(e).__name__}: {e} (`perffarm publish` re-renders the whole site)"
    done = f"site: {report.files_written} files re-rendered in {report.seconds:.2f} s at {report.out_dir}"
    return done + report.failed()
