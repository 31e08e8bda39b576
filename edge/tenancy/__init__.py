"""edge/tenancy."""
