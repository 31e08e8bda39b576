"""edge/http."""
