"""Batched rendering: many environments' states seen through named cameras, on CPU threads.

    renderer = BatchRenderer(model, ["front"], nthread=2)
    images = renderer.render(qpos)               # {'pixels/front': (B, H, W, 3) uint8}
    obs = renderer.observe(state.qpos)           # the same from inside jit/vmap (host callback)

Each worker thread owns one OpenGL context (a context is current in one thread at a time)
and one ``mujoco.Renderer`` per image size, and renders a contiguous share of the batch:
``mj_kinematics`` + ``mj_camlight`` place the bodies and cameras (all a scene needs; no
dynamics), ``mjv_updateScene``, ``mjr_render``, read-back. MuJoCo's functions release the GIL,
so the threads render in parallel. From inside a jitted, vmapped env function
:meth:`BatchRenderer.observe` is a ``jax.pure_callback`` with ``vmap_method="broadcast_all"``
that receives the whole batch at once, as the native physics backend does.

What a policy camera does not need is turned off on the renderer's own copy of the model (the
task's model is not touched): the offscreen framebuffer is sized to the largest camera
(MuJoCo's default is 640x480), no multisampling, no shadows, reflections, skybox, fog or
haze, coarser sphere and capsule meshes, and infinite planes drawn as finite squares
(``PLANE_HALF_EXTENT_M``): MuJoCo draws an infinite plane as a grid out to the far clip plane,
which on Mesa's software rasteriser (llvmpipe) was 85% of an arm scene's frame. Sites, joints
and other decorations stay hidden (geoms only).

Images are of the nominal model: per-env randomised physics fields (masses, gains) do not
change what a camera sees. Keys follow Brax's convention: ``pixels/<camera>`` (H, W, 3) uint8
RGB, and ``depth/<camera>`` (H, W, 1) float32 distance along the optical axis [m] for cameras
asked for depth.

Written by hand because no library renders a batch of MuJoCo states on a pool of GL contexts.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import queue
import threading
import weakref
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from simreal.errors import UnknownNameError
from simreal.sim.cameras import camera_names

#: Half size of the square an infinite plane is drawn as [m] (also its grid spacing: one quad).
PLANE_HALF_EXTENT_M = 5.0
#: Slices and stacks of sphere, capsule and cylinder meshes (MuJoCo's defaults: 28, 16): at
#: policy resolutions the facets are sub-pixel, and on llvmpipe this halves an arm frame's cost.
MESH_SLICES, MESH_STACKS = 12, 6
_OFF_FLAGS = (
    mujoco.mjtRndFlag.mjRND_SHADOW,
    mujoco.mjtRndFlag.mjRND_REFLECTION,
    mujoco.mjtRndFlag.mjRND_SKYBOX,
    mujoco.mjtRndFlag.mjRND_FOG,
    mujoco.mjtRndFlag.mjRND_HAZE,
)


@dataclasses.dataclass(frozen=True)
class Camera:
    """One camera a :class:`BatchRenderer` draws: its id in the model, image size [px], depth on/off."""

    name: str
    id: int
    width: int
    height: int
    depth: bool

    @property
    def keys(self) -> tuple[str, ...]:
        """Observation keys this camera fills."""
        return (f"pixels/{self.name}",) + ((f"depth/{self.name}",) if self.depth else ())


def render_model(
    model: mujoco.MjModel,
    width: int,
    height: int,
    plane_half_extent_m: float = PLANE_HALF_EXTENT_M,
    grid_m: float | None = None,
) -> mujoco.MjModel:
    """A copy of ``model`` set up for fast images of at most ``width`` x ``height`` [px] (module
    docstring): infinite planes become squares of ``plane_half_extent_m`` with grid lines every
    ``grid_m`` (default: the half extent); ``model`` itself is unchanged."""
    m = copy.deepcopy(model)
    m.vis.global_.offwidth, m.vis.global_.offheight = int(width), int(height)
    m.vis.quality.offsamples = 0
    m.vis.quality.numslices, m.vis.quality.numstacks = MESH_SLICES, MESH_STACKS
    planes = (m.geom_type == mujoco.mjtGeom.mjGEOM_PLANE) & np.any(m.geom_size[:, :2] <= 0, axis=1)
    m.geom_size[planes] = [plane_half_extent_m, plane_half_extent_m, grid_m or plane_half_extent_m]
    return m


def scene_option() -> mujoco.MjvOption:
    """Geoms only: no sites, joints or other decorations in a policy's image."""
    opt = mujoco.MjvOption()
    opt.sitegroup[:] = 0
    return opt


