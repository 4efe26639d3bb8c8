-- LIKE and ILIKE patterns on 4,000 strings
SELECT count(*) FROM words WHERE w LIKE '%ab%' OR doc ILIKE '%h_k%' OR w LIKE 'g%n';
