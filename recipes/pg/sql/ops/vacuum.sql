-- VACUUM of a 10,000-row table with a third of its rows deleted and two indexes
VACUUM vac;
