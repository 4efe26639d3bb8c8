-- WITH RECURSIVE: 5,000 iterations of a recursive union
WITH RECURSIVE r(n, x) AS (SELECT 1, 1::bigint UNION ALL SELECT n + 1, (x * 31 + n) % 1000003 FROM r WHERE n < 5000) SELECT count(*), sum(x) FROM r;
