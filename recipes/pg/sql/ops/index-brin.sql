-- CREATE INDEX: BRIN on 10,000 timestamps in physical order
CREATE INDEX ON idx_ts USING brin (ts);
