"""Demonstrations: teachers, the recording of a batch of episodes, arm IK, scripted controllers as bundles."""
