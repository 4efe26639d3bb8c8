-- DELETE of 1,500 rows found through the primary key
DELETE FROM del WHERE id BETWEEN 2001 AND 3500;
