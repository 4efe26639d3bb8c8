-- perffarm analytic queries: a TPC-H-derived data set (recipes/pg/operations.py, docs/recipes-postgres.md#analytic-queries).
-- Derived from the TPC-H schema and queries, NOT TPC-H: generated here in SQL, not by dbgen, at about scale
-- factor 0.001, and its figures are not comparable to any published TPC result.
-- Why SQL and not dbgen: the box reaches no network but package registries and Debian ships no dbgen; SQL needs no
-- tool on the worker, and it is deterministic: every value comes from generate_series, arithmetic and md5() of
-- the row number (never random()), so every run and every worker loads the same rows.
-- Sized for callgrind (~50x slower than native): lineitem about 6,000 rows, every table at most 30,000 rows, so
-- that ANALYZE reads every row (300 x default_statistics_target) and the planner's statistics, and with them the
-- plans the farm captures, are the same on every run.

SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';

CREATE TABLE region (r_regionkey int PRIMARY KEY, r_name text NOT NULL, r_comment text NOT NULL);
INSERT INTO region SELECT g - 1, (ARRAY['AFRICA', 'AMERICA', 'ASIA', 'EUROPE', 'MIDDLE EAST'])[g], md5(g::text)
FROM generate_series(1, 5) g;

CREATE TABLE nation (n_nationkey int PRIMARY KEY, n_name text NOT NULL, n_regionkey int NOT NULL, n_comment text NOT NULL);
INSERT INTO nation SELECT g - 1,
       (ARRAY['ALGERIA', 'ARGENTINA', 'BRAZIL', 'CANADA', 'EGYPT', 'ETHIOPIA', 'FRANCE', 'GERMANY', 'INDIA',
              'INDONESIA', 'IRAN', 'IRAQ', 'JAPAN', 'JORDAN', 'KENYA', 'MOROCCO', 'MOZAMBIQUE', 'PERU', 'CHINA',
              'ROMANIA', 'SAUDI ARABIA', 'VIETNAM', 'RUSSIA', 'UNITED KINGDOM', 'UNITED STATES'])[g],
       (ARRAY[0, 1, 1, 1, 4, 0, 3, 3, 2, 2, 4, 4, 2, 4, 0, 0, 0, 1, 2, 3, 4, 2, 3, 3, 1])[g], md5((g + 5)::text)
FROM generate_series(1, 25) g;

CREATE TABLE supplier (s_suppkey int PRIMARY KEY, s_name text NOT NULL, s_address text NOT NULL, s_nationkey int NOT NULL,
                       s_phone text NOT NULL, s_acctbal numeric(12, 2) NOT NULL, s_comment text NOT NULL);
INSERT INTO supplier SELECT g, 'Supplier#' || lpad(g::text, 9, '0'), substr(md5((g * 3)::text), 1, 20), (g * 7) % 25,
       (10 + (g * 7) % 25) || '-' || (100 + g % 900) || '-' || (1000 + (g * 37) % 9000),
       ((g * 7919) % 1100000) / 100.0 - 999.99,
       CASE WHEN g % 5 = 0 THEN 'Customer Complaints ' || md5(g::text) ELSE md5(g::text) END
FROM generate_series(1, 20) g;

CREATE TABLE part (p_partkey int PRIMARY KEY, p_name text NOT NULL, p_mfgr text NOT NULL, p_brand text NOT NULL,
                   p_type text NOT NULL, p_size int NOT NULL, p_container text NOT NULL, p_retailprice numeric(12, 2) NOT NULL,
                   p_comment text NOT NULL);
INSERT INTO part SELECT g,
       (ARRAY['almond', 'antique', 'blue', 'forest', 'green', 'khaki', 'lace', 'navy', 'olive', 'rose'])[1 + g % 10] || ' ' ||
       (ARRAY['burnished', 'chiffon', 'cream', 'green', 'ivory', 'linen', 'metallic', 'red', 'tan'])[1 + (g * 7) % 9],
       'Manufacturer#' || (1 + g % 5), 'Brand#' || (1 + g % 5) || (1 + (g / 5) % 5),
       (ARRAY['STANDARD', 'SMALL', 'MEDIUM', 'LARGE', 'ECONOMY', 'PROMO'])[1 + g % 6] || ' ' ||
       (ARRAY['ANODIZED', 'BURNISHED', 'PLATED', 'POLISHED', 'BRUSHED'])[1 + (g / 6) % 5] || ' ' ||
       (ARRAY['TIN', 'NICKEL', 'BRASS', 'STEEL', 'COPPER'])[1 + (g / 30) % 5],
       1 + (g * 13 + g / 7) % 50,
       (ARRAY['SM', 'LG', 'MED', 'JUMBO', 'WRAP'])[1 + (g / 3) % 5] || ' ' ||
       (ARRAY['CASE', 'BOX', 'BAG', 'JAR', 'PKG', 'PACK', 'CAN', 'DRUM'])[1 + (g / 5) % 8],
       900 + (g % 200) + g / 10.0, md5((g * 11)::text)
FROM generate_series(1, 400) g;

CREATE TABLE partsupp (ps_partkey int NOT NULL, ps_suppkey int NOT NULL, ps_availqty int NOT NULL,
                       ps_supplycost numeric(12, 2) NOT NULL, ps_comment text NOT NULL, PRIMARY KEY (ps_partkey, ps_suppkey));
INSERT INTO partsupp SELECT p, 1 + (p + s * 5) % 20, 1 + (p * 31 + s * 17) % 9999, 1 + ((p * 97 + s * 13) % 100000) / 100.0,
       md5((p * 4 + s)::text)
FROM generate_series(1, 400) p, generate_series(0, 3) s;

CREATE TABLE customer (c_custkey int PRIMARY KEY, c_name text NOT NULL, c_address text NOT NULL, c_nationkey int NOT NULL,
                       c_phone text NOT NULL, c_acctbal numeric(12, 2) NOT NULL, c_mktsegment text NOT NULL, c_comment text NOT NULL);
INSERT INTO customer SELECT g, 'Customer#' || lpad(g::text, 9, '0'), substr(md5((g * 5)::text), 1, 20), (g * 11) % 25,
       (10 + (g * 11) % 25) || '-' || (100 + g % 900) || '-' || (1000 + (g * 41) % 9000),
       ((g * 6971) % 1100000) / 100.0 - 999.99,
       (ARRAY['AUTOMOBILE', 'BUILDING', 'FURNITURE', 'HOUSEHOLD', 'MACHINERY'])[1 + g % 5], md5((g * 13)::text)
FROM generate_series(1, 300) g;

-- a third of the customers place no order (c_custkey % 3 = 0), as in TPC-H
CREATE TABLE orders (o_orderkey int PRIMARY KEY, o_custkey int NOT NULL, o_orderstatus text NOT NULL,
                     o_totalprice numeric(12, 2) NOT NULL, o_orderdate date NOT NULL, o_orderpriority text NOT NULL,
                     o_clerk text NOT NULL, o_shippriority int NOT NULL, o_comment text NOT NULL);
INSERT INTO orders SELECT g, CASE WHEN c % 3 = 0 THEN c + 1 ELSE c END,
       CASE WHEN g % 2 = 0 THEN 'F' WHEN g % 5 = 1 THEN 'P' ELSE 'O' END,
       1000 + ((g * 7907) % 400000) / 1.0, date '1992-01-01' + (g * 7919) % 2400,
       (ARRAY['1-URGENT', '2-HIGH', '3-MEDIUM', '4-NOT SPECIFIED', '5-LOW'])[1 + g % 5], 'Clerk#' || lpad((1 + g % 10)::text, 9, '0'), 0,
       CASE WHEN g % 17 = 0 THEN 'special ' || md5(g::text) || ' requests' ELSE md5(g::text) END
FROM (SELECT g, 1 + (g * 37) % 299 AS c FROM generate_series(1, 1500) g) o;

-- 1 to 7 lines per order (4 on average): about 6,000 rows
CREATE TABLE lineitem (l_orderkey int NOT NULL, l_partkey int NOT NULL, l_suppkey int NOT NULL, l_linenumber int NOT NULL,
                       l_quantity numeric(12, 2) NOT NULL, l_extendedprice numeric(12, 2) NOT NULL, l_discount numeric(12, 2) NOT NULL,
                       l_tax numeric(12, 2) NOT NULL, l_returnflag text NOT NULL, l_linestatus text NOT NULL, l_shipdate date NOT NULL,
                       l_commitdate date NOT NULL, l_receiptdate date NOT NULL, l_shipinstruct text NOT NULL, l_shipmode text NOT NULL,
                       l_comment text NOT NULL, PRIMARY KEY (l_orderkey, l_linenumber));
INSERT INTO lineitem SELECT o.o_orderkey, p, 1 + (p + (o.o_orderkey % 4) * 5) % 20, n, q, q * (900 + (p % 200) + p / 10.0),
       (o.o_orderkey * n % 11) / 100.0, (o.o_orderkey * n % 9) / 100.0,
       CASE WHEN o.o_orderdate + 1 + (o.o_orderkey * n * 31) % 121 <= date '1995-06-17' THEN (ARRAY['R', 'A'])[1 + (o.o_orderkey + n) % 2] ELSE 'N' END,
       CASE WHEN o.o_orderdate + 1 + (o.o_orderkey * n * 31) % 121 > date '1995-06-17' THEN 'O' ELSE 'F' END,
       o.o_orderdate + 1 + (o.o_orderkey * n * 31) % 121, o.o_orderdate + 30 + (o.o_orderkey * n * 17) % 61,
       o.o_orderdate + 2 + (o.o_orderkey * n * 31) % 121 + (o.o_orderkey + n) % 30,
       (ARRAY['DELIVER IN PERSON', 'COLLECT COD', 'NONE', 'TAKE BACK RETURN'])[1 + (o.o_orderkey + n) % 4],
       (ARRAY['REG AIR', 'AIR', 'RAIL', 'SHIP', 'TRUCK', 'MAIL', 'FOB'])[1 + (o.o_orderkey * 3 + n) % 7], md5((o.o_orderkey * 8 + n)::text)
FROM orders o, generate_series(1, 7) n, LATERAL (SELECT 1 + (o.o_orderkey * 13 + n * 7) % 400 AS p, 1 + (o.o_orderkey + n * 3) % 50 AS q) x
WHERE n <= 1 + (o.o_orderkey * 5) % 7;

CREATE INDEX lineitem_part ON lineitem (l_partkey, l_suppkey);
CREATE INDEX orders_cust ON orders (o_custkey);
CREATE INDEX orders_date ON orders (o_orderdate);
CREATE INDEX customer_nation ON customer (c_nationkey);
CREATE INDEX supplier_nation ON supplier (s_nationkey);
VACUUM ANALYZE;
