"""simreal.sim.tasks."""
