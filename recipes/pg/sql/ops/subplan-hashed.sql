-- NOT IN (subquery): a hashed SubPlan probed by 10,000 rows
SELECT count(*) FROM big WHERE c NOT IN (SELECT v * 100 FROM other WHERE v < 30);
