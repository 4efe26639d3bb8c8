-- Seq Scan with a filter on every row of big (10,000 rows)
SELECT count(*), sum(c) FROM big WHERE b < 50 AND c % 7 <> 0;
