-- Bitmap Index Scans of two indexes, BitmapOr, Bitmap Heap Scan with a recheck
SELECT count(*), sum(b) FROM big WHERE a < 150 OR c < 1500;
