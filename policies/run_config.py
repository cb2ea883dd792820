"""The resolved configuration of a training run, from ``configs/tasks/<task>.yaml`` + overrides.

A task YAML::

    task: quadrotor-hover
    robot: crazyflie2          # name in configs/robots, or a path to a robot YAML
    seed: 0
    backend: auto              # auto | native | mjx | mjx-warp
    trainer: brax              # brax (JAX PPO here) | rsl_rl | sb3 (torch, through the adapters)
    env: {...}                 # the task's config class (e.g. HoverConfig)
    train: {...}               # PPOConfig
    eval: {...}                # EvalConfig

Every key is validated where it is built; errors name the dotted key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simreal.config import build, configs_dir, deep_merge, field, parse_overrides, to_dict
from simreal.errors import ConfigError, UnknownNameError
from simreal.policies import trainers
from simreal.robot_spec import RobotSpec, load_robot_spec
from simreal.sim.backends.base import BACKENDS
from simreal.sim.tasks import TASKS, task_class
from simreal.yaml_io import load_yaml


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters (Brax's loss; names follow the paper and Brax)."""

    num_envs: int = field(256, min=1)
    num_timesteps: int = field(5_000_000, min=1, doc="env-step budget")
    unroll_length: int = field(16, min=1)
    num_minibatches: int = field(4, min=1)
    num_updates_per_batch: int = field(5, min=1, doc="epochs over each batch")
    learning_rate: float = field(1e-3, min=0.0)
    learning_rate_end: float | None = field(None, min=0.0, doc="linear decay to this over num_timesteps (None: constant)")
    entropy_cost: float = field(1e-3, min=0.0)
    discounting: float = field(0.99, min=0.0, max=1.0)
    gae_lambda: float = field(0.95, min=0.0, max=1.0)
    clipping_epsilon: float = field(0.2, min=0.0)
    max_grad_norm: float = field(1.0, min=0.0)
    reward_scaling: float = field(1.0, min=0.0)
    normalize_observations: bool = field(True)
    policy_hidden: tuple[int, ...] = field((64, 64))
    value_hidden: tuple[int, ...] = field((128, 128))
    activation: str = field("tanh", choices=("tanh", "swish", "relu", "elu"))
    init_noise_std: float = field(0.5, min=0.0)
    eval_every_steps: int = field(500_000, min=0, doc="0: only at the end")
    num_eval_envs: int = field(128, min=1)
    target_success: float = field(0.0, min=0.0, max=1.0, doc="stop once eval success reaches this (0: never)")
    checkpoint_every_s: float = field(30.0, min=0.0)
    max_wall_s: float = field(0.0, min=0.0, doc="stop after this many seconds (0: no limit)")


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Evaluation settings (``simreal eval``)."""

    episodes: int = field(256, min=1)
    randomize: bool = field(True, doc="evaluate under domain randomisation")
    sim_to_sim_max_gap: float = field(0.05, min=0.0, max=1.0,
                                      doc="sim-to-sim gate: largest allowed success-rate drop on the other backend")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A fully resolved run configuration."""

    task: str
    robot: str
    seed: int
    backend: str
    env: Any
    trainer: str
    train: PPOConfig
    eval: EvalConfig
    runs_root: str = "runs"

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def hash(self) -> str:
        """sha256 of the resolved config (first 12 hex digits), recorded in bundles."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]

    def robot_spec(self) -> RobotSpec:
        return load_robot_spec(self.robot)


TOP_KEYS = ("task", "robot", "seed", "backend", "trainer", "env", "train", "eval", "runs_root")
TRAINERS = tuple(sorted(trainers.TRAINERS))  # the driver table's names


def task_yaml(task: str) -> Path:
    """The default config file of a registered task."""
    if task not in TASKS:
        raise UnknownNameError("task", task, TASKS)
    return configs_dir() / "tasks" / f"{task}.yaml"


def resolve(task: str | None, overrides: Sequence[str] = (), base: Mapping[str, Any] | None = None,
            source: str | None = None) -> RunConfig:
    """Defaults of ``task`` (or a saved ``base`` config), merged with ``key=value`` overrides."""
    if base is None:
        path = task_yaml(str(task))
        base = load_yaml(path) if path.is_file() else {"task": task}
        source = str(path)
    data = deep_merge(base, parse_overrides(overrides))
    if overrides:
        source = f"{source} + command-line overrides" if source else "command-line overrides"
    if task is not None:
        data.setdefault("task", task)
    return from_mapping(data, source)


def from_mapping(data: Mapping[str, Any], source: str | None = None) -> RunConfig:
    """Validate a whole config mapping into a RunConfig."""
    for k in data:
        if k not in TOP_KEYS:
            raise ConfigError(k, f"unknown key; valid top-level keys: {', '.join(TOP_KEYS)}", source)
    task = data.get("task")
    if not isinstance(task, str):
        raise ConfigError("task", "missing or not a string", source)
    cls = task_class(task)
    backend = data.get("backend", "auto")
    if backend not in ("auto",) + BACKENDS:
        raise ConfigError("backend", f"expected one of auto, {', '.join(BACKENDS)}, got {backend!r}", source)
    trainer = data.get("trainer", "brax")
    if trainer not in TRAINERS:
        raise ConfigError("trainer", f"expected one of {', '.join(TRAINERS)}, got {trainer!r}", source)
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError("seed", f"expected an integer, got {seed!r}", source)
    robot = data.get("robot")
    if not isinstance(robot, str):
        raise ConfigError("robot", "missing or not a string (a robot name or YAML path)", source)
    try:
        env = build(cls.config_class, data.get("env"), prefix="env")
        train = build(PPOConfig, data.get("train"), prefix="train")
        ev = build(EvalConfig, data.get("eval"), prefix="eval")
    except ConfigError as e:
        if source and not e.source:
            raise ConfigError(e.key, str(e).split(": ", 1)[-1], source) from None
        raise
    if train.num_envs % train.num_minibatches:
        raise ConfigError("train.num_minibatches", f"must divide train.num_envs ({train.num_envs})", source)
    load_robot_spec(robot)
    return RunConfig(task=task, robot=robot, seed=seed, backend=backend, env=env, trainer=trainer, train=train,
                     eval=ev,
                     runs_root=str(data.get("runs_root", "runs")))


def make_env(cfg: RunConfig, backend: str | None = None, **env_overrides: Any):
    """The task's env for a resolved config (optionally another backend or env settings)."""
    env_cfg = dataclasses.replace(cfg.env, **env_overrides) if env_overrides else cfg.env
    return task_class(cfg.task)(cfg.robot_spec(), env_cfg, backend or cfg.backend)
