CREATE INDEX ib_k1 ON ib (k1, k2);
CREATE INDEX ib_k2 ON ib (k2, k3);
CREATE INDEX ib_k3 ON ib (k3, pk);
