-- unnest and array_agg: 8,000 elements taken apart and put back together
SELECT count(*), sum(cardinality(agg)) FROM (SELECT id % 100 AS g, array_agg(x ORDER BY x) AS agg FROM arrs, unnest(ints) AS x WHERE id <= 1000 GROUP BY 1) s;
