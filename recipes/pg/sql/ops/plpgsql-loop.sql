-- a PL/pgSQL function with a loop, called 300 times
SELECT sum(collatz_steps(g)) FROM generate_series(1, 300) g;
