"""The trainers behind one driver interface, and the table that maps ``trainer:`` to them.

    driver = get_trainer(cfg.trainer)                      # 'brax' | 'sb3' | 'rsl_rl' | 'bc' | 'residual'
    # cfg.algorithm: 'ppo' | 'sac' (brax, sb3); the table says which trainer runs which
    driver.prepare(cfg, env)                               # what can fail, before a run directory exists
    result = driver.train(run_dir, cfg, env=env)           # resume=True continues the run
    policy = driver.load(run_dir, cfg, randomize=False)    # env + deterministic act(obs)
    stats = driver.evaluate(run_dir, cfg, episodes=256, seed=1, backend="mjx")
    bundle_dir, max_abs_diff = driver.export(run_dir, cfg)

Every verb that touches a run (``train``, ``eval``, ``export``, ``play``) goes through
:func:`get_trainer`, so each works on every trainer's runs. The table is static text: listing
the trainers imports nothing, and a torch trainer's module (torch, stable-baselines3, rsl_rl:
the optional ``[torch]`` extra) is imported only when a run uses it.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from simreal.dependencies import install_hint
from simreal.errors import MissingDependencyError, UnknownNameError

if TYPE_CHECKING:
    from simreal.policies.run_config import RunConfig
    from simreal.policies.trainers.loop import TrainResult


class TrainerEntry(NamedTuple):
    """A row of the trainer table: where its driver is, the ``algorithm:`` values it runs,
    whether it takes dict observations with camera images (a CNN on the ``pixels/`` keys), and
    whether its networks run on PyTorch (their CPU threads then follow
    :func:`~simreal.cpu_threads.limit_torch_threads`), and whether it learns from each sample's
    left-right mirror too (``train.symmetry``, :mod:`simreal.sim.symmetry`), whether it learns a state
    estimator beside the policy (``train.estimate``, :mod:`~simreal.policies.trainers.estimator`), and
    the settings its checkpoints are shaped by, which a resumed run keeps (beside every trainer's,
    :data:`RESUME_KEEPS`)."""

    driver: str  # ``module:attribute`` of a :class:`Trainer`
    algorithms: tuple[str, ...]
    images: bool = False
    torch: bool = False
    symmetry: bool = False
    estimator: bool = False
    resume_keeps: tuple[str, ...] = ()


#: The settings every run's checkpoint is shaped by, so a resumed run keeps them.
RESUME_KEEPS = ("task", "robot", "trainer", "algorithm", "train.policy_hidden", "train.value_hidden", "train.q_hidden")

#: trainer name -> its driver and algorithms.
TRAINERS: dict[str, TrainerEntry] = {
    # brax's checkpoints hold the env states and SAC's replay buffer
    "brax": TrainerEntry(
        "simreal.policies.trainers.brax:BRAX",
        ("ppo", "sac"),
        resume_keeps=("train.num_envs", "train.max_replay_size", "env.slew_limit"),
    ),
    "sb3": TrainerEntry("simreal.policies.trainers.sb3:TRAINER", ("ppo", "sac"), images=True, torch=True),
    "rsl_rl": TrainerEntry(
        "simreal.policies.trainers.rsl_rl:TRAINER",
        ("ppo",),
        torch=True,
        symmetry=True,
        estimator=True,
        resume_keeps=("train.estimate", "train.estimator_hidden"),
    ),
    "bc": TrainerEntry("simreal.policies.bc.cloning:TRAINER", ("bc",), torch=True),
    "residual": TrainerEntry(
        "simreal.policies.trainers.residual:TRAINER",
        ("ppo",),
        resume_keeps=("train.num_envs", "residual.base", "residual.scale", "residual.action_scales", "env.slew_limit"),
    ),
}


def check_observations(cfg: RunConfig, env: Any) -> None:
    """ConfigError naming ``trainer`` when ``env`` has dict observations (camera images) and the
    run's trainer takes flat observations only."""
    from collections.abc import Mapping

    from simreal.errors import ConfigError

    if isinstance(env.observation_size, Mapping) and not TRAINERS[cfg.trainer].images:
        able = ", ".join(n for n, e in TRAINERS.items() if e.images)
        raise ConfigError(
            "trainer",
            f"{cfg.task} has image observations ({', '.join(env.observation_size)}); "
            f"trainer={cfg.trainer} takes flat observations; use trainer={able}",
        )


