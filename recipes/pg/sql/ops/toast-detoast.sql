-- reading 100 compressed out-of-line values of 12 kB: TOAST fetch and pglz decompression (|| needs the whole
-- value: octet_length alone reads only its TOAST header)
SELECT count(*), sum(octet_length(body || 'x')) FROM toasted;
