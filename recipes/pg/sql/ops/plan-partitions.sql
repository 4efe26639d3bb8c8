-- planning a query over 256 hash partitions that none can be pruned from, not executing it
EXPLAIN SELECT k, v FROM many WHERE v = 3 ORDER BY k;
