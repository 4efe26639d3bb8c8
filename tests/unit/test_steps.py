"""The farm's master-side build steps under Buildbot's own step test harness (TestBuildStepMixin).

CheckSource is defence in depth: settings never watch a ref git would not create and the force form checks its
fields, so no outside input reaches it with an unsafe name today; these tests drive it directly.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from buildbot.process.results import FAILURE, SUCCESS
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import TestBuildStepMixin
from twisted.trial import unittest

from master.settings import load_settings
from master.steps import COMMIT, SOURCE_REFUSED, CheckSource
from tests.harness import make_repo


class CheckSourceTest(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):
        self.setup_test_reactor()
        self.tmp = Path(tempfile.mkdtemp(prefix="perffarm-steps-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.repo = make_repo(self.tmp / "repo")
        self.settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": f"{self.tmp}/data",
                                               "PERFFARM_REPOSITORY_URL": str(self.repo.path)})
        return self.setup_test_build_step()

    def _check(self, branch, revision):
        self.setup_step(CheckSource(self.settings))
        self.get_nth_step(0).build.sources[""] = SimpleNamespace(branch=branch, revision=revision)
        return self.run_step()

    def test_a_branch_that_git_would_read_as_an_option_is_refused(self):
        self.expect_outcome(result=FAILURE, state_string="refused: unsafe branch or revision (failure)")
        self.expect_property(SOURCE_REFUSED, True, "CheckSource")
        self.expect_log_file_stderr(
            "check", "REFUSED, nothing was run on the worker: branch '--upload-pack=touch${IFS}/tmp/x;sh' starts "
            "with '-' (git would read it as an option).\nGive a branch or tag name as `git check-ref-format "
            "--branch` accepts it and a commit sha.\n")
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
