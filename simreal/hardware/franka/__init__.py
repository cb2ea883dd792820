"""Franka Panda / FR3 through franky: driver and twin."""
