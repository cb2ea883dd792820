"""simreal.policies: training (PPO on Brax; stable-baselines3 and rsl_rl drivers), checkpoints,
evaluation and export.

``simreal.sim`` is imported first: it keeps MuJoCo's MJX optional-Warp notice off stdout,
before Brax imports MJX. Like every package ``__init__`` here it imports nothing heavy: the
verbs import JAX, Brax and MuJoCo inside ``run``.
"""

import simreal.sim  # noqa: F401
