"""perffarm master: a pure core (settings, store, ingest, detect, ...) and thin Buildbot adapters."""
