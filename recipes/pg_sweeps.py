"""pg-sweeps: build a PostgreSQL release and run the seeds' client-count sweeps (profiles/sweeps.json).

For release tags, not every commit (about 15 min per version on 2 cores): enable it on a builder that measures
tags, and the site's archaeology page draws throughput vs clients per release from what it stores.
"""

from __future__ import annotations

from recipes.pg.recipe import make_recipe

# Bump the version when results stop being comparable (the config hash already covers the profile's data).
RECIPE = make_recipe("sweeps", name="pg-sweeps", version=1)
