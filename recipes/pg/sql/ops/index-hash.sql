-- CREATE INDEX: hash on 10,000 integers
CREATE INDEX ON idx_int USING hash (a);
