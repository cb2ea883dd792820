"""The env contract: functional, batched, Brax-trainable, one task on every physics backend.

``reset(rng) -> State`` and ``step(state, action) -> State`` are written for one env and
vmapped by the trainer (Brax style); ``State`` is Brax's (``pipeline_state`` holds the
backend's :class:`PhysState`; ``obs``, ``reward``, ``done``, ``metrics``, ``info``).

What :class:`MjEnv` does for every task, so tasks only say what is specific to them:

- **per-episode domain randomisation**: each reset draws new model parameters
  (``Task.randomize``) and a new action delay; done envs reset *inside* ``step`` with a
  fresh key (Brax's ``AutoResetWrapper`` would restore one cached first state instead);
- **action delay**: ``d`` control periods, uniform in ``[action_delay_steps[0],
  action_delay_steps[1]]`` per episode and not a whole number in general (a link's
  latency is not quantised to the control period). With ``d = k + f`` (``k`` whole,
  ``0 <= f < 1``) the command of step ``t - k`` acts for the last ``1 - f`` of the period
  and that of ``t - k - 1`` for the first ``f``; the period is given their average,
  ``(1 - f) a_{t-k} + f a_{t-k-1}``, exact for the impulse a period delivers through
  actuators linear over it, and a first-order approximation otherwise;
- **observation noise**: Gaussian, per-term standard deviations from the task;
- **disturbances**: ``perturb`` may change the physics state before a step (pushes);
- **rewards**: a table of tiny named terms, each weighted by ``reward_scales`` and
  multiplied by the control period, logged as ``reward/<name>``; a term learned or scored
  outside the task (a reward model, ``simreal.rewards.learned``) joins the table through
  :meth:`MjEnv.add_reward_term`, a function of the physics state and task info after the step;
- **episode statistics** (success, crash, RMSE...) reported at episode end as
  ``episode/<name>`` multiplied by the done flag, plus ``episode/done``;
- **termination causes**: a task names its failure conditions (``termination_causes``: a
  fall, a crash, drifting off the reference) and the episode ends where any holds, or where
  the simulation diverged (``nonfinite``: a NaN position, as MJX's state becomes and as the
  native backend marks an env MuJoCo's C engine had to reset; that step's reward is 0 and the
  episode's counted statistics are undefined, as a crash's). Each is reported as the
  statistic ``end_<cause>``: the fraction of ended episodes it ended (causes may coincide; an
  episode that ran to its time limit has none): where a policy stops improving, what its
  episodes end on.

The physics engine is ``self.physics`` (a :class:`Backend`); ``self.backend`` is its name,
as Brax's ``Env`` defines it. ``info['truncation']`` is 1 where an episode ended on its time limit rather than a
failure, which Brax's PPO uses to avoid bootstrapping through time-outs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
from brax.envs.base import Env as BraxEnv
from brax.envs.base import State

from simreal.config import field
from simreal.observations import build_observation
from simreal.robot_spec import RobotSpec
from simreal.sim import episode_stats
from simreal.sim.backends.base import Backend, InnerLoop, ModelParams, PhysState, make_backend
from simreal.sim.deployment import Deployment
from simreal.sim.episode_stats import COUNT_SUFFIX, EpisodeStat, Sample


def delay_range(steps: tuple[float, ...]) -> tuple[float, float]:
    """``env.action_delay_steps`` as (min, max) control periods: ``[]`` is no delay, ``[d]`` a fixed
    one; a ConfigError naming the key for more than two values or min > max."""
    delay = tuple(float(x) for x in steps)
    if len(delay) > 2 or (len(delay) == 2 and delay[0] > delay[1]):
        from simreal.errors import ConfigError

        raise ConfigError(
            "env.action_delay_steps", f"expected [min, max] with min <= max (or one fixed value), got {list(delay)}"
        )
    lo, hi = (delay + (0.0, 0.0))[:2] if len(delay) != 1 else (delay[0], delay[0])
    return lo, hi


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """Settings every task has; tasks subclass this with their own fields."""

    episode_length_s: float = field(5.0, min=0.01, doc="episode time limit [s]")
    action_delay_steps: tuple[float, ...] = field(
        (0, 1), min=0.0, doc="(min, max) delay in control periods, uniform per episode"
    )
    obs_noise_scale: float = field(1.0, min=0.0, doc="multiplies the task's per-term noise std")
    randomize: bool = field(True, doc="domain randomisation on/off")
    reward_scales: dict[str, float] = field({}, doc="override weights of named reward terms")
    action_history_steps: int = field(
        0,
        min=0,
        doc="k actions before the last one the policy observes (term action_history, appended to the task's terms)",
    )
    obs_history_steps: int = field(
        1,
        min=1,
        doc="observation frames the policy sees, newest first (1: the current one only; a new episode "
        "fills the frames before its first with that first frame)",
    )


#: Env settings whose default changed, and the value a config saved without them (a run's
#: ``config.yaml``, a bundle's ``task_config``) was trained with: such a run is evaluated, resumed
#: and rehearsed as it was trained, not with today's default.
SAVED_WITHOUT: dict[str, Any] = {
    "slew_limit": False,  # on for arms since 2026-11-25; saves from before the field had no limit
}


def _diverged(phys: PhysState) -> jax.Array:
    """The ``nonfinite`` termination: a position that is not finite (MJX's state after a
    divergence; the native backend marks an env MuJoCo reset that way)."""
    return ~jnp.all(jnp.isfinite(phys.qpos))


def _undefined_where_diverged(final: Mapping[str, jax.Array], diverged: jax.Array) -> dict[str, jax.Array]:
    """Episode statistics with a diverged episode's counted ones undefined (value and count 0,
    :mod:`simreal.sim.episode_stats`) and any value that is not finite read as 0."""
    counted = {k[: -len(COUNT_SUFFIX)] for k in final if k.endswith(COUNT_SUFFIX)}
    return {
        k: jnp.where((diverged & (k in counted or k.endswith(COUNT_SUFFIX))) | ~jnp.isfinite(v), 0.0, v)
        for k, v in final.items()
    }


def _any(conditions: Mapping[str, jax.Array]) -> jax.Array:
    """Logical or of boolean scalars; False for none."""
    out = jnp.zeros((), jnp.bool_)
    for c in conditions.values():
        out = out | c
    return out


def as_saved(config_class: type, env: Mapping[str, Any]) -> dict[str, Any]:
    """A saved env config ``env`` of a task whose config is ``config_class``, completed with
    :data:`SAVED_WITHOUT` for every key that class has and the save lacks."""
    names = {f.name for f in dataclasses.fields(config_class)}
    return {**{k: v for k, v in SAVED_WITHOUT.items() if k in names and k not in env}, **env}


class MjEnv(BraxEnv):
    """Base of all simreal tasks; subclasses implement the hooks below (see module docstring)."""

    #: Observation terms in order (names from ``simreal.observations``).
    obs_terms: tuple[str, ...] = ()
    #: Default weights of the reward terms this task computes.
    reward_scales: Mapping[str, float] = {}
    #: Reward terms that only guide a policy learnt from scratch (approach the object, move
    #: smoothly): a residual over a base that already does the task trains without them (weight
    #: 0 unless ``env.reward_scales`` sets one), as ResiP trains its residual on the task reward
    #: alone. Over the scripted arm-push controller they turned the residual against the base:
    #: 0.906 -> 0.273 success in 176k env steps with them, 0.758-0.930 without (docs/benchmarks-log.md).
    shaping_terms: tuple[str, ...] = ()
    #: Clip each step's summed reward at zero (legged_gym's ``only_positive_rewards``): the penalties
    #: never outweigh the step, so ending an episode early never pays (a fall costs what the rest of
    #: the episode would have earned).
    only_positive_rewards: bool = False
    #: Standard deviation of observation noise per term (before ``obs_noise_scale``).
    obs_noise_std: Mapping[str, float] = {}
    #: Observation terms of the scene's state, noise-free and privileged (an end effector's and an
    #: object's position, a goal): what datasets record as ``observation.environment_state`` and
    #: what a learned reward may read. Empty: the task names none.
    environment_state_terms: tuple[str, ...] = ()
    #: Noise-free observation terms of a separate critic (asymmetric actor-critic). Declared, not
    #: set: a task without them lacks the attribute, read as
    #: ``getattr(env, "critic_obs_terms", None) or env.obs_terms``.
    critic_obs_terms: tuple[str, ...]

    def __init__(self, robot: RobotSpec, cfg: EnvConfig, backend: str = "auto"):
        self.robot = robot
        self.cfg = cfg
        self.mj_model = self.build_model()
        self.physics: Backend = make_backend(backend, self.mj_model)
        self.ctrl_dt = robot.control_dt_s
        sim_dt = float(self.mj_model.opt.timestep)
        self.n_substeps = max(1, round(self.ctrl_dt / sim_dt))
        self.episode_steps = max(1, round(cfg.episode_length_s / self.ctrl_dt))
        self.delay_range = delay_range(cfg.action_delay_steps)
        if cfg.action_history_steps:
            # the actor's terms and, where the task has a separate critic's, the critic's
            self.obs_terms = (*self.obs_terms, "action_history")
            if getattr(self, "critic_obs_terms", None):
                self.critic_obs_terms = (*self.critic_obs_terms, "action_history")
        self.scales = {**self.reward_scales, **cfg.reward_scales}
        unknown = set(cfg.reward_scales) - set(self.reward_scales)
        if unknown:
            from simreal.errors import ConfigError

            raise ConfigError(
                f"env.reward_scales.{sorted(unknown)[0]}",
                f"no such reward term; terms: {', '.join(sorted(self.reward_scales))}",
            )
        self._obs_sizes = self._measure_obs_sizes()
        self._added_terms: dict[str, Any] = {}

    # -- hooks for tasks -----------------------------------------------------------------------
    def build_model(self) -> mujoco.MjModel:
        """The task's MuJoCo model (default: the robot's)."""
        from simreal.sim.robots import build_model

        return build_model(self.robot)

    def nominal_params(self) -> ModelParams:
        """The randomised model fields at their nominal values (empty: nothing randomised)."""
        return {}

    def randomize(self, params: ModelParams, rng: jax.Array) -> ModelParams:
        """Pure per-episode randomisation of ``params`` (Playground style; default: none)."""
        return params

    def sample_initial(self, rng: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, dict[str, Any]]:
        """(qpos, qvel, act, task_info) of a new episode."""
        raise NotImplementedError

    def control(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> jax.Array:
        """Actuator controls from the applied action (default: the action itself), or, with an
        :attr:`inner_loop`, that loop's command."""
        return action

    def control_info(self, phys: PhysState) -> dict[str, jax.Array]:
        """Episode-start entries of ``info`` that :meth:`control` reads; ``{"last_ctrl": c0}`` makes
        :meth:`step` keep the last command applied there (a rate limit reads it). Default: none."""
        return {}

    def action_layout(self) -> dict[str, Any]:
        """The bundle's ``action`` section: how the normalised action maps to the physical
        command :meth:`control` applies (built from the table in :mod:`simreal.action_modes`)."""
        raise NotImplementedError(f"{type(self).__name__} defines no action layout")

    def deployment(self) -> Deployment:
        """What the robot side needs of the task besides the policy (:mod:`simreal.sim.deployment`:
        the bundle's task inputs, reference and topics, the rehearsal's start, whether an
        episode is judged where it ended). Default: nothing (fixed inputs, a sampled start)."""
        return Deployment()

    def perturb(self, phys: PhysState, info: Mapping[str, Any], rng: jax.Array) -> PhysState:
        """Disturb the physics state before a control step (random pushes); default: none."""
        return phys

    #: A controller below the policy at the physics rate (a flight controller's rate loop):
    #: ``control`` then returns its command (:class:`~simreal.sim.backends.base.InnerLoop`).
    inner_loop: InnerLoop | None = None
    #: Adapters that need the last observation of an ended episode (SB3, Gymnasium) set this:
    #: ``info['terminal_obs']`` then holds it (the observation before the auto-reset).
    record_terminal_obs: bool = False

    def robot_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        """The robot-state mapping read by observation terms (``simreal.observations``)."""
        raise NotImplementedError

    def observed_state(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        """:meth:`robot_state` plus what every env keeps of its own commands (``action_history``)."""
        return {**self.robot_state(phys, info), "action_history": info["action_history"]}

    def observe_extra(self, phys: PhysState, info: Mapping[str, Any], active: jax.Array) -> dict[str, jax.Array]:
        """Observations beside the state vector: camera images (``pixels/<camera>``), a noise-free
        ``privileged_state`` for an asymmetric critic (Brax's keys). With any, the observation is a
        dict holding them and the noisy state vector as ``state``; default: none (a flat vector).
        ``active`` (bool) marks envs whose observation will be used; a renderer may skip the others."""
        return {}

    def mocap_pos(self, info: Mapping[str, Any]) -> jax.Array:
        """Where the model's mocap bodies (goal markers the cameras see) stand this episode,
        (nmocap, 3) [m]; default: where the model puts them."""
        from simreal.sim.render import mocap_home

        return jnp.asarray(mocap_home(self.mj_model))

    def reward_terms(self, phys: PhysState, action: jax.Array, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        """Unweighted reward terms of one step."""
        raise NotImplementedError

    def termination_causes(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, jax.Array]:
        """The task's named failure conditions after a step (a crash, a fall, drifting off a
        reference), each a boolean scalar; the episode ends where any holds. Default: none (the
        episode runs to its time limit)."""
        return {}

    def terminated(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        """True where the episode fails: any of :meth:`termination_causes` (which ``step`` reads;
        a task overrides that, not this)."""
        return _any(self.termination_causes(phys, info))

    def _causes(self, phys: PhysState, info: Mapping[str, Any], diverged: jax.Array) -> dict[str, jax.Array]:
        """The task's termination causes and ``nonfinite`` (``diverged``: :func:`_diverged` of ``phys``)."""
        return {**self.termination_causes(phys, info), "nonfinite": diverged}

    def advance_task(self, info: dict[str, Any]) -> dict[str, Any]:
        """Update task info after a step (moving targets...); default: unchanged."""
        return info

    def stat_table(self) -> dict[str, EpisodeStat]:
        """The task's per-episode statistics as named terms (:mod:`simreal.sim.episode_stats`:
        which sample of :meth:`stat_samples`, reduced how, over which episodes); default: none."""
        return {}

    def stat_samples(self, phys: PhysState, info: Mapping[str, Any]) -> dict[str, Sample]:
        """The per-step samples :meth:`stat_table` reduces, after a step: a value, or (value,
        counted) where only some steps count; default: none."""
        return {}

    def init_stats(self) -> dict[str, Any]:
        """The statistics' accumulators at an episode's start."""
        return episode_stats.init_stats(self.stat_table())

    def update_stats(self, stats: Mapping[str, Any], phys: PhysState, info: Mapping[str, Any]) -> dict[str, Any]:
        """The accumulators after a step that ended in ``phys``."""
        return episode_stats.update_stats(self.stat_table(), stats, self.stat_samples(phys, info), info.get("step"))

    def final_stats(self, stats: Mapping[str, Any], terminated: jax.Array) -> dict[str, jax.Array]:
        """Each statistic of the episode that ended with accumulators ``stats``."""
        return episode_stats.final_stats(self.stat_table(), stats, terminated)

    # -- the contract ----------------------------------------------------------------------------
    @property
    def observation_size(self) -> int | Mapping[str, tuple[int, ...]]:
        """The observation's length (``obs_history_steps`` frames of :attr:`obs_layout`); a task
        with dict observations (images) gives each key's shape."""
        return self.cfg.obs_history_steps * sum(self._obs_sizes.values())

    @property
    def action_size(self) -> int:
        return self.mj_model.nu

    @property
    def backend(self) -> str:
        """Name of the physics backend ('native', 'mjx', ...)."""
        return self.physics.name

    @property
    def obs_layout(self) -> list[dict[str, Any]]:
        """[{name, size}] of one observation frame, in order, for the bundle (the observation is
        ``obs_history_steps`` such frames, newest first)."""
        return [{"name": n, "size": s} for n, s in self._obs_sizes.items()]

    @property
    def environment_state_layout(self) -> list[dict[str, Any]]:
        """[{name, size}] of :meth:`environment_state`, in order."""
        return self.layout_of(self.environment_state_terms)

    def layout_of(self, terms: tuple[str, ...]) -> list[dict[str, Any]]:
        """[{name, size}] of observation ``terms`` built from this task's robot state; KeyError
        naming a robot-state key the task lacks."""
        return [{"name": n, "size": s} for n, s in self._measure_obs_sizes(terms).items()]

    def environment_state(self, phys: PhysState, info: Mapping[str, Any]) -> jax.Array:
        """The noise-free vector of :attr:`environment_state_terms`, in order."""
        return build_observation(self.environment_state_terms, self.observed_state(phys, info), jnp)

    def add_reward_term(self, name: str, fn: Any, weight: float, task_weight: float = 1.0, every: int = 1) -> None:
        """Add the term ``name`` to the reward table, weighted by ``weight``; the task's own terms
        are rescaled by ``task_weight`` (0: the added term alone). ``fn(phys, info, due) -> ()`` scores
        the state after a step; it is asked at the first step of an episode and every ``every``-th after (``due`` True;
        a scorer may skip envs where it is False) and the steps between keep its last score.
        Logged as ``reward/<name>`` like the task's terms; call before the first ``reset`` is traced."""
        from simreal.errors import ConfigError

        if name in self.scales:
            raise ConfigError(f"reward.{name}", f"the task already has a reward term '{name}'")
        self.scales = {**{k: v * task_weight for k, v in self.scales.items()}, name: float(weight)}
        self._added_terms[name] = (fn, max(1, int(every)))

    def reset(self, rng: jax.Array) -> State:
        return self.reset_from(rng)

    def reset_from(
        self,
        rng: jax.Array,
        qpos: jax.Array | None = None,
        qvel: jax.Array | None = None,
        act: jax.Array | None = None,
        task: Mapping[str, Any] | None = None,
    ) -> State:
        """:meth:`reset`, with any of the initial ``qpos``, ``qvel``, ``act`` and task inputs
        (``target_pos_w``, ``command``, ...) given instead of sampled: a rehearsal's start,
        replayed in the training simulator."""
        rng, k_ep, k_obs = jax.random.split(rng, 3)
        given = {"qpos": qpos, "qvel": qvel, "act": act, "task": dict(task or {})}
        phys, info = self._new_episode(k_ep, jnp.bool_(True), given)
        info["rng"] = rng
        obs = self._stacked(self._observe(phys, info, k_obs), info, jnp.bool_(True))
        zero = jnp.zeros(())
        metrics = {f"reward/{k}": zero for k in self.scales}
        metrics.update({f"episode/{k}": zero for k in self.final_stats(self.init_stats(), jnp.bool_(False))})
        metrics.update({f"episode/end_{k}": zero for k in self._causes(phys, info, _diverged(phys))})
        metrics["episode/done"] = zero
        metrics["episode/return"] = zero
        metrics["episode/length"] = zero
        info["episode_metrics"] = {k: v for k, v in metrics.items() if k.startswith("episode/")}
        if self.record_terminal_obs:
            info["terminal_obs"] = obs
        state = State(pipeline_state=phys, obs=obs, reward=zero, done=zero, metrics=metrics, info=info)
        # Strong dtypes throughout: a weakly typed leaf (``jnp.full(n, 0.5)``) would come out of
        # ``step`` strongly typed, and a jitted training iteration would compile twice.
        return jax.tree.map(lambda x: x.astype(x.dtype), state)

    def step(self, state: State, action: jax.Array) -> State:
        info = dict(state.info)
        rng, k_reset, k_obs, k_push = jax.random.split(info["rng"], 4)
        action = jnp.clip(action, -1.0, 1.0)
        info["action_buffer"] = jnp.concatenate([action[None], info["action_buffer"][:-1]], axis=0)
        applied = self.applied_action(info)

        phys = self.perturb(state.pipeline_state, info, k_push)
        ctrl = self.control(phys, applied, info)
        if "last_ctrl" in info:  # a task whose command depends on the last one keeps it (:meth:`control_info`)
            info["last_ctrl"] = ctrl
        phys = self.physics.step(info["model_params"], phys, ctrl, self.n_substeps, self.inner_loop)

        info["step"] = info["step"] + 1
        info = self.advance_task(info)
        terms = self.reward_terms(phys, action, info)
        for k, (fn, every) in self._added_terms.items():
            due = (info["step"] - 1) % every == 0  # the first step of an episode, then every `every`-th
            terms[k] = info[f"last_score/{k}"] = jnp.where(due, fn(phys, info, due), info[f"last_score/{k}"])
        reward = self.ctrl_dt * sum(self.scales[k] * terms[k] for k in self.scales)
        if self.only_positive_rewards:
            reward = jnp.maximum(reward, 0.0)
        # a diverged step (``nonfinite``) scores 0, in every term; so does a reward that is not
        # finite. Zeroed after the sum: zeroing the terms first changes how XLA fuses the sum
        # (its rounding), and with it every training bit for bit.
        diverged = _diverged(phys)
        reward = jnp.where(diverged | ~jnp.isfinite(reward), 0.0, reward)
        terms = {k: jnp.where(diverged | ~jnp.isfinite(v), 0.0, v) for k, v in terms.items()}
        info["action_history"] = jnp.concatenate([info["last_action"][None], info["action_history"]])[:-1]
        info["last_action"] = action
        causes = self._causes(phys, info, diverged)
        terminated = _any(causes)
        truncated = (info["step"] >= self.episode_steps) & ~terminated
        done = terminated | truncated
        stats = self.update_stats(info["stats"], phys, info)
        info["stats"] = stats
        ep_return = info["episode_return"] + reward

        metrics = {f"reward/{k}": terms[k] for k in self.scales}
        donef = done.astype(jnp.float32)
        for k, v in _undefined_where_diverged(self.final_stats(stats, terminated), diverged).items():
            metrics[f"episode/{k}"] = v * donef
        for k, v in causes.items():  # which condition ended it (several may hold at once)
            metrics[f"episode/end_{k}"] = v.astype(jnp.float32) * donef
        metrics["episode/done"] = donef
        metrics["episode/return"] = ep_return * donef
        metrics["episode/length"] = info["step"] * donef
        info["episode_return"] = ep_return

        terminal = None
        if self.record_terminal_obs:
            terminal = self._stacked(self._observe(phys, info, k_obs, active=done), dict(info), jnp.bool_(False))
        if terminal is not None:
            # a diverged episode's last observation is NaN: zeros instead, as an off-policy learner
            # stores it as next_obs and masks its value by the done flag (NaN * 0 is NaN)
            terminal = jax.tree.map(lambda t: jnp.where(jnp.isfinite(t), t, 0), terminal)
        # Auto-reset with a fresh key: new randomisation, new initial state.
        phys_new, info_new = self._new_episode(k_reset, done)
        phys = jax.tree.map(lambda a, b: jnp.where(done, a, b), phys_new, phys)
        info = {
            k: (jax.tree.map(lambda a, b: jnp.where(done, a, b), info_new[k], v) if k in info_new else v)
            for k, v in info.items()
        }
        info["rng"] = rng
        info["truncation"] = truncated.astype(jnp.float32)
        info["episode_metrics"] = {k: v for k, v in metrics.items() if k.startswith("episode/")}
        obs = self._stacked(self._observe(phys, info, k_obs), info, done)
        if terminal is not None:
            # where no episode ended the two are one observation: keep the one computed for every env
            # (a renderer draws the terminal images of the ended episodes only)
            info["terminal_obs"] = jax.tree.map(lambda t, o: jnp.where(done, t, o), terminal, obs)
        return state.replace(pipeline_state=phys, obs=obs, reward=reward, done=donef, metrics=metrics, info=info)

    def applied_action(self, info: Mapping[str, Any]) -> jax.Array:
        """The command acting over this control period under the episode's delay (module
        docstring): ``(1 - f) buf[k] + f buf[k + 1]`` with ``delay = k + f``, ``buf[0]`` the
        newest action."""
        k = jnp.floor(info["delay"]).astype(jnp.int32)
        f = info["delay"] - k
        buf = info["action_buffer"]
        return (1.0 - f) * buf[k] + f * buf[k + 1]

    # -- internals ------------------------------------------------------------------------------
    def _new_episode(
        self, rng: jax.Array, active: jax.Array, given: Mapping[str, Any] | None = None
    ) -> tuple[PhysState, dict[str, Any]]:
        k_init, k_dr, k_delay = jax.random.split(rng, 3)
        params = self.nominal_params()
        if self.cfg.randomize:
            params = self.randomize(params, k_dr)
        qpos, qvel, act, task_info = self.sample_initial(k_init)
        if given:
            qpos, qvel, act = (
                jnp.asarray(given[k], jnp.float32) if given[k] is not None else v
                for k, v in (("qpos", qpos), ("qvel", qvel), ("act", act))
            )
            task_info = {**task_info, **{k: jnp.asarray(v, jnp.float32) for k, v in given["task"].items()}}
        phys = self.physics.init(params, qpos, qvel, act, active)
        nu = self.action_size
        lo, hi = self.delay_range
        delay = jax.random.uniform(k_delay, (), minval=lo, maxval=hi) if self.cfg.randomize else jnp.full((), lo)
        info = {
            "model_params": params,
            "step": jnp.zeros((), jnp.int32),
            "delay": delay,
            "action_buffer": jnp.zeros((math.floor(hi) + 2, nu)),
            "last_action": jnp.zeros((nu,)),
            "action_history": jnp.zeros((self.cfg.action_history_steps, nu)),
            "truncation": jnp.zeros(()),
            "episode_return": jnp.zeros(()),
            "stats": self.init_stats(),
            **{f"last_score/{k}": jnp.zeros(()) for k in self._added_terms},
            **task_info,
            **self.control_info(phys),
        }
        return phys, info

    def _observe(
        self, phys: PhysState, info: Mapping[str, Any], rng: jax.Array, active: jax.Array | None = None
    ) -> jax.Array | dict[str, jax.Array]:
        obs = build_observation(self.obs_terms, self.observed_state(phys, info), jnp)
        if self.cfg.obs_noise_scale > 0 and self.obs_noise_std:
            std = jnp.concatenate([jnp.full((s,), self.obs_noise_std.get(n, 0.0)) for n, s in self._obs_sizes.items()])
            obs = obs + self.cfg.obs_noise_scale * std * jax.random.normal(rng, obs.shape)
        extra = self.observe_extra(phys, info, jnp.bool_(True) if active is None else active)
        return {"state": obs, **extra} if extra else obs

    def _stacked(self, obs: Any, info: dict[str, Any], fresh: jax.Array) -> Any:
        """``obs`` (this step's frame) stacked with the frames before it, newest first:
        ``[f_t, f_{t-1}, ..., f_{t-k+1}]`` with ``k = obs_history_steps``, the frames kept in
        ``info["obs_frames"]`` (k, frame) and updated in place; where ``fresh`` (a new episode)
        every frame is ``f_t``. With k = 1 the frame itself (a task with dict observations takes
        only that: ``__init__``)."""
        k = self.cfg.obs_history_steps
        if k == 1:
            return obs
        tiled = jnp.broadcast_to(obs, (k, obs.shape[-1]))
        if "obs_frames" in info:
            frames = jnp.where(fresh, tiled, jnp.concatenate([obs[None], info["obs_frames"][:-1]]))
        else:
            frames = tiled
        info["obs_frames"] = frames
        return frames.reshape(-1)

    def _measure_obs_sizes(self, names: tuple[str, ...] | None = None) -> dict[str, int]:
        """Size of each observation term ``names`` (default: the policy's ``obs_terms``)."""
        from simreal.observations import term

        names = self.obs_terms if names is None else names

        def sizes(rng):
            qpos, qvel, act, task_info = self.sample_initial(rng)
            phys = PhysState(qpos=qpos, qvel=qvel, act=act, sensordata=jnp.zeros((self.mj_model.nsensordata,)))
            info = {
                "last_action": jnp.zeros((self.action_size,)),
                "step": jnp.zeros((), jnp.int32),
                "action_history": jnp.zeros((self.cfg.action_history_steps, self.action_size)),
                **task_info,
            }
            s = self.observed_state(phys, info)
            return {n: term(n)(s, jnp) for n in names}

        shapes = jax.eval_shape(sizes, jax.random.PRNGKey(0))
        return {n: int(max(1, jnp.size(jnp.zeros(shapes[n].shape)))) for n in names}
