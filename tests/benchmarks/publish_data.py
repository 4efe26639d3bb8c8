"""Synthetic but real results databases for the site's tests and benchmarks, filled through master.store."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path

from master import store

NASTY = "<img src=x onerror=alert(1)>"


def sha_of(i: int, salt: str = "") -> str:
    import hashlib

    return hashlib.sha1(f"{salt}commit-{i}".encode()).hexdigest()


def result_doc(
    sha: str,
    ref: str,
    workloads: dict[str, dict[str, Sequence[float]]],
    machine: str = "m1",
    recipe: str = "fixture",
    version: int = 1,
    noisy: bool = False,
    flags: Sequence[str] = (),
    direction: str = "higher",
) -> dict:
    return {
        "schema": "perffarm-result",
        "schema_version": 1,
        "commit": {"sha": sha, "ref": ref},
        "recipe": {"name": recipe, "version": version, "config_hash": "cfg" + str(version)},
        "machine": {"id": machine, "fingerprint": {"cpu_model": "x", "cores": 2}},
        "host_checks": {"noisy": noisy, **({"noisy_reasons": ["ASLR is on"]} if noisy else {})},
        "status": "ok",
        "log_excerpt": "",
        "workloads": [
            {
                "name": w,
                "flags": list(flags),
                "metrics": [
                    {
                        "name": m,
                        "unit": "tx/s" if direction == "higher" else "ms",
                        "direction": direction,
                        "samples": [float(x) for x in s],
                    }
                    for m, s in metrics.items()
                ],
            }
            for w, metrics in workloads.items()
        ],
    }


def commit_info(i: int, subject: str | None = None, salt: str = "") -> store.CommitInfo:
    return store.CommitInfo(
        sha_of(i, salt),
        subject or f"commit number {i}",
        f"Author {i % 7} <a{i % 7}@example.org>",
        1_700_000_000 + i * 3600,
        1_700_000_000 + i * 3600,
        (sha_of(i - 1, salt),) if i else (),
    )


def add_run(
    conn,
    doc: dict,
    build_id: int | None = None,
    source: str = "poll",
    build_url: str | None = "http://127.0.0.1:8010/#/builders/1/builds/1",
) -> int:
    with store.transaction(conn):
        return store.insert_run(
            conn,
            doc,
            store.RunContext(
                builder="fixture@local", worker="local", source=source, build_id=build_id, build_url=build_url
            ),
        )


def build(
    path: Path,
    commits: int,
    workloads: int,
    metrics: int = 1,
    samples: int = 5,
    seed: int = 1,
    tags_every: int = 0,
    branch: str = "master",
) -> dict[str, object]:
    """A branch of `commits` commits, each measured once with workloads × metrics series of `samples` samples."""
    rng = random.Random(seed)
    conn = store.connect(path)
    infos = [commit_info(i) for i in range(commits)]
    t0 = time.perf_counter()
    with store.transaction(conn):
        store.append_branch(conn, branch, infos, 0)
        if tags_every:
            store.set_tags(
                conn, {f"REL_{i // tags_every + 1}_0": infos[i].sha for i in range(tags_every - 1, commits, tags_every)}
            )
    names = [f"wl-{w:03d}" for w in range(workloads)]
    mnames = [f"metric{m}" for m in range(metrics)]
    base = {n: 1000.0 + 37 * k for k, n in enumerate(names)}
    with store.transaction(conn):
        for i, c in enumerate(infos):
            level = 1.0 if i < commits // 2 else 0.95
            wl = {
                n: {m: [base[n] * level * (1 + rng.gauss(0, 0.01)) for _ in range(samples)] for m in mnames}
                for n in names
            }
            store.insert_run(
                conn,
                result_doc(c.sha, branch, wl),
                store.RunContext(
                    builder="fixture@local",
                    worker="local",
                    source="poll",
                    build_id=i + 1,
                    build_url=f"http://127.0.0.1:8010/#/builders/1/builds/{i + 1}",
                ),
            )
    conn.close()
    return {"commits": infos, "seconds": time.perf_counter() - t0}


def next_run(
    path: Path,
    i: int,
    workloads: int,
    metrics: int = 1,
    samples: int = 5,
    branch: str = "master",
    seed: int = 7,
    tag_previous: str | None = None,
) -> int:
    """Append commit `i` to the branch and store one run for it (what one ingest does); return the run id.
    tag_previous: also tag commit i - 1 with this name (the ingest's mirror sync brings a new release tag)."""
    rng = random.Random(seed + i)
    conn = store.connect(path)
    c = commit_info(i)
    names = [f"wl-{w:03d}" for w in range(workloads)]
    wl = {
        n: {
            f"metric{m}": [(1000.0 + 37 * k) * (1 + rng.gauss(0, 0.01)) for _ in range(samples)] for m in range(metrics)
        }
        for k, n in enumerate(names)
    }
    with store.transaction(conn):
        store.append_branch(conn, branch, [c], i)
        if tag_previous:
            store.set_tags(conn, {tag_previous: commit_info(i - 1).sha})
        run_id = store.insert_run(
            conn,
            result_doc(c.sha, branch, wl),
            store.RunContext(builder="fixture@local", worker="local", source="poll", build_id=10_000_000 + i),
        )
    conn.close()
    return run_id
