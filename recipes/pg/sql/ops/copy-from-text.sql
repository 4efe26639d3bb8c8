-- COPY FROM a text-format file of 5,000 rows (written by the data set)
COPY copy_dst FROM 'ops-copy.txt';
