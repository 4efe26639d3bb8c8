"""Find recipes by name: every module in this package that defines RECIPE (adding a recipe is adding a file)."""

from __future__ import annotations

import importlib
import pkgutil

import recipes
from recipes.api import Recipe

_INFRASTRUCTURE = {"api", "registry", "result", "runner", "__main__"}


class UnknownRecipe(LookupError):
    """No recipe module defines that name."""


def discover() -> dict[str, Recipe]:
    """All recipes in the package, by name; a module whose RECIPE is malformed is an error, not skipped."""
    found: dict[str, Recipe] = {}
    for info in pkgutil.iter_modules(recipes.__path__):
        if info.name in _INFRASTRUCTURE or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"recipes.{info.name}")
        recipe = getattr(module, "RECIPE", None)
        if recipe is None:
            continue  # a helper module shared by recipes
        if not isinstance(recipe, Recipe):
            raise TypeError(f"recipes/{info.name}.py: RECIPE must be a recipes.api.Recipe")
        if recipe.name in found:
            raise ValueError(f"recipes/{info.name}.py: recipe name {recipe.name!r} is already defined")
        found[recipe.name] = recipe
    return found


def get(name: str) -> Recipe:
    """The recipe called `name`, or UnknownRecipe listing the ones that exist."""
    all_recipes = discover()
    if name not in all_recipes:
        raise UnknownRecipe(f"no recipe named {name!r}; known recipes: {', '.join(sorted(all_recipes))}")
    return all_recipes[name]
