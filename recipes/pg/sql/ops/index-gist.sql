-- CREATE INDEX: GiST on 5,000 points
CREATE INDEX ON idx_geo USING gist (p);
