INSERT INTO ib (k1, k2, k3, pad)
SELECT (random() * 1000000)::int, (random() * 1000000)::int, (random() * 1000000)::int, repeat('x', 100)
FROM generate_series(1, :batch);
