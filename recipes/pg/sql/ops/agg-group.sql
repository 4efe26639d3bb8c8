-- GroupAggregate over a Sort (hash aggregation off): 10,000 groups of big by (b, c)
BEGIN; SET LOCAL enable_hashagg = off; SELECT count(*), sum(n) FROM (SELECT b, c, count(*) AS n, max(name) AS m FROM big GROUP BY b, c) s; COMMIT;
