-- CREATE INDEX: GIN on 2,000 integer arrays of 8 elements
CREATE INDEX ON idx_arr USING gin (ints);
