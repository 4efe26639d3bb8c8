"""The farm's master-side build steps under Buildbot's own step test harness (TestBuildStepMixin).

CheckSource is defence in depth: settings never watch a ref git would not create and the force form checks its
fields, so no outside input reaches it with an unsafe name today; these tests drive it directly. IngestResult and
RecordAttempt run against the real store, ingest and git mirror on a temp dir; only the build is Buildbot's fake.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from buildbot.process.results import FAILURE, SUCCESS
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import TestBuildStepMixin
from twisted.internet import defer
from twisted.trial import unittest

from master import ingest, store
from master.settings import load_settings
from master.steps import (
    COMMIT,
    REFERENCE,
    SOURCE_REFUSED,
    STORED_RUN,
    CheckSource,
    IngestResult,
    RecordAttempt,
    master_instance,
    result_path,
)
from tests.harness import make_repo
from tests.unit.test_store_ingest import result_for


class StepTestCase(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    """A fake build on Buildbot's test reactor; a real git repository and farm settings in a temp dir."""

    def setUp(self):
        self.setup_test_reactor()
        self.tmp = Path(tempfile.mkdtemp(prefix="perffarm-steps-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.repo = make_repo(self.tmp / "repo")
        self.settings = load_settings(
            environ={"PERFFARM_MASTER_DATA_DIR": f"{self.tmp}/data", "PERFFARM_REPOSITORY_URL": str(self.repo.path)}
        )
        return self.setup_test_build_step()


class CheckSourceTest(StepTestCase):
    def _check(self, branch, revision):
        self.setup_step(CheckSource(self.settings))
        self.get_nth_step(0).build.sources[""] = SimpleNamespace(branch=branch, revision=revision)
        return self.run_step()

    def test_a_branch_that_git_would_read_as_an_option_is_refused(self):
        self.expect_outcome(result=FAILURE, state_string="refused: unsafe branch or revision (failure)")
        self.expect_property(SOURCE_REFUSED, True, "CheckSource")
        self.expect_log_file_stderr(
            "check",
            "REFUSED, nothing was run on the worker: branch '--upload-pack=touch${IFS}/tmp/x;sh' starts "
            "with '-' (git would read it as an option).\nGive a branch or tag name as `git check-ref-format "
            "--branch` accepts it and a commit sha.\n",
        )
        return self._check("--upload-pack=touch${IFS}/tmp/x;sh", None)

    def test_a_revision_that_is_an_option_is_refused(self):
        self.expect_outcome(result=FAILURE, state_string="refused: unsafe branch or revision (failure)")
        return self._check("master", "--output=/tmp/x")

    def test_a_revision_the_repository_lacks_is_refused(self):
        self.expect_outcome(result=FAILURE, state_string="refused: unknown revision (failure)")
        return self._check("master", "0" * 40)

    def test_a_known_revision_is_resolved_to_its_commit(self):
        self.repo.tag("REL_1_0")  # annotated: the tag object resolves to the commit it points at
        self.expect_outcome(result=SUCCESS)
        self.expect_property(COMMIT, self.repo.head(), "CheckSource")
        return self._check("refs/tags/REL_1_0", "REL_1_0")


class CheckSourceReferenceTest(StepTestCase):
    """throughput.references: the master resolves a branch's reference and the build measures against it."""

    def _check(self, references, revision):
        self.settings = dataclasses.replace(self.settings, throughput_references=references)
        self.setup_step(CheckSource(self.settings))
        self.get_nth_step(0).build.sources[""] = SimpleNamespace(branch="master", revision=revision)
        return self.run_step()

    def test_a_reference_on_the_branch_is_resolved_and_passed_to_the_build(self):
        self.repo.tag("REL_1_0")
        release = self.repo.head()
        head = self.repo.commit("later", allow_empty=True)
        self.expect_outcome(result=SUCCESS)
        self.expect_property(REFERENCE, release, "CheckSource")
        self.expect_log_file(
            "check", f"revision {head} is commit {head}\npaired with the reference REL_1_0 ({release[:12]})\n"
        )
        return self._check({"master": "REL_1_0"}, head)

    def test_a_reference_after_the_commit_runs_the_build_unpaired_and_says_why(self):
        old = self.repo.head()
        newer = self.repo.commit("newer", allow_empty=True)
        self.expect_outcome(result=SUCCESS)
        self.expect_no_property(REFERENCE)
        self.expect_log_file_stderr(
            "check",
            f"throughput.references: master={newer}: {newer[:12]} is not an ancestor of {old[:12]} (a reference "
            "must be on the branch, at or before the commit); this build is measured unpaired\n",
        )
        return self._check({"master": newer}, old)

    def test_an_unknown_reference_runs_the_build_unpaired(self):
        self.expect_outcome(result=SUCCESS)
        self.expect_no_property(REFERENCE)
        return self._check({"master": "REL_9_9"}, self.repo.head())

    def test_a_branch_without_a_reference_is_unpaired_and_quiet(self):
        self.expect_outcome(result=SUCCESS)
        self.expect_no_property(REFERENCE)
        return self._check({"other": "REL_9_9"}, self.repo.head())


class IngestResultTest(StepTestCase):
    """The ingest step on Buildbot's fake build, with the real store, ingest and mirror behind it."""

    BUILDER = "fixture@local"

    def _ingest(self, doc, got_revision=None, **props):
        self.setup_step(IngestResult(self.settings, "fixture"))
        build = self.get_nth_step(0).build
        build.builder.name = self.BUILDER
        build.builder.getBuilderId = lambda: defer.succeed(1)
        # Buildbot's fake master has no service manager; the step looks up the bisection service there
        self.master.service_manager = SimpleNamespace(namedServices={})
        for name, value in {"buildnumber": 7, "got_revision": got_revision, **props}.items():
            build.setProperty(name, value, "test")
        path = result_path(self.settings, self.BUILDER, 7)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return self.run_step()

    def _runs(self):
        conn = store.connect(self.settings.results_db)
        try:
            return [tuple(r) for r in conn.execute("SELECT sha, status FROM runs")]
        finally:
            conn.close()

    @defer.inlineCallbacks
    def test_the_builds_own_result_is_stored(self):
        sha = self.repo.head()
        self.expect_outcome(result=SUCCESS, state_string="stored run 1")
        yield self._ingest(result_for(sha), got_revision=sha)
        self.assertEqual(self._runs(), [(sha, "ok")])

    @defer.inlineCallbacks
    def test_a_malformed_result_is_rejected_and_nothing_is_stored(self):
        sha = self.repo.head()
        doc = result_for(sha)
        doc["workloads"][0]["metrics"][0]["samples"] = ["fast"]
        self.expect_outcome(result=FAILURE, state_string="result rejected (failure)")
        yield self._ingest(doc, got_revision=sha)
        self.assertIn("REJECTED, nothing stored:", self.get_nth_step(0).logs["ingest"].stderr)
        self.assertEqual(self._runs(), [])

    @defer.inlineCallbacks
    def test_a_result_of_another_commit_is_never_stored_under_this_one(self):
        old, new = self.repo.head(), self.repo.bench_commit("new", 2000)
        self.expect_outcome(result=FAILURE, state_string="result rejected (failure)")
        yield self._ingest(result_for(old), got_revision=new)  # a stale result.json beside a fresh checkout
        self.assertIn("$.commit.sha: result is for", self.get_nth_step(0).logs["ingest"].stderr)
        self.assertEqual(self._runs(), [])

    def _paired(self, sha, reference):
        doc = result_for(sha)
        doc["recipe"]["options"] = {"reference": reference}
        doc["workloads"][0]["metrics"].append(
            {"name": "throughput.rqps", "unit": "ratio", "direction": "higher", "samples": [1.0, 1.01]}
        )
        return doc

    def _references(self):
        conn = store.connect(self.settings.results_db)
        try:
            return [r[0] for r in conn.execute("SELECT reference FROM runs")]
        finally:
            conn.close()

    @defer.inlineCallbacks
    def test_a_paired_result_is_stored_with_the_reference_the_master_asked_for(self):
        sha, ref = self.repo.head(), "1" * 40
        self.expect_outcome(result=SUCCESS, state_string="stored run 1")
        yield self._ingest(self._paired(sha, ref), got_revision=sha, perffarm_reference=ref)
        self.assertEqual(self._references(), [ref])

    @defer.inlineCallbacks
    def test_a_forced_reference_option_is_what_the_master_asked_for(self):
        sha, ref, forced = self.repo.head(), "1" * 40, "2" * 40
        self.expect_outcome(result=SUCCESS, state_string="stored run 1")
        yield self._ingest(
            self._paired(sha, forced),
            got_revision=sha,
            perffarm_reference=ref,
            perffarm_options=[f"reference={forced}"],
        )
        self.assertEqual(self._references(), [forced])

    @defer.inlineCallbacks
    def test_a_result_paired_with_another_reference_is_rejected(self):
        sha = self.repo.head()
        self.expect_outcome(result=FAILURE, state_string="result rejected (failure)")
        yield self._ingest(self._paired(sha, "3" * 40), got_revision=sha, perffarm_reference="1" * 40)
        self.assertIn("measured against reference 333333333333", self.get_nth_step(0).logs["ingest"].stderr)
        self.assertEqual(self._runs(), [])

    @defer.inlineCallbacks
    def test_a_build_whose_checkout_failed_has_no_result(self):
        self.expect_outcome(result=FAILURE, state_string="no result (failure)")
        yield self._ingest(result_for(self.repo.head()), got_revision=None)  # the git step never set it
        self.assertIn("reported no revision", self.get_nth_step(0).logs["ingest"].stderr)
        self.assertEqual(self._runs(), [])

    @defer.inlineCallbacks
    def test_a_retried_build_whose_result_is_stored_does_not_measure_again(self):
        sha = self.repo.head()
        self.expect_outcome(result=SUCCESS)
        yield self._ingest(result_for(sha), got_revision=sha, **{STORED_RUN: 5})
        self.assertIn("not measured again", self.get_nth_step(0).logs["ingest"].stdout)
        self.assertEqual(self._runs(), [])


class RecordAttemptTest(StepTestCase):
    """A build request whose result is stored already (the master died after storing it) is not measured again,
    nor is a commit the farm measured already by itself (Buildbot's poller reported it twice)."""

    def _record(self, request_id: int, scheduler: str = "force"):
        self.setup_step(RecordAttempt(self.settings))
        build = self.get_nth_step(0).build
        build.builder.name = "fixture@local"
        build.setProperty("scheduler", scheduler, "Scheduler")
        build.requests = [SimpleNamespace(id=request_id)]
        build.sources[""] = SimpleNamespace(branch="master", revision=self.repo.head())
        return self.run_step()

    def _store_for_request(self, request_id: int) -> int:
        sha = self.repo.head()
        self.settings.incoming_dir.mkdir(parents=True, exist_ok=True)
        path = self.settings.incoming_dir / "r.json"
        path.write_text(json.dumps(result_for(sha)))
        key = f"{master_instance(self.settings)}/{request_id}"
        run = store.RunContext(
            builder="fixture@local", worker="local", source="poll", build_id=1, got_revision=sha, request_key=key
        )
        return ingest.ingest_file(self.settings, path, run, "fixture").run_id

    @defer.inlineCallbacks
    def test_a_stored_request_is_marked_so_the_build_skips_measuring(self):
        run_id = self._store_for_request(3)
        self.expect_outcome(result=SUCCESS)
        self.expect_property(STORED_RUN, run_id, "RecordAttempt")
        yield self._record(3)

    @defer.inlineCallbacks
    def test_a_commit_the_poller_reports_again_is_not_measured_again(self):
        run_id = self._store_for_request(3)
        self.expect_outcome(result=SUCCESS)
        self.expect_property(STORED_RUN, run_id, "RecordAttempt")
        yield self._record(4, scheduler="commits")  # a second change for the same commit, a new request

    @defer.inlineCallbacks
    def test_a_forced_build_of_a_measured_commit_measures_it(self):
        self._store_for_request(3)
        self.expect_outcome(result=SUCCESS)
        yield self._record(4, scheduler="force")
        self.assertIsNone(self.get_nth_step(0).getProperty(STORED_RUN))
