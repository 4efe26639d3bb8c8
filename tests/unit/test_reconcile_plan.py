"""The reconciler's decision (pure): re-queue only what is missing twice in a row, never what is pending."""

from __future__ import annotations

from master.reconcile import plan_requeues

CH = [{"revision": "r1", "branch": "master"}, {"revision": "r2", "branch": "master"}]
BUILDERS = {"fixture@local": 1}


def test_first_sighting_only_remembers():
    requeue, give_up, missing = plan_requeues(CH, BUILDERS, {}, set(), {}, set(), 3)
    assert requeue == [] and give_up == []
    assert missing == {("fixture@local", "r1"), ("fixture@local", "r2")}


def test_missing_twice_is_requeued_in_order():
    seen = {("fixture@local", "r1"), ("fixture@local", "r2")}
    requeue, _, _ = plan_requeues(CH, BUILDERS, {}, set(), {}, seen, 3)
    assert [c["revision"] for c, _ in requeue] == ["r1", "r2"]


def test_stored_or_pending_is_left_alone():
    seen = {("fixture@local", "r1"), ("fixture@local", "r2")}
    requeue, _, missing = plan_requeues(CH, BUILDERS, {"fixture@local": {"r1"}}, {(1, "r2")}, {}, seen, 3)
    assert requeue == [] and missing == set()


def test_gives_up_after_max_attempts():
    seen = {("fixture@local", "r1")}
    requeue, give_up, _ = plan_requeues(CH[:1], BUILDERS, {}, set(), {"fixture@local": {"r1": 3}}, seen, 3)
    assert requeue == [] and [c["revision"] for c, _ in give_up] == ["r1"]


def test_each_builder_decides_separately():
    builders = {"a@w": 1, "b@w": 2}
    seen = {("a@w", "r1"), ("b@w", "r1")}
    requeue, _, _ = plan_requeues(CH[:1], builders, {"a@w": {"r1"}}, set(), {}, seen, 3)
    assert [(c["revision"], b) for c, b in requeue] == [("r1", "b@w")]


def test_newest_only_leaves_commits_a_newer_measured_commit_covers():
    changes = [
        {"revision": r, "branch": b}
        for r, b in (
            ("r1", "master"),
            ("r2", "master"),
            ("s1", "REL_17_STABLE"),
            ("r3", "master"),
            ("s2", "REL_17_STABLE"),
        )
    ]
    seen = {("fixture@local", r) for r in ("r1", "r2", "r3", "s1", "s2")}
    have = {"fixture@local": {"r3"}}  # the push r1..r3 was measured at its newest commit only
    pending = {(1, "s1")}  # s1 is queued; s2, newer on its branch, has nothing yet
    requeue, _, missing = plan_requeues(changes, BUILDERS, have, pending, {}, seen, 3, newest_only=True)
    assert [c["revision"] for c, _ in requeue] == ["s2"]
    assert missing == {("fixture@local", "s2")}
    # every commit mode: the skipped ones are missing and re-queued
    requeue, _, _ = plan_requeues(changes, BUILDERS, have, pending, {}, seen, 3)
    assert [c["revision"] for c, _ in requeue] == ["r1", "r2", "s2"]
