-- TPC-H-derived Q17: Small-quantity-order revenue: a correlated average per part
-- (derived from TPC-H, parameters fixed; not comparable to published TPC results)
SELECT sum(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem, part
WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED PACK'
AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey);