def lean_renderer(model: mujoco.MjModel, height: int, width: int) -> mujoco.Renderer:
    """``mujoco.Renderer`` of ``height`` x ``width`` with what a policy camera does not need
    (shadows, reflections, skybox, fog, haze) turned off; ``model`` from :func:`render_model`.
    Needs a current-able GL context (``simreal.sim.headless_gl``)."""
    r = mujoco.Renderer(model, height, width)
    for flag in _OFF_FLAGS:
        r.scene.flags[flag] = False
    return r


class _Worker(threading.Thread):
    """A thread owning one GL context's renderers; renders the rows of each job it is sent.

    A plain thread with its own queue rather than a ``ThreadPoolExecutor``: the GL contexts
    must be made, used and freed on the same thread, and an executor cannot address one.
    """

    def __init__(self, model: mujoco.MjModel, cameras: Sequence[Camera]):
        super().__init__(daemon=True)
        self.model, self.cameras = model, cameras
        self.jobs: queue.Queue = queue.Queue()
        self.done: queue.Queue = queue.Queue()
        self.start()

    def run(self) -> None:
        m, opt = self.model, scene_option()
        try:
            renderers = {}
            for c in self.cameras:
                if (c.height, c.width) not in renderers:
                    renderers[(c.height, c.width)] = lean_renderer(m, c.height, c.width)
            d = mujoco.MjData(m)
            home = mocap_home(m)
        except Exception as e:  # the GL libraries' own errors, whatever their type
            self.done.put(e)
            return
        self.done.put(None)
        while (job := self.jobs.get()) is not None:
            rows, qpos, mocap_pos, out = job
            try:
                for i in rows:
                    d.qpos[:] = qpos[i]
                    d.mocap_pos[:] = home if mocap_pos is None else mocap_pos[i]
                    mujoco.mj_kinematics(m, d)
                    mujoco.mj_camlight(m, d)
                    for c in self.cameras:
                        r = renderers[(c.height, c.width)]
                        r.update_scene(d, camera=c.id, scene_option=opt)
                        r.render(out=out[f"pixels/{c.name}"][i])
                        if c.depth:
                            r.enable_depth_rendering()
                            r.render(out=out[f"depth/{c.name}"][i, ..., 0])
                            r.disable_depth_rendering()
                self.done.put(None)
            except Exception as e:  # handed to the caller, which raises it
                self.done.put(e)
        for r in renderers.values():
            r.close()


def _stop(workers: Sequence[_Worker]) -> None:
    """End the workers; each frees its GL context (``BatchRenderer.close``)."""
    for w in workers:
        w.jobs.put(None)
    for w in workers:
        w.join(timeout=10)


def mocap_home(model: mujoco.MjModel) -> np.ndarray:
    """(nmocap, 3) [m]: where the model itself puts its mocap bodies (mocap ids follow body order)."""
    return np.asarray(model.body_pos[model.body_mocapid >= 0], np.float32).reshape(model.nmocap, 3)


