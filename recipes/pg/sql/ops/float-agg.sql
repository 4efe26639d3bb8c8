-- float8 aggregates: sum, avg, stddev, corr, regression
SELECT sum(ratio), avg(ratio), stddev_samp(ratio), corr(ratio, c), regr_slope(ratio, a) FROM big;
