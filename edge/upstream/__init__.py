"""edge/upstream."""
