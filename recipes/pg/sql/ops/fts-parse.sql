-- full-text search: to_tsvector of 1,500 documents (parser and dictionary)
SELECT count(*), sum(length(to_tsvector('simple', doc))) FROM words WHERE id <= 1500;
