"""Teleoperation: the teleoperator contract, input devices, leader arms, end-effector jog."""
