"""simreal.policies."""
