"""Recipes: build-and-bench procedures that run on workers (standard library only, shipped per build)."""
