"""The resolved configuration of a training run, from ``configs/tasks/<task>.yaml`` + overrides.

A task YAML::

    task: quadrotor-hover
    robot: crazyflie2          # name in configs/robots, or a path to a robot YAML
    seed: 0
    backend: auto              # auto | native | mjx | mjx-warp
    trainer: brax              # brax (JAX, here) | rsl_rl | sb3 (torch, through the adapters)
    algorithm: sac             # ppo | sac (brax runs both; rsl_rl and sb3 run ppo)
    env: {...}                 # the task's config class (e.g. HoverConfig)
    train: {...}               # the algorithm's settings: PPOConfig or SACConfig
    algorithms:                # optional: the task's own defaults per algorithm, under train:
      sac: {...}               #   once that algorithm is chosen (train: and overrides win)
      ppo: {...}
    eval: {...}                # EvalConfig
    reward: {...}              # optional: a reward model's term beside (or instead of) the task's
                               #   (simreal.rewards.learned: kind learned | clip;
                               #   simreal.policies.learned_reward adds it to the env)

The resolved config (a run's ``config.yaml``) holds the chosen algorithm's ``train:`` alone.

Every key is validated where it is built; errors name the dotted key.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simreal.config import build, configs_dir, deep_merge, field, parse_overrides, to_dict
from simreal.config import seed as config_seed
from simreal.errors import ConfigError, DataFileError, UnknownNameError, printable
from simreal.policies import trainers
from simreal.rewards.learned import reward_section
from simreal.robot_spec import RobotSpec, load_robot_spec
from simreal.sim.backends.base import BACKENDS
from simreal.sim.tasks import TASKS, task_class
from simreal.yaml_io import load_yaml


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """What the shared training loop (``trainers.loop``) and the export read, whatever the algorithm."""

    num_envs: int = field(256, min=1)
    num_timesteps: int = field(5_000_000, min=1, doc="env-step budget")
    discounting: float = field(0.99, min=0.0, max=1.0)
    reward_scaling: float = field(1.0, min=0.0)
    normalize_observations: bool = field(True)
    policy_hidden: tuple[int, ...] = field((64, 64), min=1)
    activation: str = field("tanh", choices=("tanh", "swish", "relu", "elu"))
    eval_every_steps: int = field(500_000, min=0, doc="0: only at the end")
    num_eval_envs: int = field(128, min=1)
    target_success: float = field(0.0, min=0.0, max=1.0, doc="stop once eval success reaches this (0: never)")
    keep_best: bool = field(False, doc="keep the best evaluation's checkpoint; eval, export and play use it")
    checkpoint_every_s: float = field(30.0, min=0.0)
    max_wall_s: float = field(0.0, min=0.0, doc="stop after this many seconds (0: no limit)")
    devices: int = field(1, min=0, doc="data-parallel devices, the envs split over them (0: every device)")


@dataclasses.dataclass(frozen=True)
class PPOConfig(LoopConfig):
    """PPO hyper-parameters (Brax's loss; names follow the paper and Brax)."""

    unroll_length: int = field(16, min=1)
    num_minibatches: int = field(4, min=1)
    num_updates_per_batch: int = field(5, min=1, doc="epochs over each batch")
    learning_rate: float = field(1e-3, min=0.0)
    learning_rate_end: float | None = field(
        None, min=0.0, doc="linear decay to this over num_timesteps (None: constant)"
    )
    desired_kl: float | None = field(
        None,
        min=0.0,
        doc="adapt the learning rate to keep PPO's KL near this (rsl_rl's schedule; None: constant or linear decay)",
    )
    entropy_cost: float = field(1e-3, min=0.0)
    gae_lambda: float = field(0.95, min=0.0, max=1.0)
    clipping_epsilon: float = field(0.2, min=0.0)
    max_grad_norm: float = field(1.0, min=0.0)
    value_hidden: tuple[int, ...] = field((128, 128), min=1)
    init_noise_std: float = field(0.5, min=0.0)
    symmetry: bool = field(
        False, doc="learn from each sample's left-right mirror too (trainer rsl_rl; simreal/sim/symmetry.py)"
    )
    estimate: tuple[str, ...] = field(
        (),
        doc="critic terms (lin_vel_b) an estimator learns from the actor's observation, the actor seeing "
        "its estimate (trainer rsl_rl; simreal/policies/trainers/estimator.py)",
    )
    estimator_hidden: tuple[int, ...] = field((128, 64), min=1)


@dataclasses.dataclass(frozen=True)
class SACConfig(LoopConfig):
    """SAC hyper-parameters (Brax's losses; names follow Brax's ``sac.train``). The
    update-to-data ratio is ``grad_updates_per_step * batch_size / num_envs``."""

    num_envs: int = field(64, min=1)
    steps_per_iteration: int = field(16, min=1, doc="env steps per env between progress reports")
    batch_size: int = field(256, min=1)
    grad_updates_per_step: int = field(4, min=1, doc="gradient steps per step of all envs")
    learning_rate: float = field(1e-3, min=0.0)
    tau: float = field(0.005, min=0.0, max=1.0, doc="Polyak rate of the target critic")
    max_replay_size: int = field(262_144, min=1, doc="transitions kept (checkpointed with the run)")
    min_replay_size: int = field(8192, min=0, doc="transitions of the initial policy before the first update")
    q_hidden: tuple[int, ...] = field((128, 128), min=1)
    activation: str = field("relu", choices=("tanh", "swish", "relu", "elu"))


@dataclasses.dataclass(frozen=True)
class ACTConfig:
    """The action chunking transformer of ``train.policy: act`` (``simreal/policies/bc/act.py``); names and
    meanings as LeRobot's ``ACTConfig``. Defaults sized for a state-only policy trained on a CPU
    (LeRobot's: width 512, 8 heads, 3200, 4 encoder layers, dropout 0.1, chunk 100, for images
    on a GPU). Measured on arm-reach from 50 scripted demos, 30 epochs: dropout 0.1 reached
    0.75-0.83 success, dropout 0 0.93-0.97 (bench/bench_bc.py --policy act)."""

    chunk_size: int = field(
        0, min=0, doc="actions predicted per step (k); 0: 0.4 s of the task's control steps (20 at 50 Hz)"
    )
    temporal_ensemble_coeff: float = field(
        0.01, min=-1.0, max=1.0, doc="m of the ensembling weights exp(-m i), i = 0 the oldest prediction"
    )
    dim_model: int = field(64, min=1, doc="width of the transformer's tokens")
    n_heads: int = field(4, min=1, doc="attention heads; must divide dim_model")
    dim_feedforward: int = field(256, min=1)
    n_encoder_layers: int = field(2, min=1)
    n_decoder_layers: int = field(1, min=1, doc="1 as ACT's code effectively uses")
    dropout: float = field(0.0, min=0.0, max=1.0)


@dataclasses.dataclass(frozen=True)
class FlowConfig:
    """The flow-matching action head of ``train.policy: flow`` (``simreal/policies/bc/flow.py``)."""

    chunk_size: int = field(
        0, min=0, doc="actions predicted per step (k); 0: 0.4 s of the task's control steps (20 at 50 Hz)"
    )
    temporal_ensemble_coeff: float = field(
        0.01, min=-1.0, max=1.0, doc="m of the ensembling weights exp(-m i), i = 0 the oldest prediction"
    )
    hidden: tuple[int, ...] = field((256, 256, 256), doc="the velocity MLP's hidden layers")
    steps: int = field(10, min=1, doc="Euler steps from the noise's mean to the chunk, in eval and in policy.onnx")


@dataclasses.dataclass(frozen=True)
class IQLConfig:
    """Offline RL for ``simreal train-bc`` (``simreal/policies/bc/iql.py``): IQL's critics on the dataset
    relabelled with a learned reward, then BC weighted by their advantages. Defaults d3rlpy's."""

    reward_model: str = field("", doc="a learned reward model (simreal fit-reward) of the scene state; '': plain BC")
    expectile: float = field(0.7, min=0.5, max=1.0, doc="tau of V's expectile regression")
    temperature: float = field(3.0, min=0.0, doc="beta of the advantage weights exp(beta A)")
    max_weight: float = field(100.0, min=1.0, doc="the weights' clip")
    discounting: float = field(0.99, min=0.0, max=1.0)
    target_update: float = field(0.005, min=0.0, max=1.0, doc="Polyak rate of the target critics")
    critic_steps: int = field(10000, min=1, doc="gradient steps of the critics")
    critic_hidden: tuple[int, ...] = field((256, 256), min=1, doc="hidden layers of Q and V")
    learning_rate: float = field(3e-4, min=0.0)
    batch_size: int = field(256, min=1)


@dataclasses.dataclass(frozen=True)
class VLARLConfig:
    """RL fine-tuning of a VLA (``simreal finetune-vla``, ``simreal/policies/vla/rl.py``): PPO on the
    action bins' log-probabilities with the sparse success reward and a critic on the simulator's
    state. A small learning rate and a KL stop keep it near the cloned policy (VLA-RL's users
    report degradation during RL)."""

    iterations: int = field(20, min=1, doc="rollout-and-update rounds")
    num_envs: int = field(16, min=1, doc="episodes per round")
    learning_rate: float = field(3e-5, min=0.0, doc="the VLA's Adam step")
    critic_learning_rate: float = field(1e-3, min=0.0)
    critic_hidden: tuple[int, ...] = field(
        (256, 256), min=1, doc="the critic's hidden layers (input: state and scene state)"
    )
    epochs: int = field(2, min=1, doc="passes over each round's data")
    batch_size: int = field(256, min=1, doc="frames per gradient step")
    clipping_epsilon: float = field(0.2, min=0.0)
    target_kl: float = field(
        0.02, min=0.0, doc="stop a round's updates once the mean approximate KL exceeds it (0: never)"
    )
    discounting: float = field(0.99, min=0.0, max=1.0)
    gae_lambda: float = field(0.95, min=0.0, max=1.0)
    entropy_cost: float = field(0.0, min=0.0)
    temperature: float = field(1.0, min=1e-3, doc="tau of the sampled bins' distribution softmax(logits / tau)")
    eval_episodes: int = field(64, min=1, doc="deterministic episodes after the last round (and before the first)")


@dataclasses.dataclass(frozen=True)
class VLAConfig:
    """The vision-language-action policy of ``train.policy: vla`` (``simreal/policies/vla/model.py``). Empty model
    folders: tiny random models (width, layers, heads) and a word tokenizer, for tests and CPU."""

    vision_model: str = field("", doc="local folder of a SigLIP vision checkpoint ('': a tiny random one)")
    language_model: str = field(
        "",
        doc="local folder of a causal language model with tokenizer.json "
        "('': a tiny random Llama and a word tokenizer)",
    )
    cameras: tuple[str, ...] = field((), doc="the dataset's cameras the policy sees (empty: all of them)")
    width: int = field(64, min=8, doc="the tiny models' token width")
    layers: int = field(2, min=1, doc="the tiny models' transformer layers, each")
    heads: int = field(4, min=1, doc="the tiny models' attention heads; must divide width")
    patch_size: int = field(8, min=1, doc="the tiny vision model's patch side [px]")
    bins: int = field(64, min=2, doc="action bins per dimension, over the dataset's 1st-99th percentiles")
    max_tokens: int = field(16, min=1, doc="instruction tokens (padded and truncated to it)")
    shift_px: int = field(4, min=0, doc="random image shift in training (DrQ) [px]")
    use_state: bool = field(
        True,
        doc="read the proprioceptive state (false: images and words only; a state that "
        "shows the teacher's motion lets a clone copy it instead of looking)",
    )
    rl: VLARLConfig = field(VLARLConfig(), doc="RL fine-tuning (simreal finetune-vla)")
    finetuned_from: str = field("", doc="the cloned run an RL fine-tuning started from (simreal finetune-vla sets it)")


#: ``algorithm:`` -> its ``train:`` settings.
@dataclasses.dataclass(frozen=True)
class BCConfig(LoopConfig):
    """Behaviour cloning from a dataset (``simreal train-bc``; ``simreal/policies/bc/cloning.py``). Of the loop's
    settings it reads the MLP's (``policy_hidden``, ``activation``) and ``num_eval_envs``."""

    dataset: str = field("", doc="the LeRobot dataset folder the policy learns from")
    policy: str = field(
        "mlp",
        choices=("mlp", "act", "flow", "vla"),
        doc="policy network: an MLP, ACT's chunking transformer, a flow-matching chunk head, or a "
        "vision-language-action model",
    )
    act: ACTConfig = field(ACTConfig(), doc="the transformer of policy act")
    flow: FlowConfig = field(FlowConfig(), doc="the flow-matching head of policy flow")
    iql: IQLConfig = field(IQLConfig(), doc="offline RL: advantage-weighted BC under a learned reward")
    vla: VLAConfig = field(VLAConfig(), doc="the vision-language-action model of policy vla")
    epochs: int = field(200, min=1, doc="passes over the training episodes")
    batch_size: int = field(256, min=1)
    learning_rate: float = field(1e-3, min=0.0)
    weight_decay: float = field(1e-4, min=0.0, doc="AdamW's decoupled weight decay")
    val_fraction: float = field(0.1, min=0.0, max=0.5, doc="share of the episodes held out for validation")


ALGORITHMS: dict[str, type[LoopConfig]] = {"ppo": PPOConfig, "sac": SACConfig, "bc": BCConfig}


@dataclasses.dataclass(frozen=True)
class ResidualConfig:
    """``trainer: residual`` (``simreal/policies/trainers/residual.py``): PPO trains a correction ``r`` in [-1, 1]^m
    to a frozen base policy's action, ``a = clip(a_base + scale * r, -1, 1)``, observing
    ``[o, a_base]``. Giving ``residual.base`` selects ``trainer: residual``."""

    base: str = field(
        "",
        doc="the frozen base: a run directory (any trainer's), a bundle folder, or 'scripted' "
        "(the task's scripted controller)",
    )
    scale: float = field(0.1, min=0.0, doc="the residual's reach in normalised action units (ResiP: 0.1)")
    action_scales: dict[str, float] = field(
        {},
        doc="per action name, a reach other than `scale` (e.g. gripper: "
        "1.5, where the base's command is open or closed)",
    )


#: ``train:`` defaults of ``trainer: residual`` (ResiP's, ``simreal/policies/trainers/residual.py``): over a task's
#: ``algorithms.<name>`` defaults, which are for a policy trained from scratch; ``train:`` wins.
RESIDUAL_TRAIN: dict[str, Any] = {"init_noise_std": 0.22, "entropy_cost": 0.0}


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Evaluation settings (``simreal eval``)."""

    episodes: int = field(256, min=1)
    randomize: bool = field(True, doc="evaluate under domain randomisation")
    sim_to_sim_max_gap: float = field(
        0.05, min=0.0, max=1.0, doc="sim-to-sim gate: largest allowed success-rate drop on the other backend"
    )


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A fully resolved run configuration."""

    task: str
    robot: str
    seed: int
    backend: str
    env: Any
    trainer: str
    train: Any  # ALGORITHMS[algorithm]: PPOConfig | SACConfig
    eval: EvalConfig
    runs_root: str = "runs"
    algorithm: str = "ppo"
    residual: ResidualConfig | None = None  # trainer: residual only
    reward: Any = None  # simreal.rewards.learned's sections; None: the task's own reward

    def to_dict(self) -> dict[str, Any]:
        d = to_dict(self)
        for optional in ("residual", "reward"):
            if d[optional] is None:  # other runs' configs (and hashes) stay as they were
                del d[optional]
        return d

    def hash(self) -> str:
        """sha256 of the resolved config (first 12 hex digits), recorded in bundles."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]

    def robot_spec(self) -> RobotSpec:
        return load_robot_spec(self.robot)


TOP_KEYS = (
    "task",
    "robot",
    "seed",
    "backend",
    "trainer",
    "algorithm",
    "env",
    "train",
    "algorithms",
    "eval",
    "runs_root",
    "residual",
    "reward",
)
TRAINERS = tuple(sorted(trainers.TRAINERS))  # the driver table's names


def task_yaml(task: str) -> Path:
    """The default config file of a registered task."""
    if task not in TASKS:
        raise UnknownNameError("task", task, TASKS)
    return configs_dir() / "tasks" / f"{task}.yaml"


def resolve(
    task: str | None, overrides: Sequence[str] = (), base: Mapping[str, Any] | None = None, source: str | None = None
) -> RunConfig:
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
            raise ConfigError(printable(str(k)), f"unknown key; valid top-level keys: {', '.join(TOP_KEYS)}", source)
    task = data.get("task")
    if not isinstance(task, str):
        raise ConfigError("task", "missing or not a string", source)
    cls: Any = task_class(task)  # a task env class (its config_class); task_class says only type
    backend = data.get("backend", "auto")
    if backend not in ("auto",) + BACKENDS:
        raise ConfigError("backend", f"expected one of auto, {', '.join(BACKENDS)}, got {backend!r}", source)
    trainer = data.get("trainer", "residual" if data.get("residual") is not None else "brax")
    if trainer not in TRAINERS:
        raise ConfigError("trainer", f"expected one of {', '.join(TRAINERS)}, got {trainer!r}", source)
    algorithm = data.get("algorithm", "ppo")
    runs = trainers.TRAINERS[trainer].algorithms
    if algorithm not in runs:
        raise ConfigError("algorithm", f"trainer {trainer} runs {', '.join(runs)}, got {algorithm!r}", source)
    seed = config_seed(data.get("seed", 0), "seed", source)
    robot = data.get("robot")
    if not isinstance(robot, str):
        raise ConfigError("robot", "missing or not a string (a robot name or YAML path)", source)
    per_algorithm = data.get("algorithms") or {}
    if not isinstance(per_algorithm, Mapping):
        raise ConfigError("algorithms", "expected a mapping: algorithm name -> its train settings", source)
    for section in ("train", "env"):
        if not isinstance(data.get(section) or {}, Mapping):
            raise ConfigError(
                section, f"expected a mapping of {section} settings, got {type(data[section]).__name__}", source
            )
    try:
        for name, section in per_algorithm.items():
            if name not in ALGORITHMS:
                raise ConfigError(
                    f"algorithms.{printable(str(name))}", f"unknown algorithm; expected one of {', '.join(ALGORITHMS)}"
                )
            if not isinstance(section or {}, Mapping):
                raise ConfigError(
                    f"algorithms.{name}", f"expected a mapping of train settings, got {type(section).__name__}"
                )
            build(ALGORITHMS[name], section, prefix=f"algorithms.{name}")
        residual = _residual(trainer, data.get("residual"))
        env_data = dict(data.get("env") or {})
        if residual is not None and cls.shaping_terms:  # MjEnv.shaping_terms: a residual trains without them
            given = env_data.get("reward_scales") or {}
            if isinstance(given, Mapping):  # else build() names the key and what it expected
                env_data["reward_scales"] = {**{t: 0.0 for t in cls.shaping_terms}, **given}
        env = build(cls.config_class, env_data, prefix="env")
        from simreal.sim.env import delay_range  # (the env module: JAX and MuJoCo, only when a config is read)

        delay_range(env.action_delay_steps)  # refused here, before a run directory exists
        defaults = deep_merge(per_algorithm.get(algorithm) or {}, RESIDUAL_TRAIN if residual else {})
        train_data = deep_merge(defaults, data.get("train") or {})
        _check_algorithm_keys(algorithm, train_data)
        train = build(ALGORITHMS[algorithm], train_data, prefix="train")
        ev = build(EvalConfig, data.get("eval"), prefix="eval")
        reward = reward_section(data.get("reward"))
    except ConfigError as e:
        if source and not e.source:
            raise ConfigError(e.key, str(e).split(": ", 1)[-1], source) from None
        raise
    if isinstance(train, PPOConfig) and train.num_envs % train.num_minibatches:
        raise ConfigError("train.num_minibatches", f"must divide train.num_envs ({train.num_envs})", source)
    if isinstance(train, PPOConfig) and train.symmetry and not trainers.TRAINERS[trainer].symmetry:
        able = ", ".join(n for n, e in trainers.TRAINERS.items() if e.symmetry)
        raise ConfigError(
            "train.symmetry",
            f"trainer={trainer} does not learn from mirrored samples; use trainer={able} or train.symmetry=false",
            source,
        )
    if isinstance(train, PPOConfig) and train.estimate and not trainers.TRAINERS[trainer].estimator:
        able = ", ".join(n for n, e in trainers.TRAINERS.items() if e.estimator)
        raise ConfigError(
            "train.estimate", f"trainer={trainer} learns no estimator; use trainer={able} or train.estimate=[]", source
        )
    if isinstance(train, PPOConfig) and train.desired_kl is not None and train.learning_rate_end is not None:
        raise ConfigError(
            "train.desired_kl", "sets the learning rate itself; unset train.learning_rate_end (=null)", source
        )
    if isinstance(train, BCConfig) and train.act.dim_model % train.act.n_heads:
        raise ConfigError("train.act.n_heads", f"must divide train.act.dim_model ({train.act.dim_model})", source)
    if isinstance(train, BCConfig) and train.vla.width % train.vla.heads:
        raise ConfigError("train.vla.heads", f"must divide train.vla.width ({train.vla.width})", source)
    load_robot_spec(robot)
    return RunConfig(
        task=task,
        robot=robot,
        seed=seed,
        backend=backend,
        env=env,
        trainer=trainer,
        train=train,
        eval=ev,
        algorithm=algorithm,
        residual=residual,
        reward=reward,
        runs_root=str(data.get("runs_root", "runs")),
    )


def _residual(trainer: str, section: Any) -> ResidualConfig | None:
    """The ``residual:`` section of ``trainer: residual`` (ConfigError naming ``residual.base`` when
    it names no base); ConfigError naming ``residual`` when another trainer is given one."""
    if trainer != "residual":
        if section is not None:
            raise ConfigError(
                "residual",
                f"a residual over a frozen base trains with trainer=residual, not "
                f"trainer={trainer}; drop trainer= (residual.base selects it)",
            )
        return None
    cfg = build(ResidualConfig, section, prefix="residual")
    if not cfg.base:
        raise ConfigError(
            "residual.base",
            "missing: the frozen base policy, a run directory, a bundle folder or "
            "'scripted' (residual.base=runs/<task>/<stamp>)",
        )
    return cfg


def _check_algorithm_keys(algorithm: str, train: Mapping[str, Any]) -> None:
    """A ``train.<key>`` that another algorithm has and this one lacks gets an error saying so."""
    own = {f.name for f in dataclasses.fields(ALGORITHMS[algorithm])}
    for key in train:
        others = [
            name
            for name, cls in ALGORITHMS.items()
            if key not in own and key in {f.name for f in dataclasses.fields(cls)}
        ]
        if others:
            raise ConfigError(
                f"train.{key}",
                f"a setting of algorithm {others[0]}, not of {algorithm}; put it under "
                f"algorithms.{others[0]} in the task YAML, or drop it",
            )


def _read_motion(path: Path, cfg: RunConfig) -> None:
    """Read ``path`` as a motion file for the run's robot (DataFileError naming what is wrong); a
    capture given instead of the retargeted clip gets the command that makes one, a clip of
    another robot's joints the robot it is for (``Motion.robot_columns``)."""
    from simreal.motion_file import load_motion

    if path.is_dir():
        raise DataFileError(str(path), "a folder, expected a motion file (.npz, what simreal retarget writes)")
    try:
        motion = load_motion(path)
    except DataFileError as e:
        hint = (
            ""
            if path.suffix.lower() == ".npz"
            else f"; retarget a capture first: simreal retarget {printable(str(path))} --robot ROBOT --out clip.npz"
        )
        raise DataFileError(e.path, f"{str(e).removeprefix(f'{e.path}: ')}{hint}") from None
    spec = cfg.robot_spec()
    motion.robot_columns(list(spec.actuator_names), spec.name, str(path), spec.held_names)


def _read_base(path: Path, cfg: RunConfig) -> None:
    """``residual.base`` given as a path: a bundle folder (its bundle.yaml and ONNX graph load) or
    a run directory (what ``residual.freeze_base`` copies into the run); read here, before the
    run directory exists, so an error names the user's path, not the run's copy."""
    del cfg  # the base's own files say what it is
    if (path / "bundle.yaml").is_file():
        from simreal.bundle import OnnxPolicy, load_bundle
        from simreal.errors import BundleError

        try:
            OnnxPolicy(load_bundle(path))
        except BundleError as e:  # its message names the file in the user's folder
            raise DataFileError(str(path), f"not a usable base bundle: {e}") from None
    elif not (path / "config.yaml").is_file():
        raise DataFileError(str(path), "neither a bundle folder (no bundle.yaml) nor a run directory (no config.yaml)")


def _base_path(cfg: RunConfig) -> str:
    """``residual.base`` when it names a path (not ``scripted``, the task's own controller)."""
    from simreal.policies.trainers.residual import SCRIPTED_BASE

    return "" if cfg.residual is None or cfg.residual.base == SCRIPTED_BASE else cfg.residual.base


#: Config keys that name an input the run reads (the task's clip or demonstration, a learned
#: reward model): key -> (its path in a config, a reader ``(path, config)`` that checks its content
#: or None).
#: ``simreal train`` refuses a missing or unreadable one before it makes the run directory.
INPUT_FILES: dict[str, tuple[Any, Any]] = {
    "env.motion_file": (lambda cfg: getattr(cfg.env, "motion_file", ""), _read_motion),
    "env.demo_file": (lambda cfg: getattr(cfg.env, "demo_file", ""), None),  # an npz or a dataset folder
    "reward.model": (lambda cfg: cfg.reward.model if getattr(cfg.reward, "kind", "") == "learned" else "", None),
    "residual.base": (_base_path, _read_base),
}


def check_input_files(cfg: RunConfig) -> None:
    """A ConfigError naming the key of the first input file (:data:`INPUT_FILES`) that is absent
    or that its reader refuses; a clip that ``simreal retarget`` cut into parts names them."""
    for key, (path_of, read) in INPUT_FILES.items():
        path = path_of(cfg)
        if not path:
            continue
        p = Path(path).expanduser()
        if not p.exists():
            parts = sorted(p.parent.glob(f"{glob.escape(p.stem)}.part*{p.suffix}"))
            raise ConfigError(
                key,
                f"{printable(path)}: file not found"
                + (
                    f"; simreal retarget cut that clip into {len(parts)} parts, give one of them: "
                    f"{', '.join(printable(str(q)) for q in parts)}"
                    if parts
                    else ""
                ),
            )
        if read is not None:
            try:
                read(p, cfg)
            except DataFileError as e:
                raise ConfigError(key, str(e)) from None


def make_env(cfg: RunConfig, backend: str | None = None, **env_overrides: Any):
    """The task's env for a resolved config (optionally another backend or env settings), with the
    ``reward:`` section's term added when there is one."""
    env_cfg = dataclasses.replace(cfg.env, **env_overrides) if env_overrides else cfg.env
    env = task_class(cfg.task)(cfg.robot_spec(), env_cfg, backend or cfg.backend)
    if cfg.reward is not None:
        from simreal.policies.learned_reward import attach

        attach(env, cfg.reward)
    return env
