"""simreal.deploy."""
