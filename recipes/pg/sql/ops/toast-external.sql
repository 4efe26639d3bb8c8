-- out-of-line TOAST storage without compression (STORAGE EXTERNAL): 100 values of 12 kB, each cut into chunks
-- of about 2 kB and inserted into the TOAST table with its index (toast_save_datum), after reading them back from
-- their compressed copies
CREATE TABLE toast_ext (id int PRIMARY KEY, body text NOT NULL);
ALTER TABLE toast_ext ALTER COLUMN body SET STORAGE EXTERNAL;
INSERT INTO toast_ext SELECT id, body FROM toasted;
