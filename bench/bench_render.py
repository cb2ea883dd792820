"""Frames/s of the batched renderer on an arm scene, and what pixels cost an env step.

    python bench/bench_render.py                          # 1 and 2 threads, 64 and 128 px, RGB and RGB+depth
    python bench/bench_render.py --threads 2 --sizes 64 --batch 512 --envs 64

Rows:
- ``mujoco.Renderer as is``: one thread, MuJoCo's defaults (640x480 offscreen buffer with 4x
  multisampling, shadows, reflections, skybox, 28x16 meshes, the infinite floor drawn as a grid
  to the far plane): the baseline the issue measured;
- ``BatchRenderer``: :mod:`simreal.sim.render` (buffer sized to the camera, no multisampling,
  no shadows/reflections/skybox/fog/haze, 12x6 meshes, a finite floor), ``--batch`` states of
  ``arm-push-pixels`` (Franka, its ``front`` camera resized) rendered per call, best of
  ``--repeats`` calls;
- env-steps/s of ``arm-push`` (state) and ``arm-push-pixels`` (state + 64x64 RGB, the same
  physics) on the native backend, a ``lax.scan`` of ``--steps`` steps of ``--envs`` envs
  (``bench_throughput.time_env``), and their ratio: the cost of a pixel env step.

The machine's load average is printed before and after (the 2-core development machines are
shared; a loaded machine gives fewer frames/s). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import mujoco
import numpy as np
from bench_throughput import time_env


def camera_override(size: int) -> str:
    """The ``env.cameras`` override giving arm-push-pixels' front camera ``size`` x ``size`` px."""
    return (
        f"env.cameras=[{{name: front, pos: [0.75, 0.0, 0.7], lookat: [0.42, 0.0, 0.0], fovy_deg: 50, "
        f"width: {size}, height: {size}}}]"
    )


def arm_states(env, batch: int) -> np.ndarray:
    """(batch, nq) qpos of fresh arm-push-pixels episodes (random cube, joints around home)."""
    qpos, *_ = jax.vmap(env.sample_initial)(jax.random.split(jax.random.PRNGKey(0), batch))
    return np.asarray(qpos, np.float64)


def best_fps(render, qpos: np.ndarray, repeats: int) -> float:
    """Best frames/s over ``repeats`` calls of ``render(qpos)`` after one warm-up call."""
    render(qpos)
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        render(qpos)
        best = max(best, qpos.shape[0] / (time.perf_counter() - t))
    return best


def default_renderer_fps(model: mujoco.MjModel, qpos: np.ndarray, size: int, repeats: int) -> float:
    """mujoco.Renderer with every default, one thread, camera 'front'."""
    r, d = mujoco.Renderer(model, size, size), mujoco.MjData(model)

    def render(q):
        for row in q:
            d.qpos[:] = row
            mujoco.mj_forward(model, d)
            r.update_scene(d, camera="front")
            r.render()

    try:
        return best_fps(render, qpos, repeats)
    finally:
        r.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    p.add_argument("--batch", type=int, default=256, help="states rendered per call")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--envs", type=int, default=64, help="envs of the env-step rows")
    p.add_argument("--steps", type=int, default=20, help="control steps per timed env rollout")
    args = p.parse_args()

    from simreal.policies.run_config import make_env, resolve
    from simreal.sim.render import BatchRenderer

    load0 = os.getloadavg()
    rows = []
    for size in args.sizes:
        env = make_env(resolve("arm-push-pixels", ["backend=native", "env.render_threads=1", camera_override(size)]))
        qpos = arm_states(env, args.batch)
        if size == min(args.sizes):
            n = max(8, args.batch // 16)  # the defaults are slow: fewer frames
            rows.append(
                ("mujoco.Renderer as is", size, 1, "rgb", default_renderer_fps(env.mj_model, qpos[:n], size, 2))
            )
        env.renderer.close()
        for depth in (False, True):
            for nthread in args.threads:
                with BatchRenderer(env.mj_model, ["front"], ["front"] if depth else [], nthread=nthread) as r:
                    rows.append(
                        (
                            "BatchRenderer",
                            size,
                            nthread,
                            "rgb+depth" if depth else "rgb",
                            best_fps(r.render, qpos, args.repeats),
                        )
                    )
    steps = {}
    for task in ("arm-push", "arm-push-pixels"):
        env = make_env(resolve(task, ["backend=native"]))
        steps[task] = time_env(jax.vmap(env.reset), jax.vmap(env.step), env.action_size, args.envs, args.steps, 3)
    load1 = os.getloadavg()

    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, MUJOCO_GL="
        f"{os.environ.get('MUJOCO_GL')}, load average (1 min) {load0[0]:.2f} before, {load1[0]:.2f} after\n"
    )
    print("| renderer | px | threads | images | frames/s |\n|---|---|---|---|---|")
    for name, size, nthread, mode, fps in rows:
        print(f"| {name} | {size}x{size} | {nthread} | {mode} | {fps:,.0f} |")
    state, pixels = steps["arm-push"], steps["arm-push-pixels"]
    print(f"\n| task ({args.envs} envs, native) | env-steps/s |\n|---|---|")
    print(f"| arm-push (state) | {state:,.0f} |\n| arm-push-pixels (state + 64x64 RGB) | {pixels:,.0f} |")
    print(
        f"\na pixel env step costs {state / pixels:.1f}x a state env step "
        f"({1e3 / pixels:.3f} vs {1e3 / state:.3f} ms per env-step)"
    )


if __name__ == "__main__":
    main()
