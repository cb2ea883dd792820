"""Learning from demonstrations: behaviour cloning and its actor, ACT and flow-matching heads, offline RL (IQL)."""
