-- Append over all 16 partitions, aggregated per partition key range
SELECT count(*), sum(n) FROM (SELECT k / 1000 AS g, count(*) AS n FROM parts WHERE v <> 7 GROUP BY 1) s;
