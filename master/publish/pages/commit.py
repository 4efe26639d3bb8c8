"""data/commits/<sha>.js: what commit.html?c=<sha> shows and what the compare page divides: every series
measured at the commit (median, rQPS vs its previous point, samples; the rows are built by
master/publish/commits.py), the commit's runs, its parents, its tags, its message body and its position on each
branch. commit.html itself is one static shell (compare.py writes it)."""

from __future__ import annotations

import re

from master.publish.context import Context
from master.publish.names import commit_name, safe_name
from master.publish.render import author_name, js_literal
from master.publish.source import CHUNK
from master.publish.writer import SiteWriter
from master.store.commits import Commit
from master.store.runs import RunWithLog
from master.textsafe import visible

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _parents(c: Commit | None) -> list[str]:
    """The commit's parents, first parent first (the page links "compare with parent"); only well-formed shas."""
    return [p for p in c.parents if _SHA.fullmatch(p)] if c else []


def _positions(ctx: Context, sha: str) -> list[list[object]]:
    """[branch, its file name, position] for every branch whose first-parent history holds the commit, by name:
    the page reads the next commit (position + 1) from data/branches/<file name>/<chunk>.js, which a new commit on
    the branch adds to without changing this file."""
    return [[visible(b), safe_name(b), pos] for b, pos in sorted(ctx.positions.get(sha, {}).items())]


def write(w: SiteWriter, ctx: Context, sha: str, rows: str, runs: list[RunWithLog]) -> None:
    """`rows` is the rows' JSON text (commits.rows), `runs` the commit's runs (context.run_views); the object is
    js_call's sorted-key encoding, assembled around the rows."""
    name = commit_name(sha)
    c = ctx.commits.get(sha)
    runs_json = js_literal(
        [
            [
                r.id,
                r.status,
                r.ref,
                r.builder,
                r.worker,
                r.source,
                r.ingested_at,
                r.build_url,
                r.log_excerpt if r.status != "ok" else "",
            ]
            for r in runs
        ]
    )
    # the plan changes first seen at this commit: [sid, workload, machine (name and id), branch, summary, previous
    # sha, before, after]
    plans_json = js_literal(
        [
            [
                r.sid,
                r.change.workload,
                ctx.machine_views[r.machine_id].label(),
                r.branch,
                r.change.summary,
                r.change.prev_sha,
            ]
            + [r.change.before, r.change.after]
            for r in ctx.plan_changes_at.get(sha, [])
        ]
    )
    w.write(
        f"data/commits/{name}.js",
        (
            f'perffarm.commit({js_literal(name)},{{"author":{js_literal(author_name(c.author) if c else "")},'
            f'"authored_at":{js_literal(c.authored_at if c else 0)},"chunk_size":{CHUNK},'
            f'"parents":{js_literal(_parents(c))},'
            f'"message":{js_literal(ctx.messages.get(sha, ""))},"plans":{plans_json},'
            f'"positions":{js_literal(_positions(ctx, sha))},"rows":{rows},"runs":{runs_json},'
            f'"subject":{js_literal(c.subject if c else "")},"tags":{js_literal(sorted(ctx.tag_at.get(sha, [])))}}});\n'
        ),
    )
