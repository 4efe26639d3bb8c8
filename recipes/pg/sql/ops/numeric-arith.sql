-- numeric addition, subtraction, multiplication, division, rounding and comparison on 10,000 rows
SELECT count(*) FROM big WHERE round((price + 2.5) * 1.0725 / 3, 4) > 150.5 OR price - 17.25 < 0;
