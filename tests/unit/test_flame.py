"""Flame graphs from call graphs: stacks rebuilt from edges, and the differential SVG (escaping, colours, widths,
byte-identical output), on hand-made profiles and two real builds."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import pytest

from master.profiles.flame import differential_svg, folded, folded_text
from recipes.callgrind import EdgeCost, FunctionCost, Profile, parse
from tests.callgrind_support import QUERIES, build, callgrind, requires_valgrind

SVG = "{http://www.w3.org/2000/svg}"


def profile(functions: dict[str, tuple[int, int]], edges=(), event="Ir") -> Profile:
    """A profile from {name: (self, inclusive)} and (caller, callee, calls, inclusive) edges."""
    return Profile(
        event,
        sum(s for s, _ in functions.values()),
        {n: FunctionCost(n, "x.c", 1, s, inc) for n, (s, inc) in functions.items()},
        {(c, e): EdgeCost(k, inc) for c, e, k, inc in edges},
    )


CHAIN = profile(
    {"main": (10, 1_000), "work": (90, 990), "leaf": (900, 900)},
    [("main", "work", 1, 990), ("work", "leaf", 10, 900)],
)

# f has two callers: a's calls of it cost 30, b's 10; f's own callee g costs 20 of f's 40
SHARED = profile(
    {"main": (0, 100), "a": (40, 70), "b": (20, 30), "f": (20, 40), "g": (20, 20)},
    [("main", "a", 1, 70), ("main", "b", 1, 30), ("a", "f", 1, 30), ("b", "f", 1, 10), ("f", "g", 2, 20)],
)


def test_single_caller_chain_is_exact():
    assert folded(CHAIN) == {("main",): 10, ("main", "work"): 90, ("main", "work", "leaf"): 900}
    assert folded_text(CHAIN) == "main 10\nmain;work 90\nmain;work;leaf 900\n"


def test_several_callers_share_a_function_in_proportion():
    stacks = folded(SHARED)
    assert stacks[("main", "a", "f")] == pytest.approx(15)  # 3/4 of f's self 20
    assert stacks[("main", "a", "f", "g")] == pytest.approx(15)  # 3/4 of g
    assert stacks[("main", "b", "f")] == pytest.approx(5)
    assert stacks[("main", "b", "f", "g")] == pytest.approx(5)
    assert sum(stacks.values()) == pytest.approx(100)  # the whole graph is the root's inclusive cost


def test_cycles_are_cut_and_recursion_stays_in_its_frame():
    p = profile(
        {"main": (1, 31), "a": (10, 30), "b": (10, 20), "r'2": (5, 5)},
        [("main", "a", 1, 30), ("a", "b", 1, 20), ("b", "a", 1, 10), ("b", "r'2", 1, 5), ("r'2", "r'2", 3, 4)],
    )
    stacks = folded(p)
    assert set(stacks) == {("main",), ("main", "a"), ("main", "a", "b"), ("main", "a", "b", "r'2")}
    assert stacks[("main", "a", "b")] == pytest.approx(15)  # b's call back into a is not expanded
    assert sum(stacks.values()) == pytest.approx(31)


def test_depth_is_capped():
    names = [f"f{i:02d}" for i in range(60)]
    chain = profile(
        {n: (1, 60 - i) for i, n in enumerate(names)},
        [(names[i], names[i + 1], 1, 59 - i) for i in range(59)],
    )
    assert max(len(s) for s in folded(chain)) == 40
    assert max(len(s) for s in folded(chain, max_depth=5)) == 5
    assert folded(chain, max_depth=5)[tuple(names[:5])] == 56  # the cut-off calls stay in the last frame


def test_narrow_frames_are_left_out():
    p = profile({"main": (9_990, 10_000), "tiny": (10, 10)}, [("main", "tiny", 1, 10)])
    assert ("main", "tiny") in folded(p, min_fraction=1e-4)
    assert folded(p, min_fraction=1e-2) == {("main",): 10_000}


def test_given_root():
    assert folded(CHAIN, root="work") == {("work",): 90, ("work", "leaf"): 900}
    with pytest.raises(ValueError, match="root function 'PostgresMain' is not in the profile"):
        folded(CHAIN, root="PostgresMain")


def test_folded_text_keeps_one_stack_per_line():
    p = profile({"main": (1, 3), "operator; x": (2, 2)}, [("main", "operator; x", 1, 2)])
    assert folded_text(p) == "main 1\nmain;operator\\x3b x 2\n"


def frames(svg: str) -> dict[str, tuple[str, float]]:
    """{tooltip's first line: (fill, width)} of every frame of the SVG (which must be well-formed XML)."""
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{SVG}g"):
        title = g.find(f"{SVG}title")
        rect = g.find(f"{SVG}rect")
        assert title is not None and rect is not None
        out[title.text.split("\n")[0]] = (rect.get("fill"), float(rect.get("width")))
    return out


def rgb(fill: str) -> tuple[int, int, int]:
    return int(fill[1:3], 16), int(fill[3:5], 16), int(fill[5:7], 16)


GREW = profile(
    {"main": (10, 1_100), "work": (90, 1_090), "leaf": (1_000, 1_000)},
    [("main", "work", 1, 1_090), ("work", "leaf", 10, 1_000)],
)


def test_colours_follow_the_change_per_query_and_widths_side_b():
    svg = differential_svg(CHAIN, GREW, 10, 10, "leaf grew")
    f = frames(svg)
    r, g, b = rgb(f["leaf"][0])
    assert r > 200 and b < 120  # +11%: full red
    r, g, b = rgb(f["work"][0])
    assert r > b + 60  # +10%
    assert rgb(f["main"][0])[0] > rgb(f["main"][0])[2]
    # leaf is 1000 of B's 1100
    assert f["leaf"][1] / f["main"][1] == pytest.approx(1_000 / 1_100, abs=1e-3)
    shrank = frames(differential_svg(GREW, CHAIN, 10, 10, "leaf shrank"))
    r, g, b = rgb(shrank["leaf"][0])
    assert b > 200 and r < 120
    same = frames(differential_svg(CHAIN, CHAIN, 10, 10, "no change"))
    assert {fill for fill, _ in same.values()} == {"#d0d0d0"}
    # twice the queries on A at twice the cost: no change per query
    double = profile({n: (2 * f.self_cost, 2 * f.inclusive_cost) for n, f in CHAIN.functions.items()})
    double = Profile(
        "Ir", 2_000, double.functions, {k: EdgeCost(2 * e.calls, 2 * e.inclusive_cost) for k, e in CHAIN.edges.items()}
    )
    assert {fill for fill, _ in frames(differential_svg(double, CHAIN, 20, 10, "per query")).values()} == {"#d0d0d0"}


def test_tooltips_and_legend():
    svg = differential_svg(CHAIN, GREW, 10, 10, "leaf grew")
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter(f"{SVG}title")]
    assert "leaf\nA: 90.0 instructions/query\nB: 100.0 instructions/query\ndelta: +10.0/query (+11.11%)" in titles
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts[0] == "leaf grew"
    assert "red: more instructions per query in B than in A; blue: fewer" in texts[1]
    assert "frame widths are side B" in texts[1]


