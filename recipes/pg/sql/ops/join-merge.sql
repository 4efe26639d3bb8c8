-- Merge Join of big and other in key order (both sides sorted by the join key; hash and nested loop are off)
BEGIN; SET LOCAL enable_hashjoin = off; SET LOCAL enable_nestloop = off; SELECT count(*), sum(o.v) FROM big b JOIN other o ON o.big_id = b.c + 1; COMMIT;
