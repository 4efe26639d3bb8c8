-- planning an 8-way join (exhaustive join search, from_collapse_limit 8), not executing it
EXPLAIN SELECT * FROM j1, j2, j3, j4, j5, j6, j7, j8 WHERE j1.j2 = j2.id AND j2.j3 = j3.id AND j3.j4 = j4.id AND j4.j5 = j5.id AND j5.j6 = j6.id AND j6.j7 = j7.id AND j7.j8 = j8.id AND j8.j1 = j1.id AND j1.v < 50;
