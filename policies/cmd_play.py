"""``simreal play``: render an mp4 of a trained policy (one episode per env shown).

    simreal play runs/quadrotor-hover/20261121-120000
    simreal play RUN_DIR --episodes 3 --out hover.mp4 --camera chase

Rendering uses MuJoCo's offscreen renderer (``MUJOCO_GL=egl`` is set when unset, which
works headless); the video is written with imageio's ffmpeg to ``RUN_DIR/videos/``.
"""

from __future__ import annotations

import argparse
import os

HELP = "render a video of a trained policy"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir")
    p.add_argument("--episodes", type=int, default=1)
    p.add_argument("--out", default=None, help="mp4 path (default RUN_DIR/videos/play.mp4)")
    p.add_argument("--camera", default=None, help="camera name in the model (default: the model's first)")
    p.add_argument("--width", type=int, default=480)
    p.add_argument("--height", type=int, default=360)
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("MUJOCO_GL", "egl")
    import warnings
    from pathlib import Path

    # imageio starts ffmpeg with fork() while JAX's threads run; the child only execs ffmpeg.
    warnings.filterwarnings("ignore", message=".*fork.*", category=RuntimeWarning)

    import imageio.v2 as imageio
    import jax
    import mujoco
    import numpy as np

    from simreal.errors import SimrealError
    from simreal.policies.train import load_config, load_policy

    run_dir = Path(args.run_dir)
    cfg = load_config(run_dir)
    env, ppo, ts = load_policy(run_dir, cfg)
    policy = ppo.make_policy(ppo.policy_params(ts), deterministic=True)
    step = jax.jit(env.step)
    act = jax.jit(lambda obs: policy(obs, jax.random.PRNGKey(0))[0])
    m = env.mj_model
    d = mujoco.MjData(m)
    try:
        renderer = mujoco.Renderer(m, args.height, args.width)
    except Exception as e:
        raise SimrealError(f"cannot open an offscreen renderer ({e}); set MUJOCO_GL=egl or osmesa") from None
    camera = args.camera if args.camera is not None else (0 if m.ncam else -1)
    out = Path(args.out) if args.out else run_dir / "videos" / "play.mp4"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp.mp4")
    fps = round(1.0 / env.ctrl_dt)
    with imageio.get_writer(tmp, fps=fps, codec="libx264", quality=7, macro_block_size=1) as w:
        key = jax.random.PRNGKey(args.seed)
        for _ in range(args.episodes):
            key, k = jax.random.split(key)
            state = jax.jit(env.reset)(k)
            for _t in range(env.episode_steps):
                d.qpos[:] = np.asarray(state.pipeline_state.qpos)
                mujoco.mj_forward(m, d)
                renderer.update_scene(d, camera=camera)
                w.append_data(renderer.render())
                state = step(state, act(state.obs))
                if float(state.done) > 0:
                    break
    tmp.replace(out)
    print(f"video: {out}")
    return 0
