DROP TABLE IF EXISTS ib;
CREATE TABLE ib (pk bigserial PRIMARY KEY, k1 int NOT NULL, k2 int NOT NULL, k3 int NOT NULL, pad text NOT NULL);
