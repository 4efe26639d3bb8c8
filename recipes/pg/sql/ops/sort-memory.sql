-- Sort of 10,000 rows by text in memory (quicksort, abbreviated keys)
SELECT count(*), min(name), max(id) FROM (SELECT id, name FROM big ORDER BY name, id OFFSET 0) s;
