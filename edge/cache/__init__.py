"""edge/cache."""
