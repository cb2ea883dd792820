"""simreal.retarget."""
