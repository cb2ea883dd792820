"""Behaviour cloning (``trainer: bc``, ``simreal train-bc``): a network regressing a teacher's
normalised actions on the observation, from a LeRobot dataset of demonstrations::

    x_t = (o_t - mu_o) / sigma_o          y_t = (a_t - mu_a) / sigma_a
    loss = mean over frames and action dimensions of e(f_theta(x_t) - y_t)

with the dataset's statistics and the deployed actor of ``simreal/policies/bc/actor.py``
(``a = clip(mu_a + sigma_a * f_theta(x), -1, 1)``, both normalisations inside it and its ONNX
graph). ``train.policy`` picks ``f_theta`` and its loss (``bc_actor.NETWORKS``): ``mlp``, an
MLP of ``train.policy_hidden`` and ``train.activation`` (the PPO policies' convention) with
e = squared error; ``act``, ACT's chunking transformer (``simreal/policies/bc/act.py``) with e = |.|, whose
target is the chunk ``y_{t,j} = y_{t+j}``, j < k, and whose mean runs over the ``t + j`` inside the
episode (ACT's padding mask); ``flow``, a flow-matching head over the same chunks
(``simreal/policies/bc/flow.py``: its flow-matching loss, validated by the squared error of the chunks it
samples). One loop fits them all, with AdamW on minibatches. Episodes, not
frames, are split into training and validation sets (``train.val_fraction``, at least one validation episode when
there are two), so no validation frame has a neighbour in training; the checkpoint keeps the
epoch with the lowest validation loss (the last one without validation episodes).

A run directory is every trainer's: ``config.yaml`` (``trainer: bc``, ``algorithm: bc``,
``train.dataset``), ``checkpoints/policy.safetensors`` (``bc.actor``), ``metrics.csv`` (one row
per epoch); ``simreal eval``, ``export`` and ``play`` reach it through the trainer table
(``TRAINER``, a :class:`TorchTrainer` whose ``load_actor`` is ``bc_actor.load_actor``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simreal.errors import ConfigError, DataFileError
from simreal.policies import torch_policy
from simreal.policies.bc.actor import (
    CHECKPOINT,
    NETWORKS,
    Normalization,
    action_chunk,
    deployed_policy,
    load_actor,
    make_actor,
    save_actor,
)
from simreal.policies.demos.record import ACTION, STATE, state_size
from simreal.policies.run_config import RunConfig, make_env
from simreal.policies.trainers import LoadedPolicy
from simreal.policies.trainers.torch_loop import TorchTrainer


@dataclasses.dataclass(frozen=True)
class Demos:
    """Demonstrations as arrays: per episode ``obs`` (T, n) and ``actions`` (T, m), and the
    dataset's normalisation."""

    obs: list[np.ndarray]
    actions: list[np.ndarray]
    norm: Normalization
    env_state: list[np.ndarray] | None = None  # per episode (T, k), where asked for
    env_state_terms: tuple[str, ...] = ()  # the observation terms env_state concatenates, in order


def check_rate(ds: Any, env: Any) -> None:
    """DataFileError naming ``meta/info.json``'s ``fps`` unless the dataset ``ds`` was recorded at
    ``env``'s control rate: a policy learned from it acts once per frame, so a 30 fps recording
    on a 50 Hz task would run its motions 5/3 as fast (and an action chunk spans other times)."""
    rate = 1.0 / float(env.ctrl_dt)
    if abs(float(ds.fps) - rate) > 1e-6 * rate:
        raise DataFileError(
            str(Path(ds.root) / "meta" / "info.json"),
            f"field 'fps' is {ds.fps}; the task's env acts at {rate:g} Hz, one action per frame: "
            f"record at the control rate (or resample the dataset to it)",
        )


