"""Keypoint maps: which robot frame follows which human keypoint (``configs/retarget/<robot>.yaml``).

    keypoints:
      pelvis:     {site: pelvis, orientation_weight: 1.0}
      torso:      {body: torso_link, pos: [0.0, 0.0, 0.22], orientation_weight: 0.5}
      left_knee:  {site: left_knee}
      left_foot:  {site: left_foot, orientation_weight: 0.5}   # the sole: contact constraints use it
    velocity_limit_rad_s: 20.0   # for joints the robot spec does not limit (a user's MJCF/URDF)
    joint_ranges: {left_knee_joint: [0.0, .inf]}   # narrower than the robot's, for retargeting only
    interaction: {window: 4}     # optional solver overrides (simreal/retarget/settings.py)

Keys are canonical human keypoints (simreal/retarget/joint_names.py, plus ``left_foot`` and
``right_foot``, the soles). A target is a ``site`` of the model, or a ``body`` with a
``pos`` offset [m] in the body frame (a site is added there). ``pelvis``, ``left_foot`` and
``right_foot`` are required: the root follows the pelvis and the feet carry the contacts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from simreal.config import build, configs_dir, deep_merge, field
from simreal.errors import ConfigError
from simreal.retarget.joint_names import CANONICAL
from simreal.retarget.settings import ContactConfig, IKConfig, InteractionConfig
from simreal.yaml_io import load_yaml

KEYPOINTS: tuple[str, ...] = (*CANONICAL, "left_foot", "right_foot")
REQUIRED: tuple[str, ...] = ("pelvis", "left_foot", "right_foot")


@dataclasses.dataclass(frozen=True)
class KeypointTarget:
    """A robot frame: a ``site``, or a ``body`` plus ``pos`` offset [m]."""

    site: str | None = field(None, doc="site name in the robot model")
    body: str | None = field(None, doc="body name, with pos")
    pos: tuple[float, ...] = field((0.0, 0.0, 0.0), doc="offset in the body frame [m]")
    position_weight: float = field(1.0, min=0.0, doc="keypoint position cost weight [1/m^2]")
    orientation_weight: float = field(0.0, min=0.0, doc="orientation cost weight [1/rad^2]")


@dataclasses.dataclass(frozen=True)
class KeypointMap:
    """A robot's keypoint map and solver overrides."""

    keypoints: dict[str, KeypointTarget]
    robot: str = field("", doc="robot spec name this map is for (informational)")
    velocity_limit_rad_s: float | None = field(None, min=0.0, doc="joints without a spec limit [rad/s]")
    joint_ranges: dict[str, tuple[float, ...]] = field(
        {},
        doc="joint name -> [low, high] [rad]: the retargeted motion keeps inside it and the robot's own "
        "range (a human knee does not bend backwards, a robot's may)",
    )
    ik: IKConfig = field(IKConfig())
    interaction: InteractionConfig = field(InteractionConfig())
    contacts: ContactConfig = field(ContactConfig())
    source: str = field("", doc="file this map was read from")


def default_map_path(robot_name: str) -> Path:
    """``configs/retarget/<robot_name>.yaml``."""
    return configs_dir() / "retarget" / f"{robot_name}.yaml"


def load_keypoint_map(path: str | Path, overrides: dict | None = None) -> KeypointMap:
    """Read and validate a keypoint map; ``overrides`` (nested mapping) win over the file."""
    p = Path(path)
    if not p.is_file():
        shipped = sorted(q.stem for q in (configs_dir() / "retarget").glob("*.yaml"))
        raise ConfigError(
            "keypoint_map",
            f"keypoint map not found: {p}; shipped maps: {', '.join(shipped)}; "
            "write one for your robot (see docs/retarget.md) and pass --map",
        )
    data = deep_merge(load_yaml(p), overrides or {})
    data.setdefault("source", str(p))
    kmap = build(KeypointMap, data)
    for name, t in kmap.keypoints.items():
        key = f"keypoints.{name}"
        if name not in KEYPOINTS:
            raise ConfigError(key, f"unknown keypoint; valid: {', '.join(KEYPOINTS)}", str(p))
        if (t.site is None) == (t.body is None):
            raise ConfigError(key, "set exactly one of 'site' or 'body' (with 'pos')", str(p))
        if len(t.pos) != 3:
            raise ConfigError(f"{key}.pos", f"expected [x, y, z] in [m], got {list(t.pos)}", str(p))
    for name, rng in kmap.joint_ranges.items():
        if len(rng) != 2 or not rng[0] < rng[1]:
            raise ConfigError(
                f"joint_ranges.{name}", f"expected [low, high] [rad] with low < high, got {list(rng)}", str(p)
            )
    missing = [k for k in REQUIRED if k not in kmap.keypoints]
    if missing:
        raise ConfigError("keypoints", f"missing required keypoint(s) {', '.join(missing)}", str(p))
    if kmap.interaction.stride > kmap.interaction.window:
        raise ConfigError(
            "interaction.stride",
            f"must be <= interaction.window ({kmap.interaction.window}), got {kmap.interaction.stride}",
            str(p),
        )
    return kmap
