-- Hash Join of two 10,000-row tables (the hash table built on one side, probed by the other)
SELECT count(*), sum(o.v), sum(b.c) FROM big b JOIN other o ON o.big_id = b.id WHERE o.v <> b.b;
