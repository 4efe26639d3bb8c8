-- comparing 8,000 strings with a libc collation (strcoll per comparison, no sort and no abbreviated keys)
SELECT count(*) FROM words WHERE w COLLATE ops_c_utf8 > 'm' OR doc COLLATE ops_c_utf8 < 'f';
