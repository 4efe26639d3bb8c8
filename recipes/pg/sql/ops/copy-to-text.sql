-- COPY TO (text format) of 5,000 rows
COPY (SELECT id, a, name, price, ts FROM big WHERE id <= 5000) TO STDOUT;