def check_dataset(cfg: RunConfig) -> Any:
    """Everything about ``cfg.train.dataset`` that can be known without its frames (the task env's
    sizes, the frame rate, the statistics, data files with their rows and videos present:
    ``Dataset.check_files``): ``simreal train-bc`` checks it before the run directory. Returns the
    task's env it checked against (:func:`train_bc` trains on it)."""
    from simreal.dataset.reader import Dataset

    env = make_env(cfg)
    if cfg.train.policy == "vla":
        ds = Dataset(cfg.train.dataset)
        check_rate(ds, env)
    else:
        ds = open_demos(cfg.train.dataset, env, bool(cfg.train.iql.reward_model))
    ds.check_files()
    return env


def open_demos(root: str | Path, env: Any, env_state: bool = False) -> Any:
    """The dataset at ``root`` (a ``Dataset``) once its features, statistics and frame rate fit
    ``env``; DataFileError naming the field that does not. ``env_state``: it must hold the scene
    states too (``observation.environment_state``, for a learned reward)."""
    from simreal.dataset.reader import Dataset
    from simreal.policies.demos.record import ENV_STATE

    ds = Dataset(root)
    check_rate(ds, env)
    info = str(Path(root) / "meta" / "info.json")
    for key, size in ((STATE, state_size(env)), (ACTION, int(env.action_size))):
        if key not in ds.features:
            raise DataFileError(info, f"no feature '{key}'; features: {', '.join(ds.features)}")
        shape = list(ds.features[key]["shape"])
        if shape != [size]:
            raise DataFileError(info, f"feature '{key}' has shape {shape}; the task's env has [{size}]")
        if key not in ds.stats:
            raise DataFileError(str(Path(root) / "meta" / "stats.json"), f"no statistics of '{key}'")
    if ds.num_episodes < 1:
        raise DataFileError(info, "no episodes")
    if env_state and ENV_STATE not in ds.features:
        raise DataFileError(
            info,
            f"no feature '{ENV_STATE}' for the learned reward to score (simreal demos records "
            f"it for tasks that name scene state terms); features: {', '.join(ds.features)}",
        )
    return ds


def load_demos(root: str | Path, env: Any, env_state: bool = False) -> Demos:
    """The state and action of every episode of the dataset at ``root``, checked against the
    sizes ``env`` observes and acts with (:func:`open_demos`). (``Dataset.episode`` decodes camera
    videos too, which an MLP on the state does not need.)"""
    from simreal.policies.demos.record import ENV_STATE

    ds = open_demos(root, env, env_state)
    episodes = [ds.episode(i) for i in range(ds.num_episodes)]
    names = (ds.features.get(ENV_STATE) or {}).get("names") or []  # "<term>.<i>" (simreal/policies/demos/record.py)
    return Demos(
        obs=[np.asarray(e[STATE], np.float32) for e in episodes],
        actions=[np.asarray(e[ACTION], np.float32) for e in episodes],
        norm=Normalization.from_stats(ds.stats),
        env_state=[np.asarray(e[ENV_STATE], np.float32) for e in episodes] if env_state else None,
        env_state_terms=tuple(dict.fromkeys(str(n).rsplit(".", 1)[0] for n in names)) if env_state else (),
    )


