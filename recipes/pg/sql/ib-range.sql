\set k random(0, 1000000)
SELECT k1, k2 FROM ib WHERE k1 >= :k ORDER BY k1 LIMIT 10;
