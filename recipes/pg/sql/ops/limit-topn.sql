-- ORDER BY ... LIMIT: a bounded (top-N) heap sort of 10,000 rows
SELECT count(*), min(price) FROM (SELECT price FROM big ORDER BY price DESC, id LIMIT 20) s;
