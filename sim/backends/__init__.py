"""simreal.sim.backends."""
