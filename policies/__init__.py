"""simreal.policies: training (PPO on Brax; stable-baselines3 and rsl_rl drivers), checkpoints,
evaluation and export.

``simreal.sim`` is imported first: it loads MuJoCo's MJX with its optional-Warp notice kept
off stdout, before Brax imports MJX itself.
"""

import simreal.sim  # noqa: F401
