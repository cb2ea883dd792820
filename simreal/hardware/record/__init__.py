"""Teleoperated recording into LeRobot datasets, and the cameras it reads."""
