"""simreal.hardware."""
