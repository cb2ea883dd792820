"""simreal.rewards."""
