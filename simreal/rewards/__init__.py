"""simreal.rewards: what a task is rewarded with.

``terms``: the reward terms the tasks share, tiny named functions of jax arrays (action rate,
exponential tracking kernels, alive, orientation, torques, feet air time...), weighted by each
task's ``reward_scales`` and logged per term as ``reward/<name>``.

Dependencies: ``simreal`` core <- ``rewards`` <- ``sim`` (the tasks import the terms) <-
``policies``. Nothing here imports ``simreal.sim``; ``terms`` needs only jax. This file imports
no submodule, so the tasks' ``from simreal.rewards import terms`` loads no reward model.
"""
