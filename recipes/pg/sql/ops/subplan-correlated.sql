-- a correlated subquery run once per outer row (SubPlan over an index scan), 500 times
SELECT count(*) FROM small s WHERE s.id <= 500 AND (SELECT max(c) FROM big b WHERE b.a = s.id) > 5000;
