"""Where the object is, from a calibrated camera: a success detector's input on a robot that has
no motion capture (``object_pos_w`` for the arm-push and arm-pick suites).

A fixed scene camera, calibrated (intrinsics from a checkerboard, OpenCV's
``calibrateCamera``; its pose in the robot's base frame from a marker or a hand-eye
calibration), sees an object of a known colour resting on, or held above, a known plane::

    mask    = HSV(image) in [hsv_low, hsv_high]                 (cv2.inRange; OpenCV's H in 0..179)
    (u, v)  = centroid of the mask's largest connected component (at least min_area_px pixels)
    d_c     = K^-1 [u, v, 1]^T                                  the pixel's ray, camera frame
    d_w     = R_wc d_c,  p_w = t_wc + s d_w,  s = (z_plane - t_wc,z) / d_w,z

with OpenCV's camera axes (x right, y down, z forward), ``R_wc``, ``t_wc`` the camera's
orientation and position in the world (the robot's base frame). The centroid of the visible
blob is the object's centre only up to the object's own depth: a 5 cm cube seen from 45 degrees
above shows its top and one side, and the side's pixels, below the centre's plane, meet the
plane beyond the object: the estimate moves away from the camera by several millimetres
(5-14 mm for the arm tasks' 5 cm cube seen by their front camera, docs/benchmarks-log.md); ``plane_z_m``
is the height of the object's centre (half its size on a table).

A calibration file (YAML, ``yaml.safe_load``)::

    width: 640
    height: 480
    fx: 615.0
    fy: 615.0
    cx: 320.0
    cy: 240.0
    position_m: [1.1, 0.0, 0.6]          # the camera's optical centre in the base frame
    rotation_wxyz: [w, x, y, z]          # camera (OpenCV axes) to base frame
    object:
      hsv_low: [0, 120, 70]
      hsv_high: [15, 255, 255]
      plane_z_m: 0.025
      min_area_px: 30

:func:`mujoco_camera` gives the same calibration for a camera of a MuJoCo model (intrinsics
from its vertical field of view, pose from the simulation), so the twin validates the locator
against the simulation's ground truth (docs/benchmarks-log.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from simreal.config import build, field


@dataclasses.dataclass(frozen=True)
class ObjectColour:
    """What the object looks like and where it rests (module docstring)."""

    hsv_low: tuple[float, ...] = field((0.0, 120.0, 70.0), doc="HSV lower bound (OpenCV: H 0..179, S, V 0..255)")
    hsv_high: tuple[float, ...] = field((15.0, 255.0, 255.0), doc="HSV upper bound")
    plane_z_m: float = field(0.025, doc="height of the object's centre in the base frame [m]")
    min_area_px: int = field(30, min=1, doc="smallest blob taken as the object [px]")


@dataclasses.dataclass(frozen=True)
class CameraCalibration:
    """A pinhole camera with its pose (module docstring's file)."""

    width: int = field(640, min=1, doc="image width [px]")
    height: int = field(480, min=1, doc="image height [px]")
    fx: float = field(615.0, min=1e-6, doc="focal length x [px]")
    fy: float = field(615.0, min=1e-6, doc="focal length y [px]")
    cx: float = field(320.0, doc="principal point x [px]")
    cy: float = field(240.0, doc="principal point y [px]")
    position_m: tuple[float, ...] = field((0.0, 0.0, 0.0), doc="optical centre in the base frame [m]")
    rotation_wxyz: tuple[float, ...] = field((1.0, 0.0, 0.0, 0.0), doc="camera (OpenCV axes) to base frame")
    object: ObjectColour = field(ObjectColour(), doc="the object the locator looks for")

    def rotation(self) -> np.ndarray:
        """R_wc (3, 3): camera axes (x right, y down, z forward) in the base frame."""
        w, x, y, z = np.asarray(self.rotation_wxyz, np.float64) / np.linalg.norm(self.rotation_wxyz)
        return np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
            ]
        )


