"""The schema of the results database: an append-only list of migrations, tracked by PRAGMA user_version.

Every table is documented in docs/results-db.md; `connection.migrate` applies the ones a database has not seen.
"""

from __future__ import annotations

# Append only: never edit a migration that has shipped; add a new one.
MIGRATIONS: list[str] = [
    # 1: the foundation
    """
    CREATE TABLE machines (
        id          TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        first_seen  REAL NOT NULL
    );
    CREATE TABLE commits (
        sha          TEXT PRIMARY KEY,
        subject      TEXT NOT NULL,
        author       TEXT NOT NULL,
        authored_at  INTEGER NOT NULL,
        committed_at INTEGER NOT NULL,
        parents      TEXT NOT NULL
    );
    CREATE TABLE branch_commits (
        branch   TEXT NOT NULL,
        position INTEGER NOT NULL,
        sha      TEXT NOT NULL REFERENCES commits(sha),
        PRIMARY KEY (branch, position)
    );
    CREATE UNIQUE INDEX branch_commits_sha ON branch_commits(branch, sha);
    CREATE INDEX branch_commits_by_sha ON branch_commits(sha);
    CREATE TABLE tags (
        name       TEXT PRIMARY KEY,
        sha        TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE runs (
        id             INTEGER PRIMARY KEY,
        sha            TEXT NOT NULL,
        revision       TEXT NOT NULL,
        ref            TEXT NOT NULL,
        builder        TEXT NOT NULL,
        worker         TEXT NOT NULL,
        machine_id     TEXT NOT NULL REFERENCES machines(id),
        recipe         TEXT NOT NULL,
        recipe_version INTEGER NOT NULL,
        config_hash    TEXT NOT NULL,
        status         TEXT NOT NULL CHECK (status IN ('ok', 'build-failed', 'bench-failed')),
        source         TEXT NOT NULL,
        build_id       INTEGER,
        build_url      TEXT,
        log_excerpt    TEXT NOT NULL,
        host_checks    TEXT NOT NULL,
        noisy          INTEGER NOT NULL,
        started_at     TEXT,
        finished_at    TEXT,
        ingested_at    REAL NOT NULL,
        result         TEXT NOT NULL
    );
    CREATE UNIQUE INDEX runs_build ON runs(build_id) WHERE build_id IS NOT NULL;
    CREATE INDEX runs_sha ON runs(sha, builder);
    CREATE INDEX runs_revision ON runs(revision, builder);
    CREATE TABLE measurements (
        run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        workload  TEXT NOT NULL,
        metric    TEXT NOT NULL,
        unit      TEXT NOT NULL,
        direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
        samples   TEXT NOT NULL,
        flags     TEXT NOT NULL,
        PRIMARY KEY (run_id, workload, metric)
    );
    CREATE TABLE attempts (
        build_id   INTEGER PRIMARY KEY,
        sha        TEXT NOT NULL,
        builder    TEXT NOT NULL,
        started_at REAL NOT NULL
    );
    CREATE INDEX attempts_sha ON attempts(sha, builder);
    CREATE TABLE rejections (
        id          INTEGER PRIMARY KEY,
        build_id    INTEGER,
        revision    TEXT NOT NULL,
        builder     TEXT NOT NULL,
        reason      TEXT NOT NULL,
        file        TEXT NOT NULL,
        rejected_at REAL NOT NULL
    );
    CREATE INDEX rejections_revision ON rejections(revision, builder);
    """,
    # 2: series and change points (written by master/analysis.py after each ingest)
    """
    CREATE TABLE series (
        id             INTEGER PRIMARY KEY,
        machine_id     TEXT NOT NULL REFERENCES machines(id),
        recipe         TEXT NOT NULL,
        recipe_version INTEGER NOT NULL,
        config_hash    TEXT NOT NULL,
        workload       TEXT NOT NULL,
        metric         TEXT NOT NULL,
        branch         TEXT NOT NULL,
        unit           TEXT NOT NULL,
        direction      TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
        analysed_at    REAL,
        UNIQUE (machine_id, recipe, recipe_version, config_hash, workload, metric, branch)
    );
    CREATE TABLE change_points (
        id          INTEGER PRIMARY KEY,
        series_id   INTEGER NOT NULL REFERENCES series(id),
        first_sha   TEXT NOT NULL,
        sha         TEXT NOT NULL,
        prev_sha    TEXT,
        position    INTEGER NOT NULL,
        prev_position INTEGER,
        kind        TEXT NOT NULL CHECK (kind IN ('regression', 'improvement')),
        ratio       REAL NOT NULL,
        ci_low      REAL,
        ci_high     REAL,
        pvalue      REAL NOT NULL,
        state       TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'retracted')),
        first_seen  REAL NOT NULL,
        updated_at  REAL NOT NULL,
        UNIQUE (series_id, first_sha)
    );
    CREATE INDEX change_points_sha ON change_points(sha);
    """,
    # 3: alerts, their lines, triage history and the delivery outbox (master/alerts, docs/alerts.md)
    """
    CREATE TABLE alerts (
        id              TEXT PRIMARY KEY,
        branch          TEXT NOT NULL,
        kind            TEXT NOT NULL CHECK (kind IN ('regression', 'improvement')),
        severity        TEXT NOT NULL CHECK (severity IN ('warn', 'critical')),
        state           TEXT NOT NULL DEFAULT 'new' CHECK (state IN ('new', 'bisecting', 'culprit-found',
                        'acknowledged', 'investigating', 'fixed', 'invalid', 'wontfix', 'backed-out')),
        active          INTEGER NOT NULL DEFAULT 1,
        prev_sha        TEXT,
        sha             TEXT NOT NULL,
        prev_position   INTEGER,
        position        INTEGER NOT NULL,
        bisection_state TEXT CHECK (bisection_state IN ('pending', 'running', 'culprit', 'ambiguous',
                        'not-reproducible', 'failed')),
        culprit_sha     TEXT,
        revision        INTEGER NOT NULL DEFAULT 1,
        signature       TEXT NOT NULL,
        changes         TEXT NOT NULL DEFAULT '[]',
        created_at      REAL NOT NULL,
        updated_at      REAL NOT NULL,
        state_changed_at REAL,
        state_by        TEXT,
        state_note      TEXT
    );
    CREATE INDEX alerts_open ON alerts(branch, kind, position);
    CREATE TABLE alert_lines (
        alert_id        TEXT NOT NULL REFERENCES alerts(id),
        change_point_id INTEGER NOT NULL UNIQUE REFERENCES change_points(id),
        severity        TEXT NOT NULL CHECK (severity IN ('warn', 'critical')),
        added_at        REAL NOT NULL,
        PRIMARY KEY (alert_id, change_point_id)
    );
    CREATE TABLE alert_history (
        id        INTEGER PRIMARY KEY,
        alert_id  TEXT NOT NULL REFERENCES alerts(id),
        at        REAL NOT NULL,
        old_state TEXT,
        new_state TEXT NOT NULL,
        by        TEXT NOT NULL,
        note      TEXT
    );
    CREATE INDEX alert_history_alert ON alert_history(alert_id, at);
    CREATE TABLE alert_outbox (
        id              INTEGER PRIMARY KEY,
        alert_id        TEXT NOT NULL REFERENCES alerts(id),
        channel         TEXT NOT NULL,
        event           TEXT NOT NULL CHECK (event IN ('opened', 'updated')),
        revision        INTEGER NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        payload         TEXT NOT NULL,
        state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'cancelled')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        available_at    REAL NOT NULL,
        lease_owner     TEXT,
        lease_until     REAL,
        last_error      TEXT,
        last_permanent  INTEGER NOT NULL DEFAULT 0,
        created_at      REAL NOT NULL,
        sent_at         REAL
    );
    CREATE INDEX alert_outbox_pending ON alert_outbox(state, available_at);
    CREATE INDEX alert_outbox_alert ON alert_outbox(alert_id, channel, id)
""",
    # 4: bisections (master/bisection): state lives here so a bisection survives a master restart
    """
    CREATE TABLE bisections (
        id              INTEGER PRIMARY KEY,
        change_point_id INTEGER REFERENCES change_points(id),
        builder         TEXT NOT NULL,
        machine_id      TEXT NOT NULL,
        recipe          TEXT NOT NULL,
        config_hash     TEXT NOT NULL,
        workload        TEXT NOT NULL,
        metric          TEXT NOT NULL,
        direction       TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
        branch          TEXT NOT NULL,
        good            TEXT NOT NULL,
        bad             TEXT NOT NULL,
        commits         TEXT NOT NULL,
        state           TEXT NOT NULL CHECK (state IN ('running', 'culprit', 'ambiguous', 'not-reproducible')),
        culprit         TEXT,
        parent          TEXT,
        ratio           REAL,
        ci_low          REAL,
        ci_high         REAL,
        probes          INTEGER NOT NULL DEFAULT 0,
        rounds          INTEGER NOT NULL DEFAULT 0,
        samples         INTEGER NOT NULL DEFAULT 0,
        reason          TEXT NOT NULL DEFAULT '',
        log             TEXT NOT NULL DEFAULT '[]',
        requested_by    TEXT NOT NULL DEFAULT 'detector',
        created_at      REAL NOT NULL,
        updated_at      REAL NOT NULL,
        finished_at     REAL
    );
    CREATE UNIQUE INDEX bisections_change_point ON bisections(change_point_id) WHERE change_point_id IS NOT NULL;
    CREATE TABLE bisection_runs (
        bisection_id INTEGER NOT NULL REFERENCES bisections(id),
        run_id       INTEGER NOT NULL REFERENCES runs(id),
        PRIMARY KEY (bisection_id, run_id)
    );
    """,
    # 5: the idempotency key of a measurement is its Buildbot build request ("<master instance>/<request id>"):
    # a build retried after the master was killed (same request, new build id) finds its result already stored
    # instead of storing it twice. Build ids restart when Buildbot's own database is recreated, so they are no
    # longer unique keys (a new build must never be mistaken for an old one).
    """
    ALTER TABLE runs ADD COLUMN request_key TEXT;
    CREATE UNIQUE INDEX runs_request ON runs(request_key) WHERE request_key IS NOT NULL;
    DROP INDEX runs_build;
    CREATE INDEX runs_build ON runs(build_id)
    """,
    # 6: series identity is per workload: each measurement carries its workload's config hash (the result's
    # workloads[].config_hash), so adding a workload to a recipe no longer starts a new series for every other
    # workload. Stored rows take their run's hash, which was their series identity until now: they stay in the
    # series they were in (and adopt_workload_hashes moves them on). Always written by insert_run (SQLite adds a
    # NOT NULL column only with a default). The index finds a series' rows: on config_hash alone, SQLite would
    # read every row of a run hash to load one series of it.
    """
    ALTER TABLE measurements ADD COLUMN config_hash TEXT NOT NULL DEFAULT '';
    UPDATE measurements SET config_hash = (SELECT r.config_hash FROM runs r WHERE r.id = measurements.run_id);
    CREATE INDEX measurements_series ON measurements(config_hash, workload, metric)
    """,
    # 7: one meaning per word (docs/glossary.md): "revision" is what a build checks out (runs.revision); the
    # number of an alert's message, which goes up when its content changes, is its message version. The webhook
    # payload keeps its "revision" field, the name receivers know.
    """
    ALTER TABLE alerts RENAME COLUMN revision TO message_version;
    ALTER TABLE alert_outbox RENAME COLUMN revision TO message_version
    """,
    # 8: paired throughput (docs/throughput.md): the reference commit a run's throughput was measured against, as
    # the master asked for it (checked against the result at ingest). A run's `.rqps` samples are ratios to this
    # commit, so they compare only with runs of the same reference: a series of them is segmented where it changes
    # (a rebase), never read as a change of the code. Stored runs take what their result's options say.
    """
    ALTER TABLE runs ADD COLUMN reference TEXT;
    UPDATE runs SET reference = json_extract(result, '$.recipe.options.reference')
        WHERE json_type(result, '$.recipe.options.reference') = 'text'
    """,
    # 9: a change point may have more than one bisection: one placed by the newest commits can move when more are
    # measured, and the range it moved to needs a search of its own (master/bisection/state.py auto_create). The
    # newest bisection of a change point is the one that speaks for it.
    """
    DROP INDEX bisections_change_point;
    CREATE INDEX bisections_change_point ON bisections(change_point_id) WHERE change_point_id IS NOT NULL
    """,
    # 10: jobs (master/jobs, docs/jobs.md): 2-8 sides (commits, the last maybe patched) measured interleaved in one
    # build: release archaeology and try-jobs. A job's samples never enter a branch's series and never alert;
    # its result is the validated perffarm-job-result document.
    """
    CREATE TABLE jobs (
        id           INTEGER PRIMARY KEY,
        kind         TEXT NOT NULL CHECK (kind IN ('releases', 'try')),
        state        TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
        builder      TEXT NOT NULL,
        branch       TEXT NOT NULL,
        sides        TEXT NOT NULL,
        options      TEXT NOT NULL DEFAULT '[]',
        patch        TEXT,
        requested_by TEXT NOT NULL,
        build_id     INTEGER,
        build_url    TEXT,
        machine_id   TEXT,
        result       TEXT,
        error        TEXT,
        created_at   REAL NOT NULL,
        updated_at   REAL NOT NULL,
        finished_at  REAL
    );
    CREATE INDEX jobs_state ON jobs(state, id)
    """,
    # 11: callgrind profiles a run kept of its instruction workloads (recipe option callgrind=1: bisection probes,
    # docs/explain.md): per function, self and inclusive instructions of exactly what was counted, so a culprit's
    # per-function diff against its parent needs no run of its own. JSON of recipes/callgrind.py, size-bounded.
    """
    CREATE TABLE profiles (
        run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        workload TEXT NOT NULL,
        queries  INTEGER NOT NULL,
        profile  TEXT NOT NULL,
        PRIMARY KEY (run_id, workload)
    )
    """,
    # 12: worker logins the master refused (a wrong password, a name not in workers.names), per name and reason,
    # until that worker connects: what the health page and `perffarm status` show (master/workerlink.py)
    """
    CREATE TABLE refused_logins (
        name       TEXT NOT NULL,
        reason     TEXT NOT NULL CHECK (reason IN ('wrong-password', 'unknown-worker')),
        address    TEXT NOT NULL,
        attempts   INTEGER NOT NULL,
        first_seen REAL NOT NULL,
        last_seen  REAL NOT NULL,
        PRIMARY KEY (name, reason)
    )
    """,
    # 13: a series' runs by their machine (docs/scale.md). Loading one series for change detection went through
    # measurements_series, which holds that workload's rows of every machine: with 20 machines it read 20 rows
    # (and 20 wide runs rows) per point it kept, 25 ms per series at 600 commits. From the machine's runs the
    # measurement is one primary-key lookup.
    """
    CREATE INDEX runs_series ON runs(machine_id, recipe, recipe_version, status)
    """,
    # 14: what `perffarm status` reads costs the same whatever the history (docs/scale.md): the newest run of each
    # (ref, builder) is a probe of runs_latest (GROUP BY over runs read every run), and the rows of the tables
    # that grow with the history are counted by triggers (COUNT(*) over a hundred million measurements reads them
    # all). Cascaded deletes fire the delete triggers too; an upsert that updates fires no insert trigger.
    """
    CREATE INDEX runs_latest ON runs(ref, builder);
    CREATE TABLE row_counts (name TEXT PRIMARY KEY, n INTEGER NOT NULL);
    INSERT INTO row_counts (name, n) SELECT 'runs', COUNT(*) FROM runs;
    INSERT INTO row_counts (name, n) SELECT 'measurements', COUNT(*) FROM measurements;
    INSERT INTO row_counts (name, n) SELECT 'commits', COUNT(*) FROM commits;
    INSERT INTO row_counts (name, n) SELECT 'branch_commits', COUNT(*) FROM branch_commits;
    CREATE TRIGGER runs_counted AFTER INSERT ON runs
        BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'runs'; END;
    CREATE TRIGGER runs_uncounted AFTER DELETE ON runs
        BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'runs'; END;
    CREATE TRIGGER measurements_counted AFTER INSERT ON measurements
        BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'measurements'; END;
    CREATE TRIGGER measurements_uncounted AFTER DELETE ON measurements
        BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'measurements'; END;
    CREATE TRIGGER commits_counted AFTER INSERT ON commits
        BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'commits'; END;
    CREATE TRIGGER commits_uncounted AFTER DELETE ON commits
        BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'commits'; END;
    CREATE TRIGGER branch_commits_counted AFTER INSERT ON branch_commits
        BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'branch_commits'; END;
    CREATE TRIGGER branch_commits_uncounted AFTER DELETE ON branch_commits
        BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'branch_commits'; END
    """,
    # 15: a branch whose first-parent order is being written in several short transactions (master/ingest.py: a
    # branch of postgres.git's ~60,000 commits in one held every other ingest out for a minute). Until its row here
    # is gone its rows in branch_commits are incomplete: readers leave the branch out, and the next ingest resumes
    # it (a master killed midway).
    """
    CREATE TABLE branch_indexing (
        branch TEXT PRIMARY KEY,
        head TEXT NOT NULL,
        started_at REAL NOT NULL
    )
    """,
    # 16: a machine id stays bound to the worker that first reported it (master/machinebinding.py): `worker` is that
    # worker (NULL until a worker's result binds it: runs made by the master's own process, `perffarm bisect
    # --local`, do not), taken for stored machines from their first run of a Buildbot build. Results another
    # worker (on another host) or another fingerprint claimed for it are refused and counted per (machine, worker)
    # in machine_refusals, for the health page and `perffarm status`.
    """
    ALTER TABLE machines ADD COLUMN worker TEXT;
    UPDATE machines SET worker = (
        SELECT r.worker FROM runs r WHERE r.machine_id = machines.id AND r.build_id IS NOT NULL ORDER BY r.id LIMIT 1
    );
    CREATE TABLE machine_refusals (
        machine_id   TEXT NOT NULL,
        worker       TEXT NOT NULL,
        bound_worker TEXT,
        reason       TEXT NOT NULL,
        attempts     INTEGER NOT NULL,
        first_seen   REAL NOT NULL,
        last_seen    REAL NOT NULL,
        PRIMARY KEY (machine_id, worker)
    )
    """,
    # 17: a job left running with no build (its build request cancelled, or the master stopped between taking the
    # job and submitting its build) is failed or queued again by the job service (master/job_service.py): the
    # build request it waits for, how many builds were submitted for it, and the farm's note saying why it was
    # queued again.
    """
    ALTER TABLE jobs ADD COLUMN build_request INTEGER;
    ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN note TEXT
    """,
    # 18: one bisection per regression (issue #28): a change point whose range lies inside the range of another
    # change point's running bisection on the same builder and branch (or of a finished one whose culprit is in
    # its range) shares that bisection instead of starting its own; the alert of each learns its outcome.
    """
    CREATE TABLE bisection_shares (
        change_point_id INTEGER PRIMARY KEY REFERENCES change_points(id) ON DELETE CASCADE,
        bisection_id    INTEGER NOT NULL REFERENCES bisections(id) ON DELETE CASCADE,
        created_at      REAL NOT NULL
    );
    CREATE INDEX bisection_shares_bisection ON bisection_shares(bisection_id)
    """,
    # 19: the plan of each analytic query a run captured (the result's `plans` member, recipes/pg/plans.py), one
    # row per (run, workload), so that the site finds where a series' plan changed without parsing every stored
    # result (master/plans.py). Results stored before this carried none.
    """
    CREATE TABLE plans (
        run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        workload TEXT NOT NULL,
        shape    TEXT NOT NULL,
        PRIMARY KEY (run_id, workload)
    )
    """,
    # 20: links to where an alert is tracked (a mailing-list thread, a bug), added with `perffarm alerts set-state
    # ID STATE --link URL` (master/alerts/links.py checks them: http(s) only); shown on the alert's page and in
    # the feed. One row per (alert, URL): adding a link twice keeps the first.
    """
    CREATE TABLE alert_links (
        alert_id  TEXT NOT NULL REFERENCES alerts(id),
        url       TEXT NOT NULL,
        added_by  TEXT NOT NULL,
        added_at  REAL NOT NULL,
        PRIMARY KEY (alert_id, url)
    )
    """,
    # 21: what a PostgreSQL hacker reads in an alert (issue #31): the committer ("Name <email>", who is not always
    # the author) and the message's `Discussion:` links (checked https URLs, space-separated), read by the history
    # sync with the other commit facts. Commits stored before keep '' until an ingest reads them again.
    """
    ALTER TABLE commits ADD COLUMN committer TEXT NOT NULL DEFAULT '';
    ALTER TABLE commits ADD COLUMN discussion TEXT NOT NULL DEFAULT ''
    """,
    # 22: the full message of each measured commit (issue #32: the commit page shows it), read by the ingest of a
    # run from the mirror with the commit's other facts; only measured commits have a page, so the history sync
    # reads no message body. Commits measured before this have no row until one is ingested again.
    """
    CREATE TABLE commit_messages (
        sha   TEXT PRIMARY KEY,
        body  TEXT NOT NULL
    )
    """,
    # 23: the wait events sampled during a run's pgbench samples (issue #29: the result's `waits` and, for a paired
    # run, `waits_reference` members, recipes/pg/waits.py), one row per (run, side, workload) holding the samples as
    # JSON, so that a culprit's page reads the waits of two commits without parsing their whole stored results
    # (master/explain/waits.py). Results stored before this carried none.
    """
    CREATE TABLE waits (
        run_id   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        side     TEXT NOT NULL,
        workload TEXT NOT NULL,
        samples  TEXT NOT NULL,
        PRIMARY KEY (run_id, side, workload)
    )
    """,
    # 24: the patch branch head a cfbot job measures (issue #31 item 3, master/jobs/cfbot.py): the branch, the
    # head, the head's subject and the thread links of its message (`Discussion:` trailers and commitfest links,
    # checked https URLs, space-separated), read from the patch repository when the job is queued, so the patches
    # page needs no git. cfbot jobs queued before this have no row (the page reads their requested_by).
    """
    CREATE TABLE cfbot_heads (
        job_id   INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
        branch   TEXT NOT NULL,
        head     TEXT NOT NULL,
        subject  TEXT NOT NULL,
        links    TEXT NOT NULL
    )
    """,
    # 25: a plan change is an event the alert channels send on its own (issue #27 item 2; docs/alerts.md): one row
    # per (query series without its metric, commit) the alert sync has seen, written in the transaction that queues
    # its messages, so a plan change is notified once across re-syncs and restarts; `plan_change_scan` holds what
    # `plans` and the branches looked like at the sync's last look for new ones, which it skips while nothing moved
    # (it reads every plan otherwise, on every pass). The outbox now holds messages
    # of an alert or of a plan change (exactly one of alert_id, plan_change_id); SQLite cannot change a CHECK or a
    # NOT NULL in place, so alert_outbox is copied into its new shape, every row kept.
    """
    CREATE TABLE plan_changes (
        id             TEXT PRIMARY KEY,
        machine_id     TEXT NOT NULL,
        recipe         TEXT NOT NULL,
        recipe_version INTEGER NOT NULL,
        config_hash    TEXT NOT NULL,
        workload       TEXT NOT NULL,
        branch         TEXT NOT NULL,
        prev_sha       TEXT NOT NULL,
        sha            TEXT NOT NULL,
        position       INTEGER NOT NULL,
        before         TEXT NOT NULL,
        after          TEXT NOT NULL,
        first_seen     REAL NOT NULL
    );
    CREATE INDEX plan_changes_sha ON plan_changes(sha);
    CREATE TABLE plan_change_scan (
        id    INTEGER PRIMARY KEY CHECK (id = 1),
        state TEXT NOT NULL
    );
    CREATE TABLE alert_outbox_25 (
        id              INTEGER PRIMARY KEY,
        alert_id        TEXT REFERENCES alerts(id),
        channel         TEXT NOT NULL,
        event           TEXT NOT NULL CHECK (event IN ('opened', 'updated', 'plan-change')),
        message_version INTEGER NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        payload         TEXT NOT NULL,
        state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'cancelled')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        available_at    REAL NOT NULL,
        lease_owner     TEXT,
        lease_until     REAL,
        last_error      TEXT,
        last_permanent  INTEGER NOT NULL DEFAULT 0,
        created_at      REAL NOT NULL,
        sent_at         REAL,
        plan_change_id  TEXT REFERENCES plan_changes(id),
        CHECK ((alert_id IS NULL) <> (plan_change_id IS NULL))
    );
    INSERT INTO alert_outbox_25 (id, alert_id, channel, event, message_version, idempotency_key, payload, state,
        attempts, available_at, lease_owner, lease_until, last_error, last_permanent, created_at, sent_at)
    SELECT id, alert_id, channel, event, message_version, idempotency_key, payload, state, attempts, available_at,
        lease_owner, lease_until, last_error, last_permanent, created_at, sent_at FROM alert_outbox;
    DROP TABLE alert_outbox;
    ALTER TABLE alert_outbox_25 RENAME TO alert_outbox;
    CREATE INDEX alert_outbox_pending ON alert_outbox(state, available_at);
    CREATE INDEX alert_outbox_alert ON alert_outbox(alert_id, channel, id);
    CREATE INDEX alert_outbox_plan ON alert_outbox(plan_change_id, channel, id)
    """,
    # 26: a bisection's culprit confirmation is a job (issue #30 item 1; docs/bisection.md): `jobs.kind` takes
    # 'bisect', and `bisection_jobs` links a bisection to the jobs it queued, so a restarted master finds the job
    # it waits for. SQLite cannot change a CHECK in place, so jobs is copied into its new shape, every row kept;
    # cfbot_heads, which references jobs with ON DELETE CASCADE, is set aside and put back around it, so that
    # dropping the old table deletes none of its rows.
    """
    CREATE TABLE cfbot_heads_26 AS SELECT job_id, branch, head, subject, links FROM cfbot_heads;
    DROP TABLE cfbot_heads;
    CREATE TABLE jobs_26 (
        id            INTEGER PRIMARY KEY,
        kind          TEXT NOT NULL CHECK (kind IN ('releases', 'try', 'bisect')),
        state         TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done', 'failed')),
        builder       TEXT NOT NULL,
        branch        TEXT NOT NULL,
        sides         TEXT NOT NULL,
        options       TEXT NOT NULL DEFAULT '[]',
        patch         TEXT,
        requested_by  TEXT NOT NULL,
        build_id      INTEGER,
        build_url     TEXT,
        machine_id    TEXT,
        result        TEXT,
        error         TEXT,
        created_at    REAL NOT NULL,
        updated_at    REAL NOT NULL,
        finished_at   REAL,
        build_request INTEGER,
        attempts      INTEGER NOT NULL DEFAULT 0,
        note          TEXT
    );
    INSERT INTO jobs_26 (id, kind, state, builder, branch, sides, options, patch, requested_by, build_id, build_url,
        machine_id, result, error, created_at, updated_at, finished_at, build_request, attempts, note)
    SELECT id, kind, state, builder, branch, sides, options, patch, requested_by, build_id, build_url, machine_id,
        result, error, created_at, updated_at, finished_at, build_request, attempts, note FROM jobs;
    DROP TABLE jobs;
    ALTER TABLE jobs_26 RENAME TO jobs;
    CREATE INDEX jobs_state ON jobs(state, id);
    CREATE TABLE cfbot_heads (
        job_id   INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
        branch   TEXT NOT NULL,
        head     TEXT NOT NULL,
        subject  TEXT NOT NULL,
        links    TEXT NOT NULL
    );
    INSERT INTO cfbot_heads (job_id, branch, head, subject, links)
    SELECT job_id, branch, head, subject, links FROM cfbot_heads_26;
    DROP TABLE cfbot_heads_26;
    CREATE TABLE bisection_jobs (
        bisection_id INTEGER NOT NULL REFERENCES bisections(id) ON DELETE CASCADE,
        job_id       INTEGER NOT NULL UNIQUE REFERENCES jobs(id),
        PRIMARY KEY (bisection_id, job_id)
    )
    """,
]
