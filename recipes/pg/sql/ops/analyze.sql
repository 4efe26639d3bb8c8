-- ANALYZE of other: every one of its 10,000 rows sampled (fewer than 300 x default_statistics_target)
ANALYZE other;
