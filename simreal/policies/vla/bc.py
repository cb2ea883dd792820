"""Behaviour cloning of the VLA (``simreal train-bc DATASET --policy vla``): cross-entropy of the
teacher's binned actions given the camera images, the instruction and the state::

    loss = - mean over frames t and action dimensions j of log softmax(logits_j(o_t, I_e))[b_j(a_t)]

with ``b_j`` the bin of ``a_t``'s dimension j (``simreal/policies/vla/model.py``), ``o_t`` the frame's images
and state, ``I_e`` its episode's instruction (LeRobot's task string). Images are shifted by up to
``train.vla.shift_px`` pixels at random in training (DrQ's augmentation, edges replicated): with
a few dozen demonstrations a vision encoder otherwise memorises pixel positions. Episodes, not
frames, are split into training and validation (``train.val_fraction``); the checkpoint keeps the
epoch whose deployed action (the most likely bins) is closest to the teacher's on the validation
frames, mean |a - a_teacher|: the validation cross-entropy keeps rising while that error still
falls (a confident neighbouring bin costs as much as a far one), so it would keep an early,
vaguer policy. ``metrics.csv`` has a row per epoch (losses and that error).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch.nn import functional as F

from simreal.errors import DataFileError
from simreal.policies.demos.record import ACTION, IMAGE_PREFIX, STATE


@dataclasses.dataclass
class VLADemos:
    """Every frame of a dataset, with what the VLA reads (arrays over frames)."""

    state: np.ndarray  # (F, n) f32
    action: np.ndarray  # (F, m) f32
    images: dict[str, np.ndarray]  # camera -> (F, H, W, 3) u8
    sentence: np.ndarray  # (F,) int, index into ``sentences``
    sentences: list[str]  # the dataset's instructions
    episode: np.ndarray  # (F,) episode index
    stats: dict[str, Any]  # meta/stats.json


def load_vla_demos(root: str | Path, cameras: tuple[str, ...], env: Any) -> VLADemos:
    """The dataset's frames for a VLA (``cameras``: its image features' camera names; empty: every
    one it has); DataFileError naming the file and feature that is missing, of another size than
    the task ``env``'s, or recorded at another rate than its control rate."""
    from simreal.dataset.reader import Dataset
    from simreal.policies.bc.cloning import check_rate
    from simreal.policies.demos.record import state_size

    ds = Dataset(root)
    check_rate(ds, env)
    info = str(Path(root) / "meta" / "info.json")
    have = [
        k[len(IMAGE_PREFIX) :]
        for k, ft in ds.features.items()
        if k.startswith(IMAGE_PREFIX) and ft["dtype"] in ("video", "image")
    ]
    cams = tuple(cameras) or tuple(have)
    if not cams:
        raise DataFileError(
            info,
            "no camera images (observation.images.<camera>): a VLA sees through a camera; "
            "record with simreal demos --camera NAME",
        )
    for c in cams:
        if c not in have:
            raise DataFileError(
                info, f"no feature '{IMAGE_PREFIX}{c}' (train.vla.cameras); cameras: {', '.join(have) or 'none'}"
            )
    for key, size in ((STATE, state_size(env)), (ACTION, int(env.action_size))):
        shape = list(ds.features.get(key, {}).get("shape", []))
        if shape != [size]:
            raise DataFileError(info, f"feature '{key}' has shape {shape or 'none'}; the task's env has [{size}]")
    if ds.num_episodes < 1:
        raise DataFileError(info, "no episodes")
    eps = [ds.episode(i) for i in range(ds.num_episodes)]
    sentences = sorted({ds.episode_task(i) for i in range(ds.num_episodes)})
    which = [sentences.index(ds.episode_task(i)) for i in range(ds.num_episodes)]
    return VLADemos(
        state=np.concatenate([e[STATE] for e in eps]).astype(np.float32),
        action=np.concatenate([e[ACTION] for e in eps]).astype(np.float32),
        images={c: np.concatenate([e[IMAGE_PREFIX + c] for e in eps]) for c in cams},
        sentence=np.concatenate([np.full(len(e[ACTION]), w) for e, w in zip(eps, which)]),
        sentences=sentences,
        episode=np.concatenate([np.full(len(e[ACTION]), i) for i, e in enumerate(eps)]),
        stats=ds.stats,
    )


