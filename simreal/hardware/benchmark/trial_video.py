"""A benchmark trial on video: frames at a fixed rate of trial time, an mp4 and a contact sheet.

``simreal benchmark ... --videos N --out DIR`` films the first ``N`` trials of each condition
(:func:`simreal.hardware.benchmark.harness.run_benchmark`). A frame source is a function returning the
current RGB image (H, W, 3) uint8:

- on the twin, :class:`TwinCamera`: MuJoCo's offscreen renderer (headless EGL or OSMesa,
  :mod:`simreal.sim.headless_gl`) on the twin's own model and state, through
  :class:`~simreal.sim.follow_camera.FollowCamera` (it follows a free-flying or walking robot's
  base and looks at an arm's workspace);
- on a real robot, a camera of :mod:`simreal.hardware.record.cameras` (``--camera SOURCE``): its
  newest frame.

:class:`TrialFilm` takes a frame whenever the trial's clock passes the next multiple of
``1 / fps`` (simulated time on the twin, so a twin's video plays at real speed however fast the
twin ran), then writes the mp4 (H.264 through imageio's ffmpeg, atomically) and a PNG contact
sheet of :data:`SHEET_FRAMES` frames evenly spaced in time, which the Markdown report shows
inline (most Markdown viewers do not play video).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from simreal.yaml_io import atomic_write_bytes

VIDEO_FPS = 30
VIDEO_SIZE = (320, 240)  # width, height [px]
SHEET_FRAMES = 4
#: The floor a video shows, a square of this half size [m] with a 1 m grid (an infinite plane
#: costs 30x the frame on Mesa's llvmpipe); a robot that leaves it is seen over the void.
FLOOR_HALF_EXTENT_M = 50.0


class TrialFilm:
    """Frames of one trial from ``grab`` at ``fps`` of trial time (module docstring)."""

    def __init__(self, grab: Callable[[], np.ndarray], fps: int = VIDEO_FPS):
        self.grab, self.fps = grab, fps
        self.frames: list[np.ndarray] = []
        self._next = 0.0

    def tick(self, t_s: float) -> None:
        """The trial's clock reads ``t_s`` [s] (from its start): take the frames that are due."""
        if t_s + 1e-9 >= self._next:
            self.frames.append(np.array(self.grab(), np.uint8))
            self._next = (np.floor(t_s * self.fps + 1e-6) + 1) / self.fps

    def save(self, path: Path) -> dict[str, Any]:
        """Write ``path`` (mp4) and ``path`` with ``.png`` (the contact sheet); returns the
        entry the results carry: file names relative to ``path``'s folder, and the frame count."""
        import imageio.v2 as imageio

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp.mp4")
        with warnings.catch_warnings():
            # imageio starts ffmpeg with fork() while JAX's threads run; the child only execs ffmpeg.
            warnings.filterwarnings("ignore", message=".*fork.*", category=RuntimeWarning)
            with imageio.get_writer(tmp, fps=self.fps, codec="libx264", quality=7, macro_block_size=1) as w:
                for f in self.frames:
                    w.append_data(f)  # type: ignore[attr-defined]  # imageio stub: __enter__ says _BaseReaderWriter
        tmp.replace(path)
        sheet = path.with_suffix(".png")
        atomic_write_bytes(sheet, contact_sheet(self.frames, self.fps))
        return {"video": path.name, "sheet": sheet.name, "frames": len(self.frames)}


def contact_sheet(frames: list[np.ndarray], fps: float, n: int = SHEET_FRAMES) -> bytes:
    """PNG bytes: ``n`` frames evenly spaced from the first to the last, side by side, each
    titled with its time [s]."""
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    picks = np.unique(np.linspace(0, len(frames) - 1, n).round().astype(int))
    h, w = frames[0].shape[:2]
    fig = Figure(figsize=(len(picks) * w / 100, h / 100 + 0.3), layout="constrained")
    for ax, k in zip(np.atleast_1d(fig.subplots(1, len(picks))), picks):
        ax.imshow(frames[k])
        ax.set_title(f"{k / fps:.1f} s", fontsize=8)
        ax.axis("off")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


class TwinCamera:
    """Renders a twin's current state (module docstring). ``state()`` returns the twin's live
    ``MjData`` (the twin builds a new one per trial); the model is the twin's own."""

    def __init__(self, model: Any, state: Callable[[], Any], free_base: bool, size: tuple[int, int] = VIDEO_SIZE):
        from simreal.errors import SimrealError
        from simreal.sim.follow_camera import FollowCamera
        from simreal.sim.headless_gl import use_headless_gl
        from simreal.sim.render import lean_renderer, render_model, scene_option

        with warnings.catch_warnings():  # the probe's child process only runs a Python
            warnings.filterwarnings("ignore", message=".*fork.*", category=RuntimeWarning)
            gl = use_headless_gl()
        w, h = size
        try:  # the policy cameras' renderer (simreal/sim/render.py): a finite floor, no shadows: 30x faster on llvmpipe
            self.renderer = lean_renderer(render_model(model, w, h, FLOOR_HALF_EXTENT_M, grid_m=1.0), h, w)
        except Exception as e:  # the GL libraries' own errors, whatever their type
            raise SimrealError(
                f"cannot open an offscreen renderer with MUJOCO_GL={gl} ({e}); run without --videos, or set MUJOCO_GL"
            ) from None
        self.option = scene_option()
        self.state, self.camera = state, FollowCamera(model, free_base)

    def __call__(self) -> np.ndarray:
        d = self.state()
        self.renderer.update_scene(d, camera=self.camera(d), scene_option=self.option)
        return self.renderer.render()

    def close(self) -> None:
        self.renderer.close()
