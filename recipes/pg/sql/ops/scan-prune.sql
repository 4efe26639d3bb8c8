-- on-access pruning: the first scan after update-hot finds every page nearly full of dead versions and prunes it
-- (heap_page_prune_opt), then counts the live rows
SELECT count(*), sum(v) FROM hot;
