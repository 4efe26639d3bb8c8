-- foreign-key checks: 1,000 inserted rows, each looked up in the referenced table
INSERT INTO fk_child SELECT g, 1 + (g * 7) % 1000, g FROM generate_series(1, 1000) g;
