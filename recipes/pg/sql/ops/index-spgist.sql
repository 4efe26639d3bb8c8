-- CREATE INDEX: SP-GiST (quad tree) on 5,000 points
CREATE INDEX ON idx_geo USING spgist (p);
