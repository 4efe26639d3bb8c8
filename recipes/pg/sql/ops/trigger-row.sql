-- a PL/pgSQL BEFORE INSERT row trigger fired for 1,000 rows
INSERT INTO trig (id, v) SELECT g, g FROM generate_series(1, 1000) g;
