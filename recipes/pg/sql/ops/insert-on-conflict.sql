-- INSERT ... ON CONFLICT DO UPDATE: 2,000 rows, half of them existing keys
INSERT INTO upsert SELECT g, -g FROM generate_series(1, 2000) g ON CONFLICT (id) DO UPDATE SET v = upsert.v + excluded.v;
