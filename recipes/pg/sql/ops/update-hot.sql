-- HOT UPDATE: 5,000 rows at fillfactor 50, each updated once in place (no indexed column changes), leaving a
-- dead version beside every live one for scan-prune
CREATE TABLE hot (id int PRIMARY KEY, v int NOT NULL) WITH (fillfactor = 50);
INSERT INTO hot SELECT g, 0 FROM generate_series(1, 5000) g;
UPDATE hot SET v = v + 1;
