-- parsing 2,000 JSON documents from text into jsonb
SELECT count(*), sum(jsonb_array_length(body_text::jsonb -> 'tags')) FROM js;
