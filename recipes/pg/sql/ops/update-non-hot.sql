-- UPDATE of an indexed column (no HOT): 1,500 new row versions and index entries
UPDATE upd SET a = a + 1 WHERE id <= 1500;
