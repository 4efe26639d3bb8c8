-- CREATE INDEX: btree on 10,000 text values
CREATE INDEX ON idx_text (name);
