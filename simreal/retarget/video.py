"""``--video``: the retargeted robot beside the source skeleton, as an mp4.

The robot is rendered by MuJoCo; the source human (unscaled keypoints, floor at z = 0) is
drawn as capsules in the same scene, shifted sideways (along the camera's right axis) so the
two stand next to each other; the robot's scaled keypoint targets show as small red spheres
and stance feet as green markers. The camera follows the pair.

Headless machines need an OpenGL backend: ``MUJOCO_GL=egl`` (GPU or Mesa) or ``osmesa``.
When neither ``MUJOCO_GL`` nor ``DISPLAY`` is set, EGL is tried, then OSMesa.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import mujoco
import numpy as np

from simreal.errors import ConfigError
from simreal.retarget.pipeline import RetargetResult
from simreal.retarget.robot import RetargetRobot
from simreal.retarget.scaling import tree_parents

SIDE_OFFSET_M = 1.0


def _gl_context(width: int, height: int):
    """An OpenGL context for offscreen rendering (see the module docstring)."""
    if os.environ.get("MUJOCO_GL") or os.environ.get("DISPLAY"):
        candidates = [lambda: mujoco.GLContext(width, height)]
    else:

        def egl():
            from mujoco.egl import GLContext

            return GLContext(width, height)

        def osmesa():
            from mujoco.osmesa import GLContext

            return GLContext(width, height)

        candidates = [egl, osmesa]
    errors = []
    for make in candidates:
        try:
            return make()
        except Exception as e:  # backends fail with ImportError, OSError or their own errors
            errors.append(str(e))
    raise ConfigError(
        "video",
        "no OpenGL context for offscreen rendering ("
        + "; ".join(errors)
        + "); set MUJOCO_GL=egl (or osmesa) and check the GL libraries",
    )


def _add_geom(scene: mujoco.MjvScene, kind: int, size, pos, mat, rgba) -> int:
    if scene.ngeom >= scene.maxgeom:
        return -1
    g = scene.geoms[scene.ngeom]
    mujoco.mjv_initGeom(
        g,
        kind,
        np.asarray(size, float),
        np.asarray(pos, float),
        np.asarray(mat, float).ravel(),
        np.asarray(rgba, np.float32),
    )
    scene.ngeom += 1
    return scene.ngeom - 1


def _capsule(scene, a, b, radius, rgba) -> None:
    i = _add_geom(scene, mujoco.mjtGeom.mjGEOM_CAPSULE, [radius, 0, 0], a, np.eye(3), rgba)
    if i >= 0:
        mujoco.mjv_connector(
            scene.geoms[i], mujoco.mjtGeom.mjGEOM_CAPSULE, radius, np.asarray(a, float), np.asarray(b, float)
        )


def render_video(
    path: str | Path,
    robot: RetargetRobot,
    result: RetargetResult,
    width: int = 640,
    height: int = 480,
    progress: bool = False,
) -> None:
    """Write ``result`` as an mp4 (H.264 via imageio-ffmpeg) at the motion's frame rate, atomically:
    frames go to ``STEM.tmp.mp4`` beside it, renamed once complete, so an interrupted render (or
    an ffmpeg left finishing after its parent stopped) never stands at ``path``. ``progress``:
    a status line on stderr (frames, rate, ETA) every few seconds (a render on a software GL
    takes minutes: 275 s for a 1,064-frame clip)."""
    import imageio.v2 as imageio

    from simreal.progress import Progress

    final = Path(path)
    path = final.with_name(final.stem + ".tmp" + final.suffix)

    m = copy.deepcopy(robot.model)
    m.vis.global_.offwidth, m.vis.global_.offheight = max(width, 64), max(height, 64)
    d = mujoco.MjData(m)
    ctx = _gl_context(width, height)
    ctx.make_current()
    try:
        scene = mujoco.MjvScene(m, maxgeom=m.ngeom + 200)
        con = mujoco.MjrContext(m, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, con)
        rect = mujoco.MjrRect(0, 0, width, height)
        opt, pert = mujoco.MjvOption(), mujoco.MjvPerturb()
        cam = mujoco.MjvCamera()
        cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        cam.distance, cam.azimuth, cam.elevation = 4.0, 160.0, -10.0
        az = np.deg2rad(cam.azimuth)
        right = np.array([np.sin(az), -np.cos(az), 0.0])  # camera's right axis in the world
        tg = result.targets
        parents = tree_parents(list(tg.keypoints))
        idx = {k: i for i, k in enumerate(tg.keypoints)}
        feet = [idx["left_foot"], idx["right_foot"]]
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        writer = imageio.get_writer(str(path), fps=tg.fps, codec="libx264", quality=7, macro_block_size=1)
        bar = Progress(len(result.qpos), interval_s=5.0, unit="frames") if progress else None
        try:
            for t, q in enumerate(result.qpos):
                d.qpos[:] = q
                mujoco.mj_forward(m, d)
                cam.lookat[:] = q[:3] * [1, 1, 0] + 0.5 * SIDE_OFFSET_M * right + [0, 0, 0.8]  # between the two
                mujoco.mjv_updateScene(m, d, opt, pert, cam, mujoco.mjtCatBit.mjCAT_ALL, scene)
                shift = (q[:3] - tg.human[t, idx["pelvis"]]) * [1, 1, 0] + SIDE_OFFSET_M * right
                human = tg.human[t] + shift
                for k, p in parents.items():
                    if p is not None:
                        _capsule(scene, human[idx[p]], human[idx[k]], 0.025, [0.9, 0.75, 0.55, 1.0])
                for i in range(len(tg.keypoints)):
                    _add_geom(
                        scene,
                        mujoco.mjtGeom.mjGEOM_SPHERE,
                        [0.02, 0, 0],
                        tg.positions[t, i],
                        np.eye(3),
                        [0.9, 0.1, 0.1, 0.8],
                    )
                for f, kp in enumerate(feet):
                    if tg.contacts[t, f]:
                        _add_geom(
                            scene,
                            mujoco.mjtGeom.mjGEOM_CYLINDER,
                            [0.06, 0.002, 0],
                            tg.positions[t, kp] * [1, 1, 0],
                            np.eye(3),
                            [0.1, 0.8, 0.2, 0.9],
                        )
                mujoco.mjr_render(rect, scene, con)
                mujoco.mjr_readPixels(rgb, None, rect, con)
                writer.append_data(np.flipud(rgb))
                if bar is not None:
                    bar.update(t + 1, force=t + 1 == len(result.qpos), video=final.name)
        finally:
            writer.close()
            if bar is not None:
                bar.close()
        con.free()
        os.replace(path, final)
    finally:
        ctx.free()
        path.unlink(missing_ok=True)
