-- sorting 4,000 strings with a libc collation (strcoll) instead of C byte order
SELECT count(*), min(w), max(w) FROM (SELECT w FROM words ORDER BY w COLLATE ops_c_utf8 OFFSET 0) s;
