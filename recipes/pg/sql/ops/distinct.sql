-- SELECT DISTINCT on two columns: Unique over a Sort (hash aggregation off; setop-union dedupes by hashing)
BEGIN; SET LOCAL enable_hashagg = off; SELECT count(*) FROM (SELECT DISTINCT b, a % 50 FROM big) s; COMMIT;