def test_untrusted_names_are_escaped():
    evil = "<script>alert(1)</script>&amp;\x1b[31m"
    p = profile({"main": (1, 11), evil: (10, 10)}, [("main", evil, 1, 10)])
    svg = differential_svg(p, p, 1, 1, "title <b>&</b>")
    assert "<script>" not in svg and "<b>" not in svg and "\x1b" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;amp;\\x1b[31m" in svg
    assert "title &lt;b&gt;&amp;&lt;/b&gt;" in svg
    assert "<script>alert(1)</script>&amp;\\x1b[31m" in frames(svg)  # the text a viewer shows
    assert ET.fromstring(svg).findall(f".//{SVG}script") == []


def test_the_svg_embeds_in_site_pages_and_stands_alone():
    """The site inserts the SVG into alert and job pages through render.safe_svg, which takes only a document
    that starts at <svg>: an XML declaration in front would fail every page with a flame graph."""
    from master.publish.render import safe_svg

    svg = differential_svg(CHAIN, GREW, 10, 10, "leaf grew")
    assert svg.startswith("<svg ")
    assert str(safe_svg(svg)) == svg
    assert ET.fromstring(svg).tag == f"{SVG}svg"  # and parses alone as the .svg file perffarm compare writes


def test_output_is_deterministic():
    svg = differential_svg(SHARED, SHARED, 3, 7, "again")
    shuffled = list(SHARED.functions.items())
    random.Random(4).shuffle(shuffled)
    edges = list(SHARED.edges.items())
    random.Random(5).shuffle(edges)
    again = Profile("Ir", SHARED.total, dict(shuffled), dict(edges))
    assert differential_svg(SHARED, again, 3, 7, "again") == svg
    assert differential_svg(again, again, 3, 7, "again") == svg


def test_bad_arguments():
    with pytest.raises(ValueError, match="positive number of queries"):
        differential_svg(CHAIN, GREW, 0, 1, "t")
    with pytest.raises(ValueError, match="different events"):
        differential_svg(CHAIN, profile({"main": (1, 1)}, event="Dr"), 1, 1, "t")


@requires_valgrind
def test_real_differential_shows_leaf_red(tmp_path):
    a_run = callgrind(build(tmp_path, "a"), tmp_path / "a.out")
    b_run = callgrind(build(tmp_path, "b", extra=50), tmp_path / "b.out")
    a, b = parse(a_run.out), parse(b_run.out)
    svg = differential_svg(a, b, QUERIES, QUERIES, "leaf: 50 more iterations per call")
    f = frames(svg)
    r, g, blue = rgb(f["leaf"][0])
    assert r > 200 and blue < 120, f["leaf"]
    assert f["main"][1] > f["work"][1] >= f["leaf"][1] > 0
    assert "#d0d0d0" in {fill for fill, _ in f.values()}  # start-up code is the same in both builds
    assert differential_svg(a, b, QUERIES, QUERIES, "leaf: 50 more iterations per call") == svg
