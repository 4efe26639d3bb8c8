"""Shared code and data of the PostgreSQL recipes (pg-quick, pg-full): build, server, workloads, A/B."""
