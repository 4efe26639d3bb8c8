"""The callgrind reader: hand-written files for each part of the format, and real runs checked against
valgrind's own callgrind_annotate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.callgrind import EdgeCost, FunctionCost, Profile, merge, parse
from tests.callgrind_support import (
    FORKING,
    PROGRAM,
    QUERIES,
    RECURSIVE,
    annotate,
    build,
    callgrind,
    line_range,
    requires_valgrind,
)


def write(tmp_path: Path, text: str, name: str = "callgrind.out") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# The format reference's extended example with name compression: main calls func1 once and func2 three times,
# func1 calls func2 twice.
COMPRESSED = """\
# callgrind format
version: 1
creator: hand
positions: line
events: Instructions Flops
summary: 820 6

ob=(1) /bin/prog
fl=(1) file1.c
fn=(1) main
16 20 1
cfn=(2) func1
calls=1 50
16 400 2
cob=(1)
cfi=(2) file2.c
cfn=(3) func2
calls=3 20
16 400 3

fn=(2)
51 100
cfi=(2)
cfn=(3)
calls=2 20
51 300 2

fl=(2)
fn=(3)
20 700 5
totals: 820 6
"""


def test_compressed_names_calls_and_inclusive_costs(tmp_path):
    p = parse(write(tmp_path, COMPRESSED), event="Instructions")
    assert p.event == "Instructions"
    assert p.total == 820
    assert p.functions == {
        "main": FunctionCost("main", "file1.c", 16, 20, 820),
        "func1": FunctionCost("func1", "file1.c", 51, 100, 400),
        "func2": FunctionCost("func2", "file2.c", 20, 700, 700),
    }
    assert p.edges == {
        ("main", "func1"): EdgeCost(1, 400),
        ("main", "func2"): EdgeCost(3, 400),
        ("func1", "func2"): EdgeCost(2, 300),
    }


def test_event_column_is_chosen_by_name(tmp_path):
    p = parse(write(tmp_path, COMPRESSED), event="Flops")
    assert p.total == 6
    assert {n: (f.self_cost, f.inclusive_cost) for n, f in p.functions.items()} == {
        "main": (1, 6),
        "func1": (0, 2),
        "func2": (5, 5),
    }
    assert p.edges["main", "func2"] == EdgeCost(3, 3)
    with pytest.raises(ValueError, match=r"event 'Ir' is not among the events \['Instructions', 'Flops'\]"):
        parse(write(tmp_path, COMPRESSED))


def test_undefined_compressed_name_is_an_error(tmp_path):
    text = "events: Ir\nfl=(1) a.c\nfn=(7)\n3 10\n"
    with pytest.raises(ValueError, match=r"callgrind.out:3: \(7\) refers to no fn= name"):
        parse(write(tmp_path, text))


INLINED = """\
events: Ir
fl=(1) /src/exec.c
fn=(1) ExecScan
fi=(2) /src/include/inline.h
12 5
fe=(1)
100 3
fi=(2)
13 4
cfn=(2) fetch
calls=1 200
13 50
fe=(1)
101 2
fl=(3) /src/fetch.c
fn=(2)
200 50
"""


def test_inlined_file_switches_keep_cost_in_the_function(tmp_path):
    p = parse(write(tmp_path, INLINED))
    scan = p.functions["ExecScan"]
    # the inlined header's cost (5 + 4) is the function's own; the call from inlined code is its call
    assert (scan.self_cost, scan.inclusive_cost) == (14, 64)
    # its place is its own file and first line there, not the header's line 12
    assert (scan.file, scan.line) == ("/src/exec.c", 100)
    assert set(p.functions) == {"ExecScan", "fetch"}
    assert p.edges == {("ExecScan", "fetch"): EdgeCost(1, 50)}


SUBPOSITIONS = """\
positions: instr line
events: Ir
fl=(1) q.c
fn=(1) f
0x80001234 90 1
+3 * 5
+1 +1 6
cfn=(2) g
calls=2 0x80002000 -30
* * 40
-2 -1 7
fn=(2)
* -30 40
fn=(3) h
0x80003000 +240 9
+0x10 -0x2 1
fn=(4) k
+4 * 3
"""


def test_subposition_compression_instr_and_line(tmp_path):
    p = parse(write(tmp_path, SUBPOSITIONS))
    assert p.total == 1 + 5 + 6 + 7 + 40 + 9 + 1 + 3
    f = p.functions["f"]
    assert (f.line, f.self_cost, f.inclusive_cost) == (90, 19, 59)
    assert p.edges["f", "g"] == EdgeCost(2, 40)
    # relative to the last cost line, whatever function it was in; a calls= target changes nothing
    assert [p.functions[n].line for n in "ghk"] == [60, 300, 298]


def test_instr_only_positions_have_no_line(tmp_path):
    text = "positions: instr\nevents: Ir\nfl=a.c\nfn=f\n0x10 4\n+2 6\n*\n"
    p = parse(write(tmp_path, text))
    assert p.functions["f"] == FunctionCost("f", "a.c", 0, 10, 10)


def test_call_cost_line_is_inclusive_not_self(tmp_path):
    text = "events: Ir\nfl=a.c\nfn=caller\n5 3\ncfn=callee\ncalls=4 9\n6 1000\n7 2\nfn=callee\n9 1000\n"
    p = parse(write(tmp_path, text))
    caller = p.functions["caller"]
    assert (caller.self_cost, caller.inclusive_cost) == (5, 1005)
    assert p.total == 1005
    assert p.edges["caller", "callee"] == EdgeCost(4, 1000)


def test_calls_line_without_cost_line_is_an_error(tmp_path):
    text = "events: Ir\nfl=a.c\nfn=f\n5 3\ncfn=g\ncalls=1 9\nfn=g\n9 1\n"
    with pytest.raises(ValueError, match="calls= line without its cost line"):
        parse(write(tmp_path, text))


def test_several_blocks_of_one_function_are_summed(tmp_path):
    text = (
        "events: Ir\nfl=(1) a.c\nfn=(1) f\n10 5\ncfn=(2) g\ncalls=1 30\n10 7\n"
        "fn=(2)\n30 7\nfl=(1)\nfn=(1)\n12 4\ncfn=(2)\ncalls=2 30\n12 14\nfn=(2)\n31 14\n"
    )
    p = parse(write(tmp_path, text))
    assert p.functions["f"] == FunctionCost("f", "a.c", 10, 9, 30)
    assert p.functions["g"] == FunctionCost("g", "a.c", 30, 21, 21)
    assert p.edges == {("f", "g"): EdgeCost(3, 21)}


# Two functions named "(below main)", as in every glibc program: one in the program, one in libc, which calls main.
SAME_NAME = """\
events: Ir
ob=(1) /bin/prog
fl=(1) ???
fn=(1) (below main)
0 2
cob=(2) /lib/libc.so.6
cfi=(2) csu/libc-start.c
cfn=(2) __libc_start_main
calls=1 0
0 30
ob=(2)
fl=(2)
fn=(2)
10 3
cfi=(3) csu/libc_start_call_main.h
cfn=(1)
calls=1 20
10 27
fl=(3)
fn=(1)
20 5
cob=(1)
cfi=(4) /src/prog.c
cfn=(3) main
calls=1 1
20 22
ob=(1)
fl=(4) /src/prog.c
fn=(3)
1 2
cfi=(5) /src/other.c
cfn=(4) helper
calls=1 7
1 20
fl=(6) /src/other-copy.c
fn=(4)
7 20
"""


def test_functions_sharing_a_name_are_told_apart(tmp_path):
    p = parse(write(tmp_path, SAME_NAME))
    outer, inner = "(below main) [???]", "(below main) [libc_start_call_main.h]"
    assert set(p.functions) == {outer, inner, "__libc_start_main", "main", "helper"}
    assert p.functions[outer] == FunctionCost(outer, "???", 0, 2, 32)
    assert p.functions[inner] == FunctionCost(inner, "csu/libc_start_call_main.h", 20, 5, 27)
    assert p.edges == {
        (outer, "__libc_start_main"): EdgeCost(1, 30),
        ("__libc_start_main", inner): EdgeCost(1, 27),
        (inner, "main"): EdgeCost(1, 22),
        ("main", "helper"): EdgeCost(1, 20),  # a name defined once is that function, whatever file the call says
    }
    assert max(f.inclusive_cost for f in p.functions.values()) == p.total == 32


def test_same_named_functions_in_one_file_name_are_told_apart_by_object(tmp_path):
    text = "events: Ir\nob=/lib/ld.so\nfl=fstat.c\nfn=fstat\n1 1\nob=/lib/libc.so.6\nfl=fstat.c\nfn=fstat\n1 2\n"
    p = parse(write(tmp_path, text))
    assert {n: f.self_cost for n, f in p.functions.items()} == {"fstat [ld.so]": 1, "fstat [libc.so.6]": 2}


# main -> r (callgrind's first activation) -> r'2 -> r'2 -> r'2: each call's cost includes the calls below it
RECURSION = """\
events: Ir
fl=a.c
fn=main
1 1
cfn=r
calls=1 10
1 37
fn=r
10 10
cfn=r'2
calls=1 10
10 27
fn=r'2
10 27
cfn=r'2
calls=2 10
10 27
"""


def test_self_recursion_is_not_counted_twice(tmp_path):
    p = parse(write(tmp_path, RECURSION))
    assert p.total == 38
    assert p.functions["r"].inclusive_cost == 37
    # r'2 ran 9+9+9 in three activations, all inside r's single call of it: 27, not 27 + 27 (the self calls)
    assert p.functions["r'2"].inclusive_cost == 27
    assert p.functions["main"].inclusive_cost == 38
    assert p.edges["r'2", "r'2"] == EdgeCost(2, 27)  # kept as recorded


def test_totals_mismatch_names_the_file(tmp_path):
    bad = COMPRESSED.replace("totals: 820 6", "totals: 821 6")
    with pytest.raises(ValueError, match=r"bad\.out: part 1: totals: says 821 Instructions but its cost lines add up"):
        parse(write(tmp_path, bad, "bad.out"), event="Instructions")
    truncated = COMPRESSED.split("fl=(2)\nfn=(3)")[0]  # summary: 820, the rest of the file lost
    with pytest.raises(ValueError, match=r"cut\.out: part 1: summary: says 820 Instructions but .* add up to 120"):
        parse(write(tmp_path, truncated, "cut.out"), event="Instructions")


def test_empty_file_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no events: line"):
        parse(write(tmp_path, ""))


def test_parts_of_one_file_are_summed(tmp_path):
    part = "part: {n}\npositions: line\nevents: Ir\nsummary: {s}\nfl=(1) a.c\nfn=(1) f\n3 {s}\ntotals: {s}\n"
    text = "# callgrind format\nversion: 1\ncreator: hand\npid: 7\n" + part.format(n=1, s=10) + part.format(n=2, s=32)
    p = parse(write(tmp_path, text))
    assert p.total == 42
    assert p.functions["f"] == FunctionCost("f", "a.c", 3, 42, 42)
    with pytest.raises(ValueError, match="part 2: (summary|totals): says 32 Ir but its cost lines add up to 31"):
        parse(write(tmp_path, text.replace("3 32", "3 31")))


def test_merge_sums_profiles(tmp_path):
    a = parse(write(tmp_path, COMPRESSED, "a.out"), event="Instructions")
    b = parse(write(tmp_path, INLINED.replace("events: Ir", "events: Instructions"), "b.out"), event="Instructions")
    m = merge([a, a, b])
    assert m.total == 2 * 820 + 64
    assert m.functions["func2"] == FunctionCost("func2", "file2.c", 20, 1400, 1400)
    assert m.functions["ExecScan"] == b.functions["ExecScan"]
    assert m.edges["main", "func2"] == EdgeCost(6, 800)
    with pytest.raises(ValueError, match="different events"):
        merge([a, parse(write(tmp_path, INLINED, "c.out"))])


def test_json_round_trip_is_exact_without_threshold(tmp_path):
    p = parse(write(tmp_path, COMPRESSED), event="Instructions")
    doc = p.to_json(min_fraction=0)
    assert doc["version"] == 1
    assert Profile.from_json(json.loads(json.dumps(doc))) == p


def test_json_drops_small_functions_and_keeps_totals(tmp_path):
    text = "events: Ir\nfl=a.c\nfn=main\n1 9000\ncfn=big\ncalls=1 2\n1 990\ncfn=tiny\ncalls=1 3\n1 10\n"
    text += "fn=big\n2 990\nfn=tiny\n3 10\n"
    p = parse(write(tmp_path, text))
    doc = p.to_json(min_fraction=0.01)  # tiny has 0.1% of the total
    assert sorted(doc["functions"]) == ["big", "main"]
    assert doc["edges"] == [["main", "big", 1, 990]]
    assert (doc["dropped_functions"], doc["dropped_self"]) == (1, 10)
    back = Profile.from_json(doc)
    assert back.total == p.total == 10_000
    assert back.functions["main"] == p.functions["main"]  # inclusive still counts the dropped callee
    assert "tiny" not in back.functions
    # dropping again adds to what was dropped before
    again = back.to_json(min_fraction=0.5)
    assert (again["dropped_functions"], again["dropped_self"]) == (2, 1000)
    assert Profile.from_json(again).total == 10_000
    assert len(p.to_json(min_fraction=0, max_functions=1)["functions"]) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(version=2), "version 2 is not 1"),
        (lambda d: d.update(total=1), "total 1 is not the self costs"),
        (lambda d: d["functions"]["main"].__setitem__(2, -1), r"functions\['main'\]\[2\] is not a non-negative"),
        (lambda d: d["functions"]["main"].__setitem__(0, 9), r"functions\['main'\]\[0\] names no file"),
        (lambda d: d["edges"].append(["main", "nobody", 1, 1]), r"edges\[3\] joins a function that is not listed"),
        (lambda d: d.update(files="a.c"), "files is not a list"),
    ],
)
def test_json_from_workers_is_checked(tmp_path, change, message):
    doc = json.loads(json.dumps(parse(write(tmp_path, COMPRESSED), event="Instructions").to_json(min_fraction=0)))
    change(doc)
    with pytest.raises(ValueError, match=message):
        Profile.from_json(doc)


@requires_valgrind
def test_real_run_matches_callgrind_annotate(tmp_path):
    run = callgrind(build(tmp_path, "prog"), tmp_path / "prog.out")
    p = parse(run.out)
    assert p.total == run.summary == run.totals == run.collected
    assert max(f.inclusive_cost for f in p.functions.values()) == p.total  # no call chains joined by a shared name
    own, inclusive = annotate(run.out, inclusive=False), annotate(run.out, inclusive=True)
    for name in ("work", "leaf"):
        f = p.functions[name]
        assert own[name] == {f.self_cost}, name
        assert inclusive[name] == {f.inclusive_cost}, name
    work, leaf = p.functions["work"], p.functions["leaf"]
    assert leaf.self_cost > 1000 * QUERIES  # the loop ran
    assert work.inclusive_cost == work.self_cost + leaf.inclusive_cost
    assert p.edges["main", "work"].calls == QUERIES
    assert leaf.file == str(tmp_path / "prog.c")
    assert leaf.line in line_range(PROGRAM, "unsigned leaf(")


@requires_valgrind
def test_real_recursion_matches_callgrind_annotate_where_it_does_not_double_count(tmp_path):
    run = callgrind(build(tmp_path, "rec", RECURSIVE), tmp_path / "rec.out")
    p = parse(run.out)
    assert p.total == run.summary
    own, inclusive = annotate(run.out, inclusive=False), annotate(run.out, inclusive=True)
    for name in ("rec", "rec'2", "leaf", "work"):
        assert own[name] == {p.functions[name].self_cost}, name
    for name in ("rec", "leaf", "work"):
        assert inclusive[name] == {p.functions[name].inclusive_cost}, name
    deeper = p.functions["rec'2"]
    assert deeper.inclusive_cost == p.edges["rec", "rec'2"].inclusive_cost
    assert deeper.inclusive_cost < p.functions["rec"].inclusive_cost
    # callgrind_annotate adds rec'2's calls of itself on top and prints more than the outer rec that holds it
    assert inclusive["rec'2"] == {deeper.inclusive_cost + p.edges["rec'2", "rec'2"].inclusive_cost}
    assert max(inclusive["rec'2"]) > p.functions["rec"].inclusive_cost


@requires_valgrind
def test_real_processes_merge(tmp_path):
    callgrind(build(tmp_path, "fork", FORKING), tmp_path / "fork.%p.out", "--trace-children=yes")
    files = sorted(tmp_path.glob("fork.*.out"))
    assert len(files) == 2
    profiles = [parse(f) for f in files]
    m = merge(profiles)
    assert m.total == sum(int(f.read_text().split("summary: ")[1].split()[0]) for f in files)
    leaf = m.functions["leaf"]
    assert leaf.self_cost == sum(p.functions["leaf"].self_cost for p in profiles)
    assert m.edges["work", "leaf"].calls == 4  # two calls in the parent, two in the child
    # the child's leaf loops 300 times per call, the parent's 100
    child, parent = sorted(profiles, key=lambda p: p.functions["leaf"].self_cost, reverse=True)
    assert child.functions["leaf"].self_cost > 2.5 * parent.functions["leaf"].self_cost
