-- COPY FROM a binary file of 5,000 rows
COPY copy_dst FROM 'ops-copy.bin' (FORMAT binary);
