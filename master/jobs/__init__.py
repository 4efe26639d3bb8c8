"""Jobs: 2-8 sides (commits, the last maybe patched) measured interleaved in one build on a dedicated worker.

Release archaeology (`perffarm releases --tags GLOB`) and try-jobs (`perffarm try --patch FILE`) are jobs: every
side is measured in the same session, slices and rounds alternating between them (recipes/sides.py), so each side's
ratio to the first is a paired number with a confidence interval, not N runs at different times. A job is never a
commit's run: its samples do not enter a branch's series and never alert. docs/jobs.md.

    core     create a job (validated sides), read one, the comparisons of a finished one (pure)
    ingest   check an uploaded job result against the job and store it
    cfbot    a try-job for every new head of a repository of patch branches

Outside the package, above the site it publishes to: the Buildbot adapters (master/job_service.py, the driver that
submits a build for each queued job; master/job_steps.py, the job build's steps) and the verbs
(master/verbs/jobs.py: perffarm releases, try, cfbot, jobs).
"""
