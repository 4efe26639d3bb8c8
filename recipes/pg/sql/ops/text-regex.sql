-- regular expressions: a match and a substring extraction on 4,000 strings
SELECT count(*), count(substring(doc FROM '[a-c]+ [k-o]{2}')) FROM words WHERE w ~ '^[a-h]+[m-p]{2}';
