"""simreal.sim."""