def split_episodes(n: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training, validation) episode indices: ``round(val_fraction * n)`` random episodes held
    out, at least one when ``n >= 2`` and ``val_fraction > 0``, never all of them."""
    k = min(n - 1, max(round(val_fraction * n), 1 if val_fraction > 0 else 0)) if n > 1 else 0
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[k:]), np.sort(order[:k])


@dataclasses.dataclass(frozen=True)
class FitResult:
    """Where fitting ended: the kept epoch (lowest validation loss) and its losses."""

    best_epoch: int
    train_loss: float
    val_loss: float  # NaN without validation episodes
    gradient_steps: int


def targets(actions: np.ndarray, chunk: int | None) -> tuple[np.ndarray, np.ndarray]:
    """An episode's targets and which of them lie inside it: ``y_t = a_t`` (T, m), all valid (T,);
    or the chunks ``y_{t,j} = a_{t+j}`` (T, k, m), valid where ``t + j < T`` (T, k), the steps past
    the end holding the last action (LeRobot pads the same way and masks them out of the loss)."""
    if chunk is None:
        return actions, np.ones(len(actions), bool)
    idx = np.arange(len(actions))[:, None] + np.arange(chunk)
    return actions[np.minimum(idx, len(actions) - 1)], idx < len(actions)


def _normalised(
    demos: Demos, episodes: np.ndarray, chunk: int | None, weights: list[np.ndarray] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x, y, valid) of ``episodes``' frames: the normalised observations and :func:`targets`;
    with ``weights`` (per episode, per frame), ``valid`` is each target's weight instead of 0/1
    (the losses' masked mean is then the weighted mean)."""
    n = demos.norm
    obs = [demos.obs[i] for i in episodes] or [np.zeros((0, len(n.obs_mean)))]  # no episodes: no frames
    actions = [demos.actions[i] for i in episodes] or [np.zeros((0, len(n.act_mean)))]
    act, valid = zip(*(targets(a, chunk) for a in actions))
    mask = np.concatenate(valid)
    if weights is not None:
        w = np.concatenate([weights[i] for i in episodes] or [np.zeros(0)]).astype(np.float32)
        mask = mask * (w[:, None] if mask.ndim == 2 else w)
    return (
        torch.as_tensor((np.concatenate(obs) - n.obs_mean) / n.obs_std, dtype=torch.float32),
        torch.as_tensor((np.concatenate(act) - n.act_mean) / n.act_std, dtype=torch.float32),
        torch.as_tensor(mask),
    )


def fit(
    actor: torch_policy.DeployedActor,
    demos: Demos,
    tc: Any,
    seed: int,
    chunk: int | None = None,
    on_epoch: Callable[[int, int, dict[str, float], bool], None] | None = None,
    weights: list[np.ndarray] | None = None,
) -> FitResult:
    """Fit ``actor``'s network (``train.policy``'s, predicting chunks of ``chunk`` actions or one
    action) to ``demos`` (module docstring) with the BC settings ``tc``; ``actor`` ends holding the
    kept epoch's weights. ``on_epoch(epoch, gradient_steps, losses, kept)`` is called after each
    epoch (``kept``: this epoch is the best so far); ``seed`` splits the episodes and shuffles the
    minibatches. ``weights`` (per episode, per frame: IQL's) weight each frame's error, in
    training and validation alike."""
    train_ep, val_ep = split_episodes(len(demos.obs), tc.val_fraction, seed)
    x, y, valid = _normalised(demos, train_ep, chunk, weights)
    xv, yv, valid_v = _normalised(demos, val_ep, chunk, weights)
    network = NETWORKS[tc.policy]
    body = actor.body
    assert isinstance(body, torch.nn.Sequential)  # make_actor's Sequential(f_theta, Affine)
    net = body[0]
    opt = torch.optim.AdamW(net.parameters(), lr=tc.learning_rate, weight_decay=tc.weight_decay)
    gen = torch.Generator().manual_seed(seed)
    best: FitResult | None = None
    best_weights: dict[str, torch.Tensor] = {}
    steps = 0
    for epoch in range(1, tc.epochs + 1):
        net.train()
        total = 0.0
        for batch in torch.randperm(len(x), generator=gen).split(tc.batch_size):
            loss = network.loss(net, x[batch], y[batch], valid[batch], gen)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(batch)
            steps += 1
        net.eval()
        with torch.no_grad():
            val = network.validate(net, xv, yv, valid_v, gen).item() if len(xv) else float("nan")
        # without validation episodes every epoch is kept over the one before: the last one stays
        kept = best is None or not len(xv) or val <= best.val_loss
        if kept:
            best = FitResult(best_epoch=epoch, train_loss=total / len(x), val_loss=val, gradient_steps=steps)
            best_weights = {k: v.clone() for k, v in net.state_dict().items()}
        if on_epoch is not None:
            on_epoch(epoch, steps, {"train": total / len(x), "val": val}, kept)
    net.load_state_dict(best_weights)
    assert best is not None  # train.epochs >= 1 (its field's min): an epoch was kept
    return dataclasses.replace(best, gradient_steps=steps)


