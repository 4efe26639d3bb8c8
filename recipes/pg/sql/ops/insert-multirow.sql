-- INSERT of 2,000 rows in one statement into a table with two indexes
INSERT INTO ins SELECT g, (g * 7919) % 1000, 'row ' || g FROM generate_series(1, 2000) g;
