"""What the torch trainers (``trainers.sb3``, ``trainers.rsl_rl``) share: the deployed actor, its ONNX
export and check, deterministic evaluation through the adapters, and checkpoint files.

The deployed actor is the same computation for both libraries::

    x      = clip((obs - mean) / std, -c, c)     (the library's observation normaliser; c = inf for rsl_rl)
    action = clip(mlp(x), -1, 1)                 (the Gaussian's mean: deterministic policy)

Clipping (not tanh) matches how both libraries and the env treat actions: the policy's
Gaussian is unbounded, SB3 clips samples to the action space, and ``MjEnv.step`` clips to
[-1, 1] before anything else.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx
import torch
from torch import nn

from simreal.action_chunk import ActionChunk
from simreal.policies.export import IR_VERSION, OPSET


class Actor(Protocol):
    """A deterministic policy of a torch trainer: observation(s) -> action(s) in [-1, 1]
    (a :class:`DeployedActor`, or ``train_sb3.DictActor`` on dict observations)."""

    def act(self, obs: Any) -> np.ndarray: ...


class DeployedActor(nn.Module):
    """raw obs (N, n) -> action (N, m) in [-1, 1], normalisation folded in (see module docstring)."""

    obs_mean: torch.Tensor  # buffers (register_buffer in __init__)
    obs_std: torch.Tensor

    def __init__(self, body: nn.Module, obs_mean: np.ndarray, obs_std: np.ndarray, obs_clip: float = float("inf")):
        super().__init__()
        self.body = body
        self.register_buffer("obs_mean", torch.as_tensor(np.asarray(obs_mean, np.float32)))
        self.register_buffer("obs_std", torch.as_tensor(np.asarray(obs_std, np.float32)))
        self.obs_clip = float(obs_clip)

    @property
    def obs_size(self) -> int:
        return int(self.obs_mean.shape[0])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = (obs - self.obs_mean) / self.obs_std
        if np.isfinite(self.obs_clip):
            x = torch.clamp(x, -self.obs_clip, self.obs_clip)
        return torch.clamp(self.body(x), -1.0, 1.0)

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        return self(torch.from_numpy(np.array(obs, np.float32))).numpy()


def to_onnx(actor: DeployedActor) -> onnx.ModelProto:
    """The actor as an ONNX graph: input 'obs' (N, n), output 'action' (N, m) (a chunked actor's:
    (N, k, m)); IR 9, opset 17."""
    return module_to_onnx(actor, {"obs": torch.zeros(1, actor.obs_size)})


def module_to_onnx(module: nn.Module, inputs: dict[str, torch.Tensor], output: str = "action") -> onnx.ModelProto:
    """``module(*inputs.values())`` as an ONNX graph with those input names (batch dimension N
    dynamic) and one output ``output``; IR 9, opset 17."""
    module = module.eval().cpu()
    buf = io.BytesIO()
    # torch's fused transformer kernels (taken in eval without grad) have no ONNX form: trace the plain ops
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # attention's shape checks are traced as constants, which they are for a fixed network
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            # transformers' attention masks index with tensors; every export is checked against torch after
            warnings.filterwarnings("ignore", message="Exporting aten::index operator")
            # The TorchScript exporter (dynamo=False): deterministic, quiet, fast for a plain MLP.
            torch.onnx.export(
                module,
                tuple(inputs.values()),
                buf,  # type: ignore[arg-type]  # a file-like object works; the stub says path
                input_names=list(inputs),
                output_names=[output],
                opset_version=OPSET,
                dynamo=False,
                dynamic_axes={k: {0: "N"} for k in [*inputs, output]},
            )
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)
    model = onnx.load_from_string(buf.getvalue())
    model.ir_version = IR_VERSION  # onnxruntime on robot computers reads IR <= 9 reliably
    onnx.checker.check_model(model)
    return model


def check_export(bundle_dir: Path, actor: DeployedActor, n: int = 256, seed: int = 0) -> float:
    """Max |ONNX Runtime - torch| over ``n`` random observations (a chunked actor's whole chunks)."""
    from simreal.bundle import OnnxPolicy, load_bundle

    obs = np.random.default_rng(seed).normal(size=(n, actor.obs_size)).astype(np.float32) * 2.0
    obs = obs * actor.obs_std.numpy() + actor.obs_mean.numpy()  # around the data the actor saw
    return float(np.max(np.abs(actor.act(obs) - OnnxPolicy(load_bundle(bundle_dir)).graph(obs))))


def export_bundle(
    run_dir: Path,
    cfg: Any,
    env: Any,
    actor: DeployedActor,
    out_dir: Path | None = None,
    action_chunk: ActionChunk | None = None,
) -> Path:
    """Write ``bundle/`` for a torch-trained run (policies.export.write_bundle; ``action_chunk``:
    the actor outputs chunks, ensembled on the robot as the section says)."""
    from simreal.policies.export import write_bundle

    return write_bundle(
        run_dir, cfg, env, to_onnx(actor), actor.obs_mean.numpy(), actor.obs_std.numpy(), out_dir, action_chunk
    )


def evaluate(env: Any, policy: Callable[[np.ndarray], np.ndarray], num_envs: int, seed: int) -> dict[str, float]:
    """``num_envs`` first episodes of the deterministic ``policy``, each statistic averaged over the
    episodes it is defined for (as ``ppo.evaluate``: :func:`simreal.sim.episode_stats.episode_means`)."""
    from simreal.sim.adapter_core import JaxBatch, to_numpy
    from simreal.sim.episode_stats import episode_means

    batch = JaxBatch(env, num_envs, seed)
    obs = to_numpy(batch.reset())  # an array, or a dict of arrays (camera images)
    seen = np.zeros(num_envs, bool)
    acc: dict[str, np.ndarray] = {}
    for _ in range(env.episode_steps):
        out = batch.step(policy(obs))
        done = np.asarray(out.done)
        first = done & ~seen
        for k, v in out.episode_metrics.items():
            acc[k] = acc.get(k, np.zeros(num_envs)) + np.where(first, np.asarray(v), 0.0)
        seen |= done
        obs = to_numpy(out.obs)
    r: dict[str, float] = episode_means({k: float(v.sum()) for k, v in acc.items()})
    r["episodes"] = int(seen.sum())
    return r
