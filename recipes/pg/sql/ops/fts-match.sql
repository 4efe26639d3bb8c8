-- full-text search: a tsquery matched against 4,000 tsvectors, and ranking
SELECT count(*), sum(ts_rank(doc, q)) FROM docs, to_tsquery('simple', 'aba:* | (bdc:* & !cj:*)') q WHERE doc @@ q;
