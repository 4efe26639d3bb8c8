"""The series chart: the hand-written site/static/chart.js against uPlot, a maintained charting library (issue #32).

    npm install --prefix /tmp/uplot uplot@1.6.32
    .venv/bin/python -m tests.benchmarks.chart_library --uplot /tmp/uplot/node_modules/uplot/dist [--runs 5]

For 10,000 and 60,000 points (median, min and max of the samples per point, as the series page draws them) both
charts get the same data as external scripts, 1,000 points per file (as the site's chunk files), served by
master.publish.serve and opened in Debian's headless Chromium, each load in a fresh browser context (cold cache).
Printed per chart and size: the bytes shipped (the library's script and stylesheet; the data files, the same
numbers for both) and the milliseconds from navigation start to the first complete draw of the chart (median of
RUNS loads). uPlot draws the median as a line and min-max as a band (its own series with a fill between them);
chart.js draws what the series page draws.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

from master.publish.serve import serve  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 1000
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]

OWN = """<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="site.css">
<script src="chart.js" defer></script>{scripts}</head><body><main><div class="chart-wrap">
<canvas id="chart" width="960" height="360"></canvas><div id="tip" class="tip" hidden></div></div>
<script type="application/json" id="meta">{meta}</script>
<div id="pager"></div><table id="points"><tbody></tbody></table></main></body></html>
"""

UPLOT = """<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="uPlot.min.css">
<script src="uPlot.iife.min.js" defer></script>{scripts}<script src="draw-uplot.js" defer></script></head>
<body><main><div id="chart"></div></main></body></html>
"""

DRAW_UPLOT = """(function () {
  var d = window.perffarm.parts, pos = [], med = [], lo = [], hi = [];
  Object.keys(d).map(Number).sort(function (a, b) { return a - b; }).forEach(function (k) {
    var c = d[k];
    for (var i = 0; i < c.pos.length; i++) {
      pos.push(c.pos[i]); med.push(c.med[i] / c.scale); lo.push(c.lo[i] / c.scale); hi.push(c.hi[i] / c.scale);
    }
  });
  var el = document.getElementById("chart"), first = true;
  new uPlot({
    width: 960, height: 360, scales: { x: { time: false } },
    series: [{}, { label: "min", stroke: "rgba(33,102,172,0.28)" }, { label: "max", stroke: "rgba(33,102,172,0.28)" },
             { label: "median", stroke: "#2166ac", width: 1.5 }],
    bands: [{ series: [2, 1], fill: "rgba(33,102,172,0.18)" }],
    hooks: { draw: [function () {
      if (first) { first = false; el.dataset.interactiveMs = String(Math.round(performance.now())); }
    }] }
  }, [pos, lo, hi, med], el);
})();
"""


def points(n: int) -> list[tuple[int, int, int, int]]:
    """n points: positions, and median/min/max as integers over 100 (the site's fixed-point columns)."""
    import random

    rng = random.Random(n)
    out = []
    for i in range(n):
        level = 100_000 * (1.0 if i < n // 2 else 0.95)
        m = level * (1 + rng.gauss(0, 0.01))
        out.append((i, round(m * 100), round(m * 0.98 * 100), round(m * 1.02 * 100)))
    return out


def write_data(d: Path, pts: list[tuple[int, int, int, int]], func: str) -> list[str]:
    names = []
    for k in range(0, len(pts), CHUNK):
        part = pts[k : k + CHUNK]
        body = {
            "pos": [p[0] for p in part],
            "scale": 100,
            "med": [p[1] for p in part],
            "lo": [p[2] for p in part],
            "hi": [p[3] for p in part],
            "n": [5] * len(part),
            "flag": [0] * len(part),
        }
        name = f"data-{k // CHUNK}.js"
        if func == "points":
            text = f'perffarm.points("s",{k // CHUNK},{json.dumps(body, separators=(",", ":"))});\n'
        else:
            text = (
                "window.perffarm=window.perffarm||{parts:{}};"
                f"perffarm.parts[{k // CHUNK}]={json.dumps(body, separators=(',', ':'))};\n"
            )
        (d / name).write_text(text)
        names.append(name)
    return names


def build(root: Path, uplot: Path, n: int) -> dict[str, tuple[str, int, int]]:
    """Both pages for n points: name -> (page, library bytes, data bytes)."""
    pts = points(n)
    out = {}
    own = root / f"own-{n}"
    own.mkdir()
    shutil.copy(ROOT / "site/static/chart.js", own)
    shutil.copy(ROOT / "site/static/site.css", own)
    names = write_data(own, pts, "points")
    meta = {"chunks": list(range(len(names))), "chunk_size": CHUNK, "markers": [], "unit": "tx/s", "branch_dir": "x"}
    meta["sid"] = "s"
    scripts = "".join(f'<script src="{x}" defer></script>' for x in names)
    (own / "index.html").write_text(OWN.format(scripts=scripts, meta=json.dumps(meta)))
    lib = sum((own / f).stat().st_size for f in ("chart.js", "site.css"))
    out["chart.js"] = (f"own-{n}/index.html", lib, sum((own / x).stat().st_size for x in names))
    up = root / f"uplot-{n}"
    up.mkdir()
    for f in ("uPlot.iife.min.js", "uPlot.min.css"):
        shutil.copy(uplot / f, up)
    names = write_data(up, pts, "parts")
    (up / "draw-uplot.js").write_text(DRAW_UPLOT)
    scripts = "".join(f'<script src="{x}" defer></script>' for x in names)
    (up / "index.html").write_text(UPLOT.format(scripts=scripts))
    lib = sum((up / f).stat().st_size for f in ("uPlot.iife.min.js", "uPlot.min.css", "draw-uplot.js"))
    out["uPlot 1.6.32"] = (f"uplot-{n}/index.html", lib, sum((up / x).stat().st_size for x in names))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uplot", type=Path, required=True, help="uPlot's dist directory (npm install uplot)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="10000,60000")
    args = ap.parse_args(argv)
    if not (args.uplot / "uPlot.iife.min.js").exists():
        print(f"chart_library: no uPlot.iife.min.js in {args.uplot}: run `npm install --prefix DIR uplot@1.6.32`")
        return 2
    from playwright.sync_api import sync_playwright

    root = Path(tempfile.mkdtemp(prefix="chart-library-"))
    pages = {n: build(root, args.uplot, n) for n in (int(x) for x in args.sizes.split(","))}
    url, _, server = serve(root, "127.0.0.1", 0)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS)
            for n, charts in pages.items():
                for name, (page_rel, lib, data) in charts.items():
                    times = []
                    for _ in range(args.runs):
                        ctx = browser.new_context(viewport={"width": 1100, "height": 700})
                        page = ctx.new_page()
                        page.goto(url + page_rel)
                        page.wait_for_selector("[data-interactive-ms]", state="attached", timeout=60_000)
                        times.append(float(page.get_attribute("[data-interactive-ms]", "data-interactive-ms")))
                        ctx.close()
                    print(
                        f"{n:>6} points  {name:<13} library {lib / 1000:6.1f} kB  data {data / 1e6:5.2f} MB  "
                        f"first draw {statistics.median(times):5.0f} ms median ({min(times):.0f}-{max(times):.0f})",
                        flush=True,
                    )
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
