-- COPY FROM a CSV file of 5,000 rows
COPY copy_dst FROM 'ops-copy.csv' (FORMAT csv);
