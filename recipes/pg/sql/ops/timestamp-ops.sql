-- timestamps: date_trunc, extract, interval arithmetic and to_char on 4,000 values
SELECT count(DISTINCT date_trunc('week', ts)), sum(extract(dow FROM ts + interval '1 month 3 days')), max(to_char(ts, 'YYYY-MM-DD HH24:MI:SS')) FROM big WHERE id <= 4000;
