-- perffarm pgbench-parallel-agg: a parallel plan (Gather over a Parallel Seq Scan of pgbench_accounts, a hash join
-- and a partial aggregate in each worker). Wall clock, because a single-user backend cannot start parallel workers.
SELECT count(*), sum(a.abalance), sum(a.aid % 1000) FROM pgbench_accounts a JOIN pgbench_branches b ON b.bid = a.bid WHERE a.aid % 3 <> 0;
