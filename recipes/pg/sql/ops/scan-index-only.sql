-- Index Only Scan of the primary key (the visibility map is all-visible after the data set's VACUUM)
SELECT count(*), sum(id) FROM big WHERE id BETWEEN 1001 AND 9000;