def action_range(stats: dict[str, Any], floor: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) per action dimension: the dataset's q01 and q99, widened to at least ``floor``
    around their middle (a dimension the teacher held constant still gets usable bins)."""
    a = stats[ACTION]
    lo, hi = np.asarray(a["q01"], np.float64), np.asarray(a["q99"], np.float64)
    mid, half = (lo + hi) / 2, np.maximum((hi - lo) / 2, floor / 2)
    return np.clip(mid - half, -1.0, 1.0), np.clip(mid + half, -1.0, 1.0)


def shift(images: torch.Tensor, pad: int, gen: torch.Generator) -> torch.Tensor:
    """(N, H, W, 3) u8 images each shifted by a random whole-pixel offset in [-pad, pad]^2 (DrQ)."""
    if pad <= 0:
        return images
    n, h, w, _ = images.shape
    x = F.pad(images.permute(0, 3, 1, 2).float(), (pad, pad, pad, pad), mode="replicate")
    dx, dy = (torch.randint(0, 2 * pad + 1, (n,), generator=gen) for _ in range(2))
    out = torch.stack([x[i, :, dy[i] : dy[i] + h, dx[i] : dx[i] + w] for i in range(n)])
    return out.permute(0, 2, 3, 1).to(torch.uint8)


@dataclasses.dataclass(frozen=True)
class VLAFit:
    best_epoch: int
    train_loss: float
    val_loss: float
    val_action_error: float  # mean |mode action - teacher action| on validation frames
    gradient_steps: int


def train_vla_bc(run_dir: Path, cfg: Any, quiet: bool = False, env: Any | None = None) -> Any:
    """Fit a new VLA to ``cfg.train.dataset`` (module docstring), write its checkpoint and
    metrics.csv, and evaluate it in simulation (on ``env`` when the caller built it); returns
    ``policies.bc.BCResult``."""
    import os
    import sys

    from simreal.policies.bc.actor import STD_FLOOR
    from simreal.policies.bc.cloning import BCResult, FitResult, split_episodes
    from simreal.policies.demos.record import state_size
    from simreal.policies.run_config import make_env
    from simreal.policies.vla.model import CHECKPOINT, VLASpec, build_vla, save_vla, tokenize
    from simreal.policies.vla.rollout import evaluate
    from simreal.progress import Progress
    from simreal.rundir import MetricsCsv

    t0 = time.time()
    tc, vc = cfg.train, cfg.train.vla
    env = env if env is not None else make_env(cfg)
    demos = load_vla_demos(tc.dataset, vc.cameras, env)
    spec = VLASpec(
        cameras={c: tuple(im.shape[1:3]) for c, im in demos.images.items()},
        state_size=state_size(env),
        action_size=int(env.action_size),
        bins=vc.bins,
        max_tokens=vc.max_tokens,
        use_state=vc.use_state,
    )
    torch.manual_seed(cfg.seed)
    st = demos.stats[STATE]
    lo, hi = action_range(demos.stats)
    model, tok = build_vla(
        vc, spec, demos.sentences, np.asarray(st["mean"]), np.maximum(np.asarray(st["std"]), STD_FLOOR), lo, hi
    )
    ids, mask = (torch.from_numpy(a) for a in tokenize(tok, demos.sentences))
    train_ep, val_ep = split_episodes(int(demos.episode.max()) + 1, tc.val_fraction, cfg.seed)
    tr, va = (np.flatnonzero(np.isin(demos.episode, e)) for e in (train_ep, val_ep))
    state = torch.from_numpy(demos.state)
    images = {c: torch.from_numpy(im) for c, im in demos.images.items()}
    target = model.bin_of(torch.from_numpy(demos.action))
    sentence = torch.from_numpy(demos.sentence)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.learning_rate, weight_decay=tc.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    per_epoch = -(-len(tr) // tc.batch_size)
    progress = Progress(tc.epochs * per_epoch, stream=open(os.devnull, "w") if quiet else sys.stderr)
    metrics = MetricsCsv(run_dir / "metrics.csv")

    def logits(idx: torch.Tensor, augment: bool) -> torch.Tensor:
        ims = [shift(images[c][idx], vc.shift_px, gen) if augment else images[c][idx] for c in spec.cameras]
        return model(state[idx], ids[sentence[idx]], mask[sentence[idx]], *ims)

    best: VLAFit | None = None
    steps = 0
    for epoch in range(1, tc.epochs + 1):
        model.train()
        total = 0.0
        for b in torch.from_numpy(tr)[torch.randperm(len(tr), generator=gen)].split(tc.batch_size):
            loss = F.cross_entropy(logits(b, True).flatten(0, 1), target[b].flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
            steps += 1
            progress.update(steps, epoch=f"{epoch}/{tc.epochs}", loss=loss.item())
        model.eval()
        val, err = float("nan"), float("nan")
        if len(va):
            with torch.no_grad():
                out = [(logits(b, False), b) for b in torch.from_numpy(va).split(256)]
                val = float(
                    sum(F.cross_entropy(lg.flatten(0, 1), target[b].flatten(), reduction="sum") for lg, b in out)
                ) / (len(va) * spec.action_size)
                err = float(sum((model.mode(lg) - torch.from_numpy(demos.action[b])).abs().sum() for lg, b in out)) / (
                    len(va) * spec.action_size
                )
        kept = best is None or not len(va) or err <= best.val_action_error
        if kept:
            best = VLAFit(epoch, total / len(tr), val, err, steps)
            save_vla(
                run_dir / CHECKPOINT,
                model,
                tok,
                {"epoch": epoch, "dataset": str(tc.dataset), "train": total / len(tr), "val": val},
            )
        metrics.append(
            {
                "epoch": epoch,
                "gradient_steps": steps,
                "wall_s": time.time() - t0,
                "loss/train": total / len(tr),
                "loss/val": val,
                "val_action_error": err,
            }
        )
        metrics.flush()
    progress.close()
    from simreal.policies.vla.model import load_vla

    model, tok = load_vla(run_dir / CHECKPOINT)  # the kept epoch, as saved
    evaluation = evaluate(env, cfg.task, model, tok, tc.num_eval_envs, seed=cfg.seed + 1)
    metrics.rows[-1].update({f"eval_{k}": v for k, v in evaluation.items()})
    metrics.flush()
    kept_fit = cast(VLAFit, best)  # train.epochs >= 1: an epoch was kept
    return BCResult(
        run_dir=run_dir,
        fit=FitResult(kept_fit.best_epoch, kept_fit.train_loss, kept_fit.val_loss, steps),
        eval=evaluation,
        wall_s=time.time() - t0,
    )
