\set p random(:lo, :hi)
SELECT pk, k1, k2, k3 FROM ib WHERE pk = :p;
