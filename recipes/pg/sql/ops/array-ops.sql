-- arrays: containment, overlap, ANY, subscripts and array_length on 2,000 rows
SELECT count(*), sum(ints[3]), sum(array_length(ints, 1)) FROM arrs WHERE ints @> ARRAY[3] OR ints && ARRAY[41, 42] OR 'b7' = ANY (txts);
