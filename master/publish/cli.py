"""`perffarm publish [--out DIR]`: render the whole static site now (the master re-renders incrementally)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from master import cliargs
from master.settings import load_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="directory to publish into (default: [site] out_dir, i.e. <data_dir>/site). DIR becomes "
        "a symlink to the current version in .DIR.versions/ next to it; an existing directory that "
        "is not a perffarm site is refused",
    )
    parser.add_argument(
        "--serve", action="store_true", help="after publishing, serve DIR on http://127.0.0.1:PORT/ until Ctrl-C"
    )
    parser.add_argument("--port", type=cliargs.port, default=None, help="port for --serve (default: [site] port, 8011)")
    parser.add_argument(
        "--jobs",
        type=int,
        choices=(1, 2),
        default=None,
        help="processes for the full render (default 2 on a machine with 2+ cores: forked children "
        "parse half the samples, compute half the rQPS, then share the writing with this process)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")


def run(args: argparse.Namespace) -> int:
    from master.publish.publisher import publish_all, site_dir
    from master.publish.writer import PublishError

    settings = load_settings(getattr(args, "config", None))
    if not settings.results_db.exists():
        from master import cliargs

        return cliargs.no_results_db("publish", settings.results_db, "nothing to publish")
    out = args.out or site_dir(settings)

    def progress(message: str) -> None:
        if not args.quiet:
            print(f"publish: {message}", flush=True)

    try:
        report = publish_all(settings, args.out, progress=progress, jobs=args.jobs)
    except PublishError as e:
        print(f"perffarm publish: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # --out (or site.out_dir) cannot be created or written: the command line is wrong
        print(
            f"perffarm publish: cannot write the site to {out}: {e.strerror or e}; choose a directory you can write "
            "(--out DIR)",
            file=sys.stderr,
        )
        return 2
    print(
        f"published {report.series} series, {report.commit_pages} commits, {report.files_written} files "
        f"({report.files_linked} unchanged, linked) in {report.seconds:.2f} s ({report.ratios_computed} rQPS "
        f"computed, {report.ratios_reused} reused)"
    )
    print(f"open {Path(os.path.abspath(out)) / 'index.html'} (works from disk) or serve {out} with any web server")
    for failure in report.failures:
        print(f"perffarm publish: could not build {failure.line()}", file=sys.stderr)
    if report.failures:
        print(
            f"perffarm publish: {len(report.failures)} page(s) could not be built and say so on the site; every other "
            "page was published (the next publish builds them again)",
            file=sys.stderr,
        )
    if args.serve:
        from master.publish.serve import make_server

        server = make_server(out, "127.0.0.1", args.port or settings.site_port)
        print(f"serving http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 1 if report.failures else 0
