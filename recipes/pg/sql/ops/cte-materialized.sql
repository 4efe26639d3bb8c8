-- a MATERIALIZED CTE (CTE Scan) read twice
WITH per_b AS MATERIALIZED (SELECT b, count(*) AS n, sum(c) AS s FROM big GROUP BY b) SELECT count(*), sum(x.s * y.n) FROM per_b x JOIN per_b y ON y.b = (x.b + 1) % 100;
