-- Index Scan: 1,000 heap fetches in the order of big_a
SELECT count(*), sum(c) FROM (SELECT c FROM big WHERE a >= 100 ORDER BY a LIMIT 1000) s;
