-- jsonb operators: containment, field and path extraction
SELECT count(*), sum((body #>> '{nested,a}')::int) FROM js WHERE body @> '{"kind": "k3"}' OR (body ->> 'id')::int % 10 = 0 OR body ? 'missing';
