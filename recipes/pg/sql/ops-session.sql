-- perffarm operation suite: the first line of every session (its instructions are counted and discarded).
-- Fixed settings, whatever the machine's defaults, and the first use of what every later operation needs
-- (catalog caches, the PL/pgSQL library), so that no operation pays the session's start-up.
-- track_counts off: the per-relation statistics a backend keeps pending are flushed at most once a second between
-- queries, so with them on an operation's count depended on how long the one before it took (up to 0.01% here).
SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET extra_float_digits = 1; SET track_counts = off; DO $$BEGIN NULL; END$$; SELECT count(*) FROM pg_class;
