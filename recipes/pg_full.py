"""pg-full: build any PostgreSQL commit and run the full profile for dedicated hardware (profiles/full.json)."""

from __future__ import annotations

from recipes.pg.recipe import make_recipe

# Bump the version when results stop being comparable (the config hash already covers the profile's data).
RECIPE = make_recipe("full", name="pg-full", version=1)
