-- Sort of 10,000 rows that does not fit work_mem (64 kB): runs written to temporary files and merged
BEGIN; SET LOCAL work_mem = '64kB'; SELECT count(*), min(name), max(id) FROM (SELECT id, name, price FROM big ORDER BY price, name OFFSET 0) s; COMMIT;