@dataclasses.dataclass(frozen=True)
class BCResult:
    """A finished BC run: the fit, the simulated evaluation of the kept actor, the wall time [s]."""

    run_dir: Path
    fit: FitResult
    eval: dict[str, float]
    wall_s: float


def train_bc(run_dir: Path, cfg: RunConfig, quiet: bool = False, env: Any | None = None) -> BCResult:
    """Fit the run's actor to ``cfg.train.dataset``, write its checkpoint and metrics.csv, and
    evaluate it in simulation on ``train.num_eval_envs`` episodes (module docstring); ``env``: the
    task's env when the caller built it (:func:`check_dataset`'s), else built here."""
    import os
    import sys

    from simreal.progress import Progress
    from simreal.rundir import MetricsCsv

    t0 = time.time()
    tc = cfg.train
    if not tc.dataset:
        raise ConfigError("train.dataset", "no dataset to learn from (simreal train-bc DATASET sets it)")
    if tc.policy == "vla":  # images and instructions in, bins out: its own fit (simreal/policies/vla/bc.py)
        from simreal.policies.vla.bc import train_vla_bc

        return train_vla_bc(run_dir, cfg, quiet, env)
    env = env if env is not None else make_env(cfg)
    iql_on = bool(tc.iql.reward_model)
    demos = load_demos(tc.dataset, env, env_state=iql_on)
    weights = _iql_weights(demos, tc, cfg.seed, run_dir, quiet) if iql_on else None
    torch.manual_seed(cfg.seed)  # the network's initial weights
    actor = make_actor(env, tc, demos.norm)
    chunk = action_chunk(env, tc)
    train_episodes, _ = split_episodes(len(demos.obs), tc.val_fraction, cfg.seed)  # as fit() splits
    per_epoch = -(-sum(len(demos.obs[i]) for i in train_episodes) // tc.batch_size)
    progress = Progress(tc.epochs * per_epoch, stream=open(os.devnull, "w") if quiet else sys.stderr)
    metrics = MetricsCsv(run_dir / "metrics.csv")

    def on_epoch(epoch: int, steps: int, losses: dict[str, float], kept: bool) -> None:
        metrics.append(
            {
                "epoch": epoch,
                "gradient_steps": steps,
                "wall_s": time.time() - t0,
                "loss/train": losses["train"],
                "loss/val": losses["val"],
            }
        )
        metrics.flush()  # per epoch: a stopped run keeps its curve with its checkpoint
        if kept:
            save_actor(run_dir / CHECKPOINT, actor, {"epoch": epoch, "dataset": str(tc.dataset), **losses})
        stage: dict[str, Any] = {"stage": "actor 2/2"} if iql_on else {}  # the critics' line had its own ETA
        progress.update(steps, **stage, epoch=f"{epoch}/{tc.epochs}", loss=losses["train"], val_loss=losses["val"])

    result = fit(actor, demos, tc, cfg.seed, chunk.size if chunk else None, on_epoch, weights)
    progress.close()
    evaluation = torch_policy.evaluate(env, deployed_policy(actor, chunk), tc.num_eval_envs, seed=cfg.seed + 1)
    metrics.rows[-1].update({f"eval_{k}": v for k, v in evaluation.items()})
    metrics.flush()
    return BCResult(run_dir=run_dir, fit=result, eval=evaluation, wall_s=time.time() - t0)


def _iql_weights(demos: Demos, tc: Any, seed: int, run_dir: Path, quiet: bool) -> list[np.ndarray]:
    """IQL's advantage weights of every frame (``simreal/policies/bc/iql.py``), with progress on stderr and
    the critics' losses and the weights' spread in ``iql.json`` of the run."""
    import json
    import os
    import sys

    from simreal.policies.bc import iql
    from simreal.progress import Progress
    from simreal.yaml_io import atomic_write_text

    assert demos.env_state is not None  # train_bc loads the scene states with IQL on (load_demos' env_state)
    progress = Progress(tc.iql.critic_steps, stream=open(os.devnull, "w") if quiet else sys.stderr)
    weights, critics = iql.episode_weights(
        demos.obs,
        demos.actions,
        demos.env_state,
        demos.norm,
        tc.iql,
        seed,
        lambda step, losses: progress.update(
            step,
            stage="critics 1/2",
            **losses,  # type: ignore[arg-type]  # mypy checks **losses against force: bool
        ),
        state_terms=demos.env_state_terms,
    )
    progress.close()
    w = np.concatenate(weights)
    atomic_write_text(
        run_dir / "iql.json",
        json.dumps(
            {
                "critic_losses": critics.losses,
                "weights": {
                    "mean": float(w.mean()),
                    "min": float(w.min()),
                    "max": float(w.max()),
                    "median": float(np.median(w)),
                },
                "episode_mean_weights": [float(x.mean()) for x in weights],
            },
            indent=1,
        ),
    )
    return weights


class BCTrainer(TorchTrainer):
    """``trainer=bc``: eval, export and play as every torch trainer's, with a chunked actor's
    temporal ensembling in the policy they run and an ``action_chunk`` section in its bundle;
    training is :func:`train_bc` from a dataset (``simreal train-bc``), not an env-step loop."""

    def __init__(self) -> None:
        super().__init__("bc", None, load_actor)  # no env-step driver: train() below replaces its use

    def policy_checkpoint(self, run_dir: Path, cfg: RunConfig) -> Path:
        """One file, the kept epoch's (the VLA's has the same name)."""
        return Path(run_dir) / CHECKPOINT

    def load(self, run_dir: Path, cfg: RunConfig, backend: str | None = None, **env_overrides: Any) -> LoadedPolicy:
        if cfg.train.policy == "vla":
            raise ConfigError(
                "train.policy",
                "a VLA reads camera images and an instruction, not the state alone: "
                "simreal eval and simreal export take its run; play does not yet",
            )
        env, actor = load_actor(run_dir, cfg, backend, **env_overrides)
        policy = deployed_policy(actor, action_chunk(env, cfg.train))
        return LoadedPolicy(env=env, act=policy, reset=getattr(policy, "reset", LoadedPolicy.reset))

    def evaluate(
        self, run_dir: Path, cfg: RunConfig, episodes: int, seed: int, backend: str | None = None, **env_overrides: Any
    ) -> dict[str, float]:
        if cfg.train.policy != "vla":
            return super().evaluate(run_dir, cfg, episodes, seed, backend, **env_overrides)
        from simreal.policies.vla.model import CHECKPOINT as VLA_CHECKPOINT
        from simreal.policies.vla.model import load_vla
        from simreal.policies.vla.rollout import evaluate

        model, tok = load_vla(run_dir / VLA_CHECKPOINT)
        return evaluate(make_env(cfg, backend=backend, **env_overrides), cfg.task, model, tok, episodes, seed)

    def export(
        self, run_dir: Path, cfg: RunConfig, out_dir: Path | None = None, env: Any | None = None
    ) -> tuple[Path, float]:
        if cfg.train.policy == "vla":
            from simreal.policies.vla.export import export_vla

            return export_vla(run_dir, cfg, out_dir, env)
        env, actor = load_actor(run_dir, cfg, env=env)
        out = torch_policy.export_bundle(run_dir, cfg, env, actor, out_dir, action_chunk(env, cfg.train))
        return out, torch_policy.check_export(out, actor)

    def prepare(self, cfg: RunConfig, env: Any) -> None:
        raise ConfigError(
            "trainer",
            "trainer=bc learns from a dataset of demonstrations: "
            "simreal train-bc DATASET (simreal demos records one); a BC run does not "
            "resume: train-bc again, with more --epochs",
        )

    def train(
        self,
        run_dir: Path,
        cfg: RunConfig,
        resume: bool = False,
        t_start: float | None = None,
        quiet: bool = False,
        env: Any | None = None,
    ) -> Any:
        self.prepare(cfg, env)  # refuses: not an env-step trainer


TRAINER = BCTrainer()
