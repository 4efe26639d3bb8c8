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
