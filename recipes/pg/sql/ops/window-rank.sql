-- WindowAgg: rank() and row_number() over 100 partitions of 5,000 rows of big
SELECT count(*), sum(r), max(rn) FROM (SELECT rank() OVER w AS r, row_number() OVER w AS rn FROM big WHERE id <= 5000 WINDOW w AS (PARTITION BY b ORDER BY c)) s;
