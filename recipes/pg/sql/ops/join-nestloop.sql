-- Nested Loop: 200 rows of small, each probing big through its index on a (hash and merge joins are off)
BEGIN; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; SELECT count(*), sum(b.c) FROM small s JOIN big b ON b.a = s.id WHERE s.b < 20; COMMIT;
