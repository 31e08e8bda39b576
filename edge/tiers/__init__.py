"""edge/tiers."""
