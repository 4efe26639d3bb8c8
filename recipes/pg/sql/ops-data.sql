-- perffarm operation suite: the data set (recipes/pg/operations.py, docs/recipes-postgres.md#the-operation-suite).
-- Loaded once per run into its own database (perffarm_ops) by a normal server, before the data directory is
-- copied for the instruction counts; the suite's operations then run on that copy under callgrind.
-- Deterministic: every value comes from generate_series, arithmetic and md5() of the row number (no random()).
-- Sized for callgrind (~50x slower than native): no table an operation scans has more than 30,000 rows, which is
-- also what makes ANALYZE read every row (default_statistics_target 100 samples 300 x 100 rows), so the planner's
-- statistics, and with them the plans and the sizes of hash tables, are the same on every run.

SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';

CREATE COLLATION ops_c_utf8 (provider = libc, locale = 'C.UTF-8');

-- a fact table and its dimensions: scans, joins, sorts, aggregates, windows, subqueries, set operations
CREATE TABLE big (
    id int PRIMARY KEY,
    a int NOT NULL,        -- 0..999, scattered
    b int NOT NULL,        -- 0..99
    c int NOT NULL,        -- 0..9,999, scattered
    small_id int NOT NULL, -- 1..1,000
    name text NOT NULL,    -- 16 letters
    price numeric(12, 2) NOT NULL,
    ratio float8 NOT NULL,
    ts timestamptz NOT NULL
);
INSERT INTO big
SELECT g, (g * 7919) % 1000, g % 100, (g * 104729) % 10000, 1 + (g * 31) % 1000,
       translate(substr(md5(g::text), 1, 16), '0123456789', 'ghijklmnop'),
       ((g * 7907) % 100000) / 100.0, ((g * 6971) % 100003) / 1013.0,
       timestamptz '2020-01-01 00:00:00+00' + (g * 3607) * interval '1 second'
FROM generate_series(1, 10000) g;
CREATE INDEX big_a ON big (a);
CREATE INDEX big_c ON big (c);

CREATE TABLE small (id int PRIMARY KEY, b int NOT NULL, label text NOT NULL);
INSERT INTO small SELECT g, g % 100, 'label ' || g FROM generate_series(1, 1000) g;

CREATE TABLE other (id int PRIMARY KEY, big_id int NOT NULL, v int NOT NULL);
INSERT INTO other SELECT g, 1 + (g * 7) % 10000, g % 37 FROM generate_series(1, 10000) g;

-- tables for the many-way join the planner plans
CREATE TABLE j1 (id int PRIMARY KEY, j2 int, v int);
CREATE TABLE j2 (id int PRIMARY KEY, j3 int, v int);
CREATE TABLE j3 (id int PRIMARY KEY, j4 int, v int);
CREATE TABLE j4 (id int PRIMARY KEY, j5 int, v int);
CREATE TABLE j5 (id int PRIMARY KEY, j6 int, v int);
CREATE TABLE j6 (id int PRIMARY KEY, j7 int, v int);
CREATE TABLE j7 (id int PRIMARY KEY, j8 int, v int);
CREATE TABLE j8 (id int PRIMARY KEY, j1 int, v int);
INSERT INTO j1 SELECT g, g % 50, g FROM generate_series(1, 100) g;
INSERT INTO j2 SELECT g, g % 50, g FROM generate_series(1, 200) g;
INSERT INTO j3 SELECT g, g % 50, g FROM generate_series(1, 300) g;
INSERT INTO j4 SELECT g, g % 50, g FROM generate_series(1, 400) g;
INSERT INTO j5 SELECT g, g % 50, g FROM generate_series(1, 500) g;
INSERT INTO j6 SELECT g, g % 50, g FROM generate_series(1, 600) g;
INSERT INTO j7 SELECT g, g % 50, g FROM generate_series(1, 700) g;
INSERT INTO j8 SELECT g, g % 50, g FROM generate_series(1, 800) g;

-- partitioned tables: 16 range partitions of 625 rows (pruning), 256 hash partitions (planning)
CREATE TABLE parts (k int NOT NULL, v int NOT NULL, pad text NOT NULL) PARTITION BY RANGE (k);
DO $$
BEGIN
    FOR i IN 0..15 LOOP
        EXECUTE format('CREATE TABLE parts_%s PARTITION OF parts FOR VALUES FROM (%s) TO (%s)',
                       i, i * 625 + 1, (i + 1) * 625 + 1);
    END LOOP;
END $$;
INSERT INTO parts SELECT g, (g * 13) % 1000, substr(md5(g::text), 1, 8) FROM generate_series(1, 10000) g;
CREATE INDEX parts_v ON parts (v);

CREATE TABLE many (k int NOT NULL, v int NOT NULL) PARTITION BY HASH (k);
DO $$
BEGIN
    FOR i IN 0..255 LOOP
        EXECUTE format('CREATE TABLE many_%s PARTITION OF many FOR VALUES WITH (MODULUS 256, REMAINDER %s)', i, i);
    END LOOP;
END $$;
INSERT INTO many SELECT g, g % 10 FROM generate_series(1, 2560) g;

-- data types
CREATE TABLE words (id int PRIMARY KEY, w text NOT NULL, doc text NOT NULL);
INSERT INTO words
SELECT g, translate(substr(md5(g::text), 1, 10), '0123456789', 'ghijklmnop'),
       translate(md5(g::text) || ' ' || md5((g * 3)::text) || ' ' || substr(md5((g * 7)::text), 1, 12),
                 '0123456789abcdef', 'abcdefghij klmno')
FROM generate_series(1, 4000) g;
CREATE TABLE docs (id int PRIMARY KEY, doc tsvector NOT NULL);
INSERT INTO docs SELECT id, to_tsvector('simple', doc) FROM words;

CREATE TABLE js (id int PRIMARY KEY, body jsonb NOT NULL, body_text text NOT NULL);
INSERT INTO js
SELECT g, d, d::text
FROM (SELECT g, jsonb_build_object('id', g, 'name', md5(g::text), 'kind', 'k' || (g % 7),
                                   'tags', jsonb_build_array(g % 5, g % 11, 'x' || (g % 3)),
                                   'nested', jsonb_build_object('a', g % 100, 'b', (g % 13)::text, 'c', g * 1.5)) d
      FROM generate_series(1, 2000) g) s;

CREATE TABLE arrs (id int PRIMARY KEY, ints int[] NOT NULL, txts text[] NOT NULL);
INSERT INTO arrs
SELECT g, ARRAY[g % 10, g % 17, g % 31, (g * 7) % 100, (g * 11) % 50, g % 3, g % 5, g % 7],
       ARRAY['a' || (g % 10), 'b' || (g % 20), 'c' || (g % 30)]
FROM generate_series(1, 2000) g;

CREATE TABLE geo (id int PRIMARY KEY, p point NOT NULL);
INSERT INTO geo SELECT g, point((g * 7919) % 1000, (g * 104729) % 1000) FROM generate_series(1, 5000) g;

-- TOAST: 100 values of 12 kB that pglz compresses to about 2.5 kB (2 kB of md5 text, six times; pglz finds
-- repeats up to 4 kB back), still too large to stay in the row: stored compressed, out of line
CREATE TABLE toasted (id int PRIMARY KEY, body text NOT NULL);
INSERT INTO toasted
SELECT g, repeat((SELECT string_agg(md5((g * 1000 + k)::text), '') FROM generate_series(1, 64) k), 6)
FROM generate_series(1, 100) g;
CREATE TABLE toast_dst (id int PRIMARY KEY, body text NOT NULL);

-- targets of the writing operations (each sample starts from a pristine copy of this data)
CREATE TABLE ins (id int PRIMARY KEY, a int NOT NULL, name text NOT NULL);
CREATE INDEX ins_a ON ins (a);
CREATE TABLE upsert (id int PRIMARY KEY, v int NOT NULL);
INSERT INTO upsert SELECT g * 2, g FROM generate_series(1, 1000) g;
CREATE TABLE upd (id int PRIMARY KEY, a int NOT NULL, b int NOT NULL);
INSERT INTO upd SELECT g, (g * 7919) % 5000, g FROM generate_series(1, 10000) g;
CREATE INDEX upd_a ON upd (a);
CREATE TABLE del (id int PRIMARY KEY, a int NOT NULL, pad text NOT NULL);
INSERT INTO del SELECT g, g % 100, md5(g::text) FROM generate_series(1, 10000) g;
CREATE INDEX del_a ON del (a);
CREATE TABLE vac (id int PRIMARY KEY, a int NOT NULL, pad text NOT NULL);
INSERT INTO vac SELECT g, (g * 7919) % 10000, md5(g::text) FROM generate_series(1, 10000) g;
CREATE INDEX vac_a ON vac (a);

CREATE TABLE fk_parent (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO fk_parent SELECT g, 'p' || g FROM generate_series(1, 1000) g;
CREATE TABLE fk_child (id int PRIMARY KEY, parent_id int NOT NULL REFERENCES fk_parent (id), v int NOT NULL);

CREATE TABLE trig (id int PRIMARY KEY, v int NOT NULL, v2 int NOT NULL, note text);
CREATE FUNCTION trig_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.v2 := NEW.v * 2 + 1;
    IF NEW.v % 10 = 0 THEN
        NEW.note := 'tenth ' || NEW.v;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER trig_fill BEFORE INSERT ON trig FOR EACH ROW EXECUTE PROCEDURE trig_fill();

CREATE FUNCTION collatz_steps(n int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    x bigint := n;
    steps int := 0;
BEGIN
    WHILE x <> 1 LOOP
        IF x % 2 = 0 THEN x := x / 2; ELSE x := 3 * x + 1; END IF;
        steps := steps + 1;
    END LOOP;
    RETURN steps;
END $$;

CREATE TABLE copy_dst (id int, a int, name text, price numeric(12, 2), ts timestamptz);

-- copies of the same tables for CREATE INDEX (the index built by an operation is on a table no other reads)
CREATE TABLE idx_text AS SELECT id, name FROM big;
CREATE TABLE idx_int AS SELECT id, a FROM big;
CREATE TABLE idx_arr AS SELECT id, ints FROM arrs;
CREATE TABLE idx_geo AS SELECT id, p FROM geo;
CREATE TABLE idx_ts AS SELECT id, ts FROM big ORDER BY id;

-- the files the COPY FROM operations read, in the data directory (the suite names them relative to it); psql
-- variables set by recipes/pg/operations.py
COPY (SELECT id, a, name, price, ts FROM big WHERE id <= 5000 ORDER BY id) TO :'copy_text';
COPY (SELECT id, a, name, price, ts FROM big WHERE id <= 5000 ORDER BY id) TO :'copy_csv' (FORMAT csv);
COPY (SELECT id, a, name, price, ts FROM big WHERE id <= 5000 ORDER BY id) TO :'copy_binary' (FORMAT binary);

-- hint bits set, visibility map all-visible (index-only scans), statistics of every row
VACUUM (FREEZE, ANALYZE);
-- dead tuples for the VACUUM operation
DELETE FROM vac WHERE id % 3 = 0;
