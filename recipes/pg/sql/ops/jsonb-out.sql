-- printing 2,000 jsonb documents as text
SELECT count(*), sum(length(body::text)) FROM js;