def _memoryless() -> None:
    """A policy without memory: nothing to start over."""


@dataclasses.dataclass(frozen=True)
class LoadedPolicy:
    """A run's policy (``checkpoint.policy_checkpoint``), ready for rollouts.

    env: the task's env (``MjEnv``), built from the run's config and any overrides.
    act: deterministic policy, raw observation (n,) or (N, n) -> action (m,) or (N, m) in
      [-1, 1]; takes and returns numpy or JAX arrays, so both ``jax.jit(env.step)`` and a
      numpy batch can call it.
    reset: call at the start of each episode (of every env of a batch at once): a policy with
      memory (an action-chunk ensemble) starts over; a memoryless one does nothing.
    """

    env: Any
    act: Callable[[Any], Any]
    reset: Callable[[], None] = _memoryless


class Trainer(Protocol):
    """One training library behind the four things the CLI does with a run."""

    name: str

    def prepare(self, cfg: RunConfig, env: Any) -> None:
        """Every check of ``cfg`` against the task's ``env`` that :meth:`train` would make, with
        nothing written: ``simreal train`` calls it before the run directory exists, so a refused
        setting leaves none behind (a ConfigError naming the key)."""
        ...

    def train(
        self,
        run_dir: Path,
        cfg: RunConfig,
        resume: bool = False,
        t_start: float | None = None,
        quiet: bool = False,
        env: Any | None = None,
    ) -> TrainResult:
        """Train (or with ``resume`` continue from the latest checkpoint) the run in ``run_dir``
        on the shared loop (``trainers.loop``): metrics.csv, TensorBoard, plots, checkpoints.
        ``env``: the task's env for ``cfg`` when the caller built it already (``simreal train``
        builds it once, to check it before the run directory exists); None: built here."""
        ...

    def policy_checkpoint(self, run_dir: Path, cfg: RunConfig) -> Path:
        """The file :meth:`load`, :meth:`evaluate` and :meth:`export` read the run's policy from
        (``checkpoint.policy_checkpoint``: the best kept or the newest intact one)."""
        ...

    def load(self, run_dir: Path, cfg: RunConfig, backend: str | None = None, **env_overrides: Any) -> LoadedPolicy:
        """The run's policy checkpoint's deterministic policy and its env on ``backend`` (None: the
        run's own); ``env_overrides`` change env settings (``randomize=False``) only."""
        ...

    def evaluate(
        self, run_dir: Path, cfg: RunConfig, episodes: int, seed: int, backend: str | None = None, **env_overrides: Any
    ) -> dict[str, float]:
        """The first episode of each of ``episodes`` envs under the deterministic policy:
        the task's ``episode/<name>`` statistics averaged over them, plus ``episodes``, the
        number of episodes that ended (the statistic ``simreal eval`` reports)."""
        ...

    def export(
        self, run_dir: Path, cfg: RunConfig, out_dir: Path | None = None, env: Any | None = None
    ) -> tuple[Path, float]:
        """Write the bundle (default ``run_dir/bundle``) and return (its folder, max |ONNX
        Runtime - the library's own deterministic policy| over random observations); ``env``: the
        run's env when the caller built it already (else built here)."""
        ...


def get_trainer(name: str) -> Trainer:
    """The driver of trainer ``name``; the error lists the valid names, or says what to pip
    install when the trainer's libraries are missing (torch ones: the ``[torch]`` extra)."""
    if name not in TRAINERS:
        raise UnknownNameError("trainer", name, TRAINERS)
    mod, attr = TRAINERS[name].driver.split(":")
    try:
        module = importlib.import_module(mod)
    except ModuleNotFoundError as e:
        hint = install_hint(e.name or "")
        if hint is None:
            raise
        raise MissingDependencyError(hint.module, hint.command, f"which trainer={name} uses") from None
    if TRAINERS[name].torch:
        from simreal.cpu_threads import limit_torch_threads

        limit_torch_threads()
    return getattr(module, attr)
