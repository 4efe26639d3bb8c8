-- WindowAgg with a moving frame: sum and avg over the 10 preceding rows, 5,000 rows
SELECT count(*), sum(m), max(av) FROM (SELECT sum(c) OVER w AS m, avg(c) OVER w AS av FROM big WHERE id <= 5000 WINDOW w AS (ORDER BY id ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)) s;
