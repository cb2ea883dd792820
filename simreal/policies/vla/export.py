"""A VLA run's bundle: ``policy.onnx`` with image and instruction inputs, and its tokenizer.

The graph is :class:`~simreal.policies.vla.model.DeployedVLA`: ``obs`` (N, n) float32 state, raw (the
normalisation inside), ``instruction_ids`` and ``instruction_mask`` (N, L) int64, ``image.<cam>``
(N, H, W, 3) uint8 RGB per camera -> ``action`` (N, m), the most likely bin's centre per
dimension. ``bundle.yaml`` gains ``images`` (each camera's name and size) and ``instruction``
(``tokenizer: tokenizer.json``, ``max_tokens: L``), :mod:`simreal.bundle`'s contract; deploy
tokenises the instruction with the same file the policy was trained with.

The check compares ONNX Runtime with the torch model on random states around the dataset's,
random images and random tokens, the instruction lengths 1..L in turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from simreal.bundle import INSTRUCTION_IDS, INSTRUCTION_MASK, OnnxPolicy, load_bundle
from simreal.policies.run_config import RunConfig, make_env
from simreal.policies.torch_policy import module_to_onnx
from simreal.policies.vla.model import CHECKPOINT, VLA, DeployedVLA, load_vla


def graph_inputs(model: VLA, n: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random inputs of the bundle's graph, by input name (module docstring)."""
    g = torch.Generator().manual_seed(seed)
    spec, L = model.spec, model.spec.max_tokens
    state = model.state_mean + 2.0 * model.state_std * torch.randn(n, spec.state_size, generator=g)
    vocab = model.text.get_input_embeddings().num_embeddings
    mask = (torch.arange(L)[None] < (1 + torch.arange(n)[:, None] % L)).long()  # lengths 1..L in turn
    return {
        "obs": state,
        INSTRUCTION_IDS: torch.randint(0, vocab, (n, L), generator=g) * mask,
        INSTRUCTION_MASK: mask,
        **{
            f"image.{c}": torch.randint(0, 256, (n, h, w, 3), generator=g, dtype=torch.uint8)
            for c, (h, w) in spec.cameras.items()
        },
    }


def export_vla(
    run_dir: Path, cfg: RunConfig, out_dir: Path | None = None, env: Any | None = None
) -> tuple[Path, float]:
    """Write the bundle (default ``run_dir/bundle``) for the run's env (``env`` when the caller
    built it); returns (its folder, max |ONNX Runtime - torch|)."""
    from simreal.policies.export import write_bundle

    model, tok = load_vla(Path(run_dir) / CHECKPOINT)
    env = env if env is not None else make_env(cfg)
    deployed = DeployedVLA(model).eval()
    graph = module_to_onnx(deployed, graph_inputs(model, 1))
    spec = model.spec
    out = write_bundle(
        Path(run_dir),
        cfg,
        env,
        graph,
        model.state_mean.numpy(),
        model.state_std.numpy(),
        out_dir,
        sections={
            "images": [{"name": c, "height": h, "width": w} for c, (h, w) in spec.cameras.items()],
            "instruction": {"tokenizer": "tokenizer.json", "max_tokens": spec.max_tokens},
        },
        files={"tokenizer.json": tok.to_str().encode()},
    )
    return out, check_vla_export(out, deployed)


def check_vla_export(bundle_dir: Path, deployed: DeployedVLA, n: int = 32) -> float:
    """Max |ONNX Runtime - torch| of the deployed action over ``n`` random inputs (:func:`graph_inputs`)."""
    x = graph_inputs(deployed.vla, n, seed=1)
    with torch.no_grad():
        want = deployed(*x.values()).numpy()
    policy = OnnxPolicy(load_bundle(bundle_dir))
    got = policy.graph(x["obs"].numpy(), {k: v.numpy() for k, v in x.items() if k != "obs"})
    return float(np.max(np.abs(got - want)))
