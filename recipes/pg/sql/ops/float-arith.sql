-- float8 arithmetic, sqrt, ln and power on 10,000 rows
SELECT count(*) FROM big WHERE sqrt(ratio * 3.5 + 1) + ln(ratio + 1) > power(ratio, 0.5) * 1.01;
