-- UNION (duplicates removed) of three selects
SELECT count(*) FROM (SELECT a, b FROM big UNION SELECT v, v % 100 FROM other UNION SELECT id, b FROM small) s;
