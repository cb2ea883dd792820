"""Reinforcement learning on Brax's building blocks: PPO and SAC, each one readable loop with resumable state."""
