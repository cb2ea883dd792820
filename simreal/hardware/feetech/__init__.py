"""Feetech STS/SCS servo buses: the protocol, calibration, the SO-100/101 arm, the bus twin."""
