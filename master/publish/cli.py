"""`perffarm publish [--out DIR]`: render the whole static site now."""

from __future__ import annotations

import argparse
from pathlib import Path

from master.settings import load_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None,
                        help="directory to publish into (default: [site] out_dir, i.e. <data_dir>/site)")
    parser.add_argument("--serve", action="store_true", help="after publishing, serve the site until Ctrl-C")
    parser.add_argument("--port", type=int, default=8011, help="port for --serve (default 8011)")


def run(args: argparse.Namespace) -> int:
    from master.publish.publisher import publish_all, site_dir

    settings = load_settings(getattr(args, "config", None))
    report = publish_all(settings, args.out, allow_pool=True)
    out = args.out or site_dir(settings)
    print(f"published {report.series} series, {report.commit_pages} commit pages, {report.files_written} files "
          f"in {report.seconds:.2f} s ({report.ratios_computed} ratios computed, {report.ratios_reused} reused)")
    print(f"open {Path(out).resolve() / 'index.html'}")
    if args.serve:
        from master.publish.serve import make_server

        server = make_server(out, "127.0.0.1", args.port)
        print(f"serving http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0