def load_calibration(path: str | Path) -> CameraCalibration:
    """A calibration file; a bad or missing key is a ConfigError naming it and the file."""
    from simreal.errors import ConfigError
    from simreal.yaml_io import load_yaml

    try:
        return build(CameraCalibration, load_yaml(path))
    except ConfigError as e:
        raise ConfigError(e.key, str(e).split(": ", 1)[1], str(path)) from None


def pixel_on_plane(cal: CameraCalibration, u: float, v: float, plane_z_m: float) -> np.ndarray | None:
    """The world point [m] where pixel (u, v)'s ray meets the plane z = ``plane_z_m``; None when
    the ray runs parallel to it or meets it behind the camera."""
    ray_c = np.array([(u - cal.cx) / cal.fx, (v - cal.cy) / cal.fy, 1.0])
    ray_w = cal.rotation() @ ray_c
    origin = np.asarray(cal.position_m, np.float64)
    if abs(ray_w[2]) < 1e-9:
        return None
    s = (plane_z_m - origin[2]) / ray_w[2]
    return None if s <= 0 else origin + s * ray_w


class ObjectLocator:
    """``object_pos_w`` from one RGB image (module docstring); ``None`` when no blob is large
    enough (the object hidden or out of view)."""

    def __init__(self, cal: CameraCalibration):
        self.cal = cal
        c = cal.object
        self.low = np.asarray(c.hsv_low, np.uint8)
        self.high = np.asarray(c.hsv_high, np.uint8)

    def mask(self, image_rgb: np.ndarray) -> np.ndarray:
        """The object's pixels (H, W) bool."""
        import cv2

        hsv = cv2.cvtColor(np.ascontiguousarray(image_rgb), cv2.COLOR_RGB2HSV)
        return cv2.inRange(hsv, self.low, self.high) > 0

    def __call__(self, image_rgb: np.ndarray) -> np.ndarray | None:
        import cv2

        h, w = image_rgb.shape[:2]
        if (w, h) != (self.cal.width, self.cal.height):
            from simreal.errors import ConfigError

            raise ConfigError(
                "width/height",
                f"the calibration is for {self.cal.width}x{self.cal.height} images, the camera gives {w}x{h}",
            )
        n, labels, stats, centroids = cv2.connectedComponentsWithStats(self.mask(image_rgb).astype(np.uint8))
        if n < 2:
            return None
        k = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
        if stats[k, cv2.CC_STAT_AREA] < self.cal.object.min_area_px:
            return None
        u, v = centroids[k]
        return pixel_on_plane(self.cal, float(u), float(v), self.cal.object.plane_z_m)


def mujoco_camera(
    model: Any, data: Any, camera: str, width: int, height: int, obj: ObjectColour = ObjectColour()
) -> CameraCalibration:
    """The calibration of a MuJoCo model's camera at ``data``'s state, for ``width`` x ``height``
    images: ``fy = (height / 2) / tan(fovy / 2)``, square pixels, the principal point at the
    image centre (pixel centres at integer + 0.5, so ``c = size / 2 - 0.5`` in OpenCV's
    convention, where pixel k spans [k - 0.5, k + 0.5]); MuJoCo's camera looks along its -z with
    +y up, so OpenCV's axes are MuJoCo's with y and z negated."""
    from scipy.spatial.transform import Rotation

    cam = model.camera(camera).id
    f = (height / 2) / np.tan(np.radians(model.cam_fovy[cam]) / 2)
    R = data.cam_xmat[cam].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return CameraCalibration(
        width=width,
        height=height,
        fx=f,
        fy=f,
        cx=width / 2 - 0.5,
        cy=height / 2 - 0.5,
        position_m=tuple(data.cam_xpos[cam].tolist()),
        rotation_wxyz=(w, x, y, z),
        object=obj,
    )
