-- pruning at plan time (2 of 16 range partitions scanned) and at run time (the key is a parameter)
SELECT (SELECT count(*) FROM parts WHERE k BETWEEN 2000 AND 3000), (SELECT sum(v) FROM parts WHERE k = (SELECT max(small_id) FROM big WHERE id < 10));
