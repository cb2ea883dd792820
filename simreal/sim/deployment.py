"""What the robot side needs of a task besides its policy: one object a task returns.

A trained task is deployed as a bundle (``simreal/bundle.py``) and rehearsed against its
training simulator (``simreal deploy sim``). The task decides five things there, and
:meth:`simreal.sim.env.MjEnv.deployment` returns them together as a :class:`Deployment`:

- ``task_params``: the task's fixed inputs on the robot (a hover point, a default command),
  written into the bundle; also the task info of the deployed episode.
- ``reference``: its time-varying inputs (a figure-8, a motion command, a gait clock) as the
  robot side plays them back from the hand-over (:mod:`simreal.reference`); None when every
  input is fixed.
- ``task_topics``: topics the deployment reads beside the robot's own state (a goal pose, an
  object's pose), bundle ``task_topics`` entries.
- ``initial``: the deployed episode's initial state, ``rng -> (qpos, qvel, act, task_info)``:
  where the rehearsal's robot starts (a clip's first frame, standing at home); None: a sampled
  episode, its task inputs then replaced by ``task_params``.
- ``judged_at_end``: the episode's outcome follows from the state it ended in and its task
  inputs alone (its statistics' samples read nothing else, and need no history), so a rehearsal can
  judge where it ended (:func:`final_outcome`: an arm's reach against its goal).

The action's layout is not here: training reads it too (``MjEnv.action_layout``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from simreal.reference import Reference

if TYPE_CHECKING:
    from simreal.sim.backends.base import PhysState
    from simreal.sim.env import MjEnv

InitialState = tuple[jax.Array, jax.Array, jax.Array, dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Deployment:
    """The task's deployment facts (module docstring)."""

    task_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reference: Reference | None = None
    task_topics: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    initial: Callable[[jax.Array], InitialState] | None = None
    judged_at_end: bool = False


def deployed_initial(env: MjEnv, deployment: Deployment, rng: jax.Array) -> InitialState:
    """(qpos, qvel, act, task_info) where the deployed episode starts: ``deployment.initial``, or a
    sampled episode of ``env``."""
    return (deployment.initial or env.sample_initial)(rng)


def final_outcome(
    env: MjEnv, deployment: Deployment, phys: PhysState, task: Mapping[str, Any]
) -> dict[str, float] | None:
    """``env.final_stats`` of an episode that ended in ``phys`` (not terminated) with task inputs
    ``task``; None unless ``deployment.judged_at_end``."""
    if not deployment.judged_at_end:
        return None
    stats = env.update_stats(env.init_stats(), phys, dict(task))
    return {k: float(v) for k, v in env.final_stats(stats, jnp.bool_(False)).items()}