class BatchRenderer:
    """Renders a batch of states from named cameras on ``nthread`` threads (module docstring).

    Args:
      model: the task's compiled model (its cameras carry their image sizes, ``cam_resolution``).
      cameras: names of the model's cameras to render, in observation order.
      depth: names among ``cameras`` that also give a depth image.
      nthread: worker threads, one GL context each (default: one per CPU core).

    ``close()`` frees the GL contexts (also at exit, or when the renderer is collected).
    """

    def __init__(
        self, model: mujoco.MjModel, cameras: Sequence[str], depth: Sequence[str] = (), nthread: int | None = None
    ):
        from simreal.sim.headless_gl import use_headless_gl

        names = camera_names(model)
        for name in list(cameras) + list(depth):
            if name not in names:
                raise UnknownNameError("camera", name, names)
        cams = []
        for n in cameras:
            i = names.index(n)
            width, height = map(int, model.cam_resolution[i])
            cams.append(Camera(n, i, width, height, n in depth))
        self.cameras = tuple(cams)
        use_headless_gl()
        self.model = render_model(model, max(c.width for c in self.cameras), max(c.height for c in self.cameras))
        self.nthread = max(1, int(nthread or os.cpu_count() or 1))
        self._workers = [_Worker(self.model, self.cameras) for _ in range(self.nthread)]
        # at exit at the latest: a GL context freed during interpreter teardown prints errors
        self.close = weakref.finalize(self, _stop, self._workers)
        errors = [w.done.get() for w in self._workers]
        if any(errors):
            self.close()
            from simreal.errors import SimrealError

            err = next(e for e in errors if e)
            raise SimrealError(
                f"cannot open an offscreen renderer with MUJOCO_GL={os.environ.get('MUJOCO_GL')} "
                f"({err}); unset MUJOCO_GL to let simreal pick EGL or OSMesa"
            ) from None

    def output_shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        """Shape and dtype of each observation key, per env."""
        out = {}
        for c in self.cameras:
            out[f"pixels/{c.name}"] = jax.ShapeDtypeStruct((c.height, c.width, 3), jnp.uint8)
            if c.depth:
                out[f"depth/{c.name}"] = jax.ShapeDtypeStruct((c.height, c.width, 1), jnp.float32)
        return out

    def render(
        self, qpos: np.ndarray, active: np.ndarray | None = None, mocap_pos: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Images of every camera for each row of ``qpos`` (B, nq); rows where ``active`` (B,) is
        False are left zero (not rendered). ``mocap_pos`` (B, nmocap, 3) [m] places the model's
        mocap bodies (a task's goal marker); default: where the model puts them."""
        qpos = np.asarray(qpos, np.float64)
        b = qpos.shape[0]
        if mocap_pos is not None:
            mocap_pos = np.asarray(mocap_pos, np.float64).reshape(b, self.model.nmocap, 3)
        out = {k: np.zeros((b,) + s.shape, s.dtype) for k, s in self.output_shapes().items()}
        rows = np.arange(b) if active is None else np.flatnonzero(np.asarray(active).reshape(b))
        shares = [s for s in np.array_split(rows, self.nthread) if s.size]
        for w, share in zip(self._workers, shares):
            w.jobs.put((share, qpos, mocap_pos, out))
        errors = [w.done.get() for w, _ in zip(self._workers, shares)]
        err = next((e for e in errors if e is not None), None)
        if err is not None:
            raise err
        return out

    def _host_render(self, qpos: np.ndarray, active: np.ndarray, mocap_pos: np.ndarray) -> dict[str, np.ndarray]:
        batch_shape = qpos.shape[:-1]
        flat = self.render(
            qpos.reshape(-1, qpos.shape[-1]),
            np.asarray(active).reshape(-1),
            mocap_pos.reshape(-1, self.model.nmocap, 3) if self.model.nmocap else None,
        )
        return {k: v.reshape(batch_shape + v.shape[1:]) for k, v in flat.items()}

    def observe(
        self, qpos: jax.Array, active: jax.Array | None = None, mocap_pos: jax.Array | None = None
    ) -> dict[str, jax.Array]:
        """:meth:`render` from inside jit/vmap: one host callback for the whole batch.

        Args:
          qpos: (nq,) per env (vmapped: the callback sees (B, nq)).
          active: bool per env; False leaves that env's images zero (not rendered). Default: True.
          mocap_pos: (nmocap, 3) per env [m]; default: the model's own mocap positions.
        """
        active = jnp.bool_(True) if active is None else jnp.asarray(active, jnp.bool_)
        mocap: jax.Array | np.ndarray = mocap_home(self.model) if mocap_pos is None else mocap_pos
        return jax.pure_callback(
            self._host_render,
            self.output_shapes(),
            qpos,
            active,
            jnp.asarray(mocap, jnp.float32).reshape(self.model.nmocap, 3),
            vmap_method="broadcast_all",
        )

    def __enter__(self) -> BatchRenderer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def sized_renderer(
    model: mujoco.MjModel, cameras: Mapping[str, tuple[int, int]], nthread: int | None = None
) -> BatchRenderer:
    """A :class:`BatchRenderer` of the model cameras ``cameras`` (name -> (H, W) [px]) at those
    sizes, on a copy of ``model`` (a camera's image size is the model's ``cam_resolution``)."""
    m = copy.deepcopy(model)
    names = camera_names(m)
    for cam, (h, w) in cameras.items():
        if cam not in names:
            raise UnknownNameError("camera", cam, names)
        m.cam_resolution[names.index(cam)] = (w, h)
    return BatchRenderer(m, list(cameras), nthread=nthread)
