-- storing 30 values of 12 kB: pglz compression to about 2.5 kB and out-of-line TOAST storage
INSERT INTO toast_dst SELECT g, repeat((SELECT string_agg(md5((g * 7 + k)::text), '') FROM generate_series(1, 64) k), 6) FROM generate_series(1, 30) g;
