"""The Unitree G1/H1 over unitree_hg DDS: driver, messages, twin."""
