"""The reconciler's decision (pure): re-queue what is missing on two passes for the grace, never what is pending."""

from __future__ import annotations

from master.reconcile import plan_requeues

CH = [{"revision": "r1", "branch": "master"}, {"revision": "r2", "branch": "master"}]
BUILDERS = {"fixture@local": 1}


def test_first_sighting_only_remembers():
    requeue, give_up, missing = plan_requeues(CH, BUILDERS, {}, set(), {}, {}, 3, now=100.0)
    assert requeue == [] and give_up == []
    assert missing == {("fixture@local", "r1"): 100.0, ("fixture@local", "r2"): 100.0}


def test_missing_twice_is_requeued_in_order():
    seen = dict.fromkeys([("fixture@local", "r1"), ("fixture@local", "r2")], 0.0)
    requeue, _, _ = plan_requeues(CH, BUILDERS, {}, set(), {}, seen, 3)
    assert [c["revision"] for c, _ in requeue] == ["r1", "r2"]


def test_stored_or_pending_is_left_alone():
    seen = dict.fromkeys([("fixture@local", "r1"), ("fixture@local", "r2")], 0.0)
    requeue, _, missing = plan_requeues(CH, BUILDERS, {"fixture@local": {"r1"}}, {(1, "r2")}, {}, seen, 3)
    assert requeue == [] and missing == {}


def test_gives_up_after_max_attempts():
    seen = {("fixture@local", "r1"): 0.0}
    requeue, give_up, _ = plan_requeues(CH[:1], BUILDERS, {}, set(), {"fixture@local": {"r1": 3}}, seen, 3)
    assert requeue == [] and [c["revision"] for c, _ in give_up] == ["r1"]


def test_each_builder_decides_separately():
    builders = {"a@w": 1, "b@w": 2}
    seen = {("a@w", "r1"): 0.0, ("b@w", "r1"): 0.0}
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
    seen = {("fixture@local", r): 0.0 for r in ("r1", "r2", "r3", "s1", "s2")}
    have = {"fixture@local": {"r3"}}  # the push r1..r3 was measured at its newest commit only
    pending = {(1, "s1")}  # s1 is queued; s2, newer on its branch, has nothing yet
    requeue, _, missing = plan_requeues(changes, BUILDERS, have, pending, {}, seen, 3, newest_only=True)
    assert [c["revision"] for c, _ in requeue] == ["s2"]
    assert set(missing) == {("fixture@local", "s2")}
    # every commit mode: the skipped ones are missing and re-queued
    requeue, _, _ = plan_requeues(changes, BUILDERS, have, pending, {}, seen, 3)
    assert [c["revision"] for c, _ in requeue] == ["r1", "r2", "s2"]


def test_a_commit_is_requeued_only_once_missing_for_the_grace():
    # a burst of new commits can take a busy master's scheduler a minute to queue: two passes 2 s apart are not
    # enough evidence that a commit was lost (the fleet of 16 workers built 47 of 187 (commit, builder) pairs twice)
    _, _, missing = plan_requeues(CH[:1], BUILDERS, {}, set(), {}, {}, 3, now=1000.0, grace=60.0)
    requeue, _, missing = plan_requeues(CH[:1], BUILDERS, {}, set(), {}, missing, 3, now=1002.0, grace=60.0)
    assert requeue == [] and missing == {("fixture@local", "r1"): 1000.0}  # remembered from its first sighting
    requeue, _, _ = plan_requeues(CH[:1], BUILDERS, {}, set(), {}, missing, 3, now=1060.0, grace=60.0)
    assert [c["revision"] for c, _ in requeue] == ["r1"]


def test_a_commit_queued_meanwhile_starts_its_grace_again():
    seen = {("fixture@local", "r1"): 1000.0}
    _, _, missing = plan_requeues(CH[:1], BUILDERS, {}, {(1, "r1")}, {}, seen, 3, now=1030.0, grace=60.0)
    assert missing == {}  # pending now: forgotten, so a later loss is timed from when it is seen missing again
    requeue, _, missing = plan_requeues(CH[:1], BUILDERS, {}, set(), {}, missing, 3, now=1070.0, grace=60.0)
    assert requeue == [] and missing == {("fixture@local", "r1"): 1070.0}
