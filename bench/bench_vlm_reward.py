"""Throughput of the zero-shot VLM reward (``simreal.rewards.vlm.ClipReward``): images/s on CPU.

Needs a CLIP or SigLIP model on disk (no weights ship with simreal and nothing downloads at
run time); on a machine with network, first::

    hf download openai/clip-vit-base-patch32 --local-dir models/clip-vit-base-patch32

then::

    python bench/bench_vlm_reward.py --model models/clip-vit-base-patch32            # rendered arm-push frames
    python bench/bench_vlm_reward.py --model DIR --size 128 --count 64 --batch 32
    python bench/bench_vlm_reward.py --model DIR --frames a.png b.png rollout.npy    # your own frames

Frames: ``--frames`` .png files or .npy arrays ((H, W, 3) or (N, H, W, 3) uint8, one size
throughout), else ``--count`` frames of ``--task`` rendered with MuJoCo's offscreen renderer
at ``--size`` px, the joints jittered per frame. Either way tiled to ``--count`` frames.

With ``--correlate FRAMES.npz`` (what ``simreal frames`` writes from a dataset whose episodes
carry the task's reward, ``next.reward``), it scores every frame instead and reports the
Spearman rank correlation of the VLM reward with the task's reward, over all frames and within
each episode (the mean: what shaping needs), for the ``--prompt`` / ``--baseline`` given::

    simreal demos arm-reach --teacher scripted --episodes 20 --camera front --image-size 224x224 --out reach_cam
    simreal frames reach_cam --camera front --out reach_frames.npz
    python bench/bench_vlm_reward.py --model DIR --correlate reach_frames.npz \
        --prompt "a robot gripper touching the green sphere" --baseline "a robot arm"

Timed: one ``reward(frames)`` call over all ``--count`` frames (the model's processor, the
image tower in chunks of ``--batch``, the reward math), best of ``--repeats`` after one
warm-up call; the text embeddings, computed once at construction, are not timed. Prints a
markdown table; a model given without weights is one line and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

NEEDS_MODEL = (
    "needs --model DIR, a local CLIP or SigLIP directory: no weights ship with simreal and nothing "
    "downloads at run time; on a machine with network run `hf download openai/clip-vit-base-patch32 "
    "--local-dir DIR` and copy DIR here"
)


def load_frames(paths: list[str]) -> np.ndarray:
    """Frames (N, H, W, 3) uint8 from .png files and .npy arrays."""
    import imageio.v2 as imageio

    from simreal.errors import DataFileError

    frames = []
    for p in paths:
        a = np.load(p) if p.endswith(".npy") else np.asarray(imageio.imread(p))[..., :3]
        a = a[None] if a.ndim == 3 else a
        if a.ndim != 4 or a.shape[-1] != 3 or a.dtype != np.uint8:
            raise DataFileError(p, f"expected RGB frames (H, W, 3) or (N, H, W, 3) uint8, got {a.shape} {a.dtype}")
        if frames and a.shape[1:] != frames[0].shape[1:]:
            raise DataFileError(p, f"frame size {a.shape[1:3]} differs from the first file's {frames[0].shape[1:3]}")
        frames.append(a)
    return np.concatenate(frames)


def render_frames(task: str, size: int, count: int, seed: int) -> np.ndarray:
    """``count`` frames (size, size, 3) uint8 of ``task``'s scene, joints jittered by up to 0.3 rad."""
    from simreal.sim.headless_gl import use_headless_gl

    use_headless_gl()
    import mujoco

    from simreal.policies.run_config import make_env, resolve

    m = make_env(resolve(task), backend="native").mj_model
    m.vis.global_.offwidth, m.vis.global_.offheight = size, size  # a framebuffer the frame's size, no larger
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    hinges = [m.jnt_qposadr[j] for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    frames = np.empty((count, size, size, 3), np.uint8)
    with mujoco.Renderer(m, size, size) as renderer:
        for i in range(count):
            d.qpos[:] = m.key_qpos[0] if m.nkey else m.qpos0
            d.qpos[hinges] += rng.uniform(-0.3, 0.3, len(hinges))
            mujoco.mj_forward(m, d)
            renderer.update_scene(d, camera=0 if m.ncam else -1)
            frames[i] = renderer.render()
    return frames


def correlate(reward, path: str, model: str) -> int:
    """Print the Spearman correlation of ``reward`` with the frames' ``task_reward`` (module
    docstring); DataFileError naming the member that is missing or malformed."""
    from scipy.stats import spearmanr

    from simreal.npz import open_npz

    with open_npz(path, "frames npz written by simreal frames") as z:
        if "task_reward" not in z:
            raise z.error("task_reward", "is missing: nothing to correlate with (its dataset has no next.reward)")
        frames = z.array("frames", "(N, H, W, 3) uint8 frames")
        truth = z.floats("task_reward", "(N,) the task's reward at each frame")
        episodes = np.stack([z.array("dataset_index", "(N,) int"), z.array("episode_index", "(N,) int")], 1)
    r = np.asarray(reward(frames), np.float64)
    per = [
        spearmanr(r[m], truth[m])[0]
        for m in (np.all(episodes == e, 1) for e in np.unique(episodes, axis=0))
        if m.sum() > 2 and np.ptp(truth[m]) > 0
    ]
    print(f"{reward.model.config.model_type} `{model}` on {len(r)} frames of {path} ({len(per)} episodes)")
    print("| Spearman with the task's reward | all frames | within episodes (mean) |")
    print("| --- | ---: | ---: |")
    print(f"| VLM reward | {spearmanr(r, truth)[0]:.3f} | {np.nanmean(per) if per else float('nan'):.3f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="local CLIP/SigLIP directory, or a repo id in the local Hugging Face cache")
    ap.add_argument("--frames", nargs="*", default=[], help=".png or .npy frames (default: render --task)")
    ap.add_argument("--task", default="arm-push")
    ap.add_argument("--size", type=int, default=64, help="rendered frame size [px]")
    ap.add_argument("--count", type=int, default=64, help="frames per timed call")
    ap.add_argument("--batch", type=int, default=64, help="frames per forward pass (reward.batch_size)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--correlate", metavar="FRAMES.npz", help="score these frames; correlate with their task_reward")
    ap.add_argument("--prompt", action="append", default=[], help="goal prompt (repeatable; default: arm-push's)")
    ap.add_argument("--baseline", action="append", default=[], help="baseline prompt (repeatable)")
    args = ap.parse_args(argv)
    if not args.model:
        print(f"bench_vlm_reward: {NEEDS_MODEL}", file=sys.stderr)
        return 2

    import torch

    from simreal.config import build
    from simreal.errors import SimrealError
    from simreal.rewards.vlm import ClipReward, ClipRewardConfig

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        cfg = build(
            ClipRewardConfig,
            {
                "model": args.model,
                "batch_size": args.batch,
                "prompts": args.prompt or ["a robot arm pushing a cube onto the target"],
                "baselines": args.baseline or ["a robot arm and a cube"],
            },
            prefix="reward",
        )
        reward = ClipReward(cfg)
        if args.correlate:
            return correlate(reward, args.correlate, args.model)
        frames = load_frames(args.frames) if args.frames else render_frames(args.task, args.size, args.count, args.seed)
        frames = np.resize(frames, (args.count, *frames.shape[1:]))  # tile (or cut) to --count frames
    except SimrealError as e:
        print(f"bench_vlm_reward: {e}", file=sys.stderr)
        return 2
    reward(frames)  # warm-up: first-call allocations
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        reward(frames)
        times.append(time.perf_counter() - t0)
    best = min(times)
    source = f"{len(args.frames)} file(s)" if args.frames else f"{args.task} rendered"
    print(
        f"{reward.model.config.model_type} `{args.model}`, {torch.get_num_threads()} torch threads, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    )
    print("| frames | size | batch | best s / call | images/s |")
    print("| --- | --- | ---: | ---: | ---: |")
    print(f"| {source} | {frames.shape[2]}x{frames.shape[1]} | {args.batch} | {best:.3f} | {args.count / best:,.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
