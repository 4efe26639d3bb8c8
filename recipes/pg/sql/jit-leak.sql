SELECT l.id,
       (SELECT count(*) FROM leak_test x WHERE x.id = l.id) AS x_result,
       (SELECT count(*) FROM leak_test y WHERE y.id = l.id) AS y_result
FROM leak_test l WHERE l.id <= :rows;
