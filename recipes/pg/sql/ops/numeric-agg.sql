-- numeric aggregates: sum, avg, stddev, variance
SELECT sum(price), avg(price), stddev_samp(price), var_pop(price) FROM big;
