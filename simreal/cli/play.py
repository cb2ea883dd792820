"""``simreal play``: render an mp4 of a trained policy (one episode after another).

    simreal play runs/quadrotor-hover/20261121-120000
    simreal play RUN_DIR --episodes 3 --out hover.mp4 --camera chase
    simreal play RUN_DIR --steps 100                 # at most 100 control steps per episode

Works on every trainer's runs (brax, sb3, rsl_rl): the run's deterministic policy drives the
task's env, and MuJoCo's offscreen renderer draws each control step; the video is written
with imageio's ffmpeg to ``RUN_DIR/videos/play.mp4``. Progress (frames rendered of the most the
episodes can have, frames/s, ETA) goes to stderr.

Headless OpenGL as :mod:`simreal.sim.headless_gl` chooses it (a ``MUJOCO_GL`` set by the user,
else EGL, then OSMesa); none working is one error line saying what to install.
"""

from __future__ import annotations

import argparse

from simreal.config import positive_int_arg, seed_arg
from simreal.sim.headless_gl import HEADLESS_GL, use_headless_gl

HELP = "render a video of a trained policy"
FOLLOW = "follow"  # not a camera of the model: a free camera that tracks the robot (simreal/sim/follow_camera.py)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir")
    p.add_argument("--episodes", type=positive_int_arg, default=1)
    p.add_argument(
        "--steps",
        type=positive_int_arg,
        default=None,
        help="at most this many control steps per episode (default: the whole episode)",
    )
    p.add_argument("--out", default=None, help="mp4 path (default RUN_DIR/videos/play.mp4)")
    p.add_argument(
        "--camera",
        default=None,
        help=f"camera name in the model, or '{FOLLOW}' for one that follows the robot "
        "(default: the model's first camera; without one, follow)",
    )
    p.add_argument("--width", type=positive_int_arg, default=480)
    p.add_argument("--height", type=positive_int_arg, default=360)
    p.add_argument("--seed", type=seed_arg, default=0)


def run(args: argparse.Namespace) -> int:
    gl = use_headless_gl()
    import warnings
    from pathlib import Path

    # imageio starts ffmpeg with fork() while JAX's threads run; the child only execs ffmpeg.
    warnings.filterwarnings("ignore", message=".*fork.*", category=RuntimeWarning)

    import sys

    import imageio.v2 as imageio
    import jax
    import mujoco
    import numpy as np

    from simreal.errors import SimrealError, UnknownNameError
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers import get_trainer
    from simreal.progress import Progress
    from simreal.sim.cameras import camera_names
    from simreal.sim.follow_camera import FollowCamera

    run_dir = Path(args.run_dir)
    cfg = load_config(run_dir, reward=False)
    policy = get_trainer(cfg.trainer).load(run_dir, cfg)
    env = policy.env
    m = env.mj_model
    cameras = camera_names(m)
    if args.camera is not None and args.camera not in {*cameras, FOLLOW}:
        raise UnknownNameError("camera", args.camera, [*cameras, FOLLOW])
    offscreen = (m.vis.global_.offwidth, m.vis.global_.offheight)
    if args.width > offscreen[0] or args.height > offscreen[1]:
        raise SimrealError(
            f"--width/--height {args.width}x{args.height} exceed the model's offscreen framebuffer "
            f"{offscreen[0]}x{offscreen[1]}"
        )
    try:
        renderer = mujoco.Renderer(m, args.height, args.width)
    except Exception as e:  # the GL libraries' own errors, whatever their type
        raise SimrealError(
            f"cannot open an offscreen renderer with MUJOCO_GL={gl} ({e}); unset MUJOCO_GL to let "
            f"simreal try {' then '.join(HEADLESS_GL)}"
        ) from None
    # the model's first camera, else one that follows the robot (a clip that starts metres away)
    following = args.camera == FOLLOW and FOLLOW not in cameras or args.camera is None and not m.ncam
    follow = FollowCamera(m) if following else None
    camera = args.camera if args.camera is not None else 0
    steps = min(args.steps or env.episode_steps, env.episode_steps)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    d = mujoco.MjData(m)
    out = Path(args.out) if args.out else run_dir / "videos" / "play.mp4"
    if out.is_dir():  # checked before the rendering, which leaves its frames in a temporary file
        raise SimrealError(f"--out {out}: is a folder; expected the path of the .mp4 file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp.mp4")
    # at most episodes x steps frames (an episode that ends early has fewer): the progress line's total
    progress = Progress(args.episodes * steps, stream=sys.stderr, unit="frames")
    progress.message(
        f"rendering up to {args.episodes} x {steps} frames at {args.width}x{args.height} to {out} "
        "(the first compiles the env's reset and step) ..."
    )
    frames = 0
    with imageio.get_writer(tmp, fps=round(1.0 / env.ctrl_dt), codec="libx264", quality=7, macro_block_size=1) as w:
        key = jax.random.PRNGKey(args.seed)
        for episode in range(args.episodes):
            key, k = jax.random.split(key)
            state = reset(k)
            policy.reset()
            for t in range(steps):  # noqa: B007 - read after the loop (the frames an early end left out)
                d.qpos[:] = np.asarray(state.pipeline_state.qpos)
                if m.nmocap:  # the episode's markers (arm-reach's goal sphere), else at the model's default
                    d.mocap_pos[:] = np.asarray(env.mocap_pos(state.info)).reshape(m.nmocap, 3)
                mujoco.mj_forward(m, d)
                renderer.update_scene(d, camera=follow(d) if follow is not None else camera)
                w.append_data(renderer.render())  # type: ignore[attr-defined]  # imageio's stub: get_writer returns a Writer
                state = step(state, policy.act(state.obs))
                frames += 1  # counted after the step: the first one's compile is not in the rate
                progress.update(frames, episode=f"{episode + 1}/{args.episodes}")
                if float(state.done) > 0:
                    break
            progress.total -= steps - 1 - t  # the frames an early end left out
    progress.close()
    renderer.close()
    tmp.replace(out)
    print(f"video: {out} ({frames} frames)")
    return 0
