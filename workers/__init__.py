"""Worker provisioning and host facts (hostinfo is shipped to workers with the recipes)."""
