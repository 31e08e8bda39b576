"""edge/routing."""
