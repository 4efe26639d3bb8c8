-- HashAggregate: 1,000 groups of big by a
SELECT count(*), sum(n), max(total) FROM (SELECT a, count(*) AS n, sum(c) AS total FROM big GROUP BY a) s;
