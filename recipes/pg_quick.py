"""pg-quick: build any PostgreSQL commit and run the quick profile (recipes/pg/profiles/quick.json)."""

from __future__ import annotations

from recipes.pg.recipe import make_recipe

# Bump the version when results stop being comparable (the config hash already covers the profile's data).
RECIPE = make_recipe("quick", name="pg-quick", version=1)
