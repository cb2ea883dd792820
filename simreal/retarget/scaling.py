"""Human-to-robot scaling derived from the two skeletons' limb lengths (no hand-tuned table).

Each keypoint hangs off its nearest mapped ancestor in :data:`PARENT` (the human body as a
tree rooted at the pelvis). A segment's ratio is the robot's length over the human's:
robot lengths are distances between keypoint sites in the robot's home pose, human lengths
the median over the clip of the distance between the two keypoints (a mocap skeleton's bones
are rigid, so the median is the bone length; for marker-less keypoints it rejects outliers).
The root (pelvis) position scales by the leg ratio: robot hip-knee-ankle-sole length over the
human's. Scaled keypoints keep the human's segment directions with the robot's lengths:

    p'_root = s_leg * p_root
    p'_k    = p'_parent(k) + s_k * (p_k - p_parent(k))

except the hips (:data:`RIGID`), which sit rigidly on the pelvis, in both bodies one bone with
the hip joints fixed in it: the robot's home offset turned by the human's pelvis frame,

    p'_hip  = p'_pelvis + R_pelvis (h_hip - h_pelvis)

(h: robot home-pose positions, upright and facing +x, so the offset is in the body frame x
forward / y left / z up that R_pelvis (T, 3, 3) maps to the world); the leg hangs from there by
the rule above. The ratio rule would keep the human's pelvis-hip direction, mostly sideways, at
the robot's length, mostly downwards on a G1 (2.6x a Bandai rig's): hip targets 34 cm apart on
23 cm hips, the feet 29 cm apart instead of 18, the pelvis target 5-6 cm low against the legs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

PARENT: dict[str, str | None] = {
    "pelvis": None,
    "left_hip": "pelvis",
    "right_hip": "pelvis",
    "left_knee": "left_hip",
    "right_knee": "right_hip",
    "left_ankle": "left_knee",
    "right_ankle": "right_knee",
    "left_toe": "left_ankle",
    "right_toe": "right_ankle",
    "left_foot": "left_ankle",
    "right_foot": "right_ankle",
    "torso": "pelvis",
    "neck": "torso",
    "head": "neck",
    "left_shoulder": "torso",
    "right_shoulder": "torso",
    "left_elbow": "left_shoulder",
    "right_elbow": "right_shoulder",
    "left_wrist": "left_elbow",
    "right_wrist": "right_elbow",
}
LEG: tuple[str, ...] = ("hip", "knee", "ankle", "foot")
RIGID: tuple[str, ...] = ("left_hip", "right_hip")  # placed at the robot's offset in the parent's frame


@dataclasses.dataclass(frozen=True)
class Scaling:
    """Derived scale factors.

    Attributes:
      root: pelvis position scale (robot leg length / human leg length).
      parents: keypoint -> the keypoint it hangs off (None for the pelvis).
      ratios: keypoint -> robot/human length of the segment to its parent.
      human_lengths, robot_lengths: keypoint -> segment length [m].
      rigid_offsets: keypoint (of :data:`RIGID`) -> the robot's home offset (3,) [m] from its
        parent, in the parent's body frame (x forward, y left, z up).
    """

    root: float
    parents: dict[str, str | None]
    ratios: dict[str, float]
    human_lengths: dict[str, float]
    robot_lengths: dict[str, float]
    rigid_offsets: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "root": self.root,
            "ratios": self.ratios,
            "human_lengths_m": self.human_lengths,
            "robot_lengths_m": self.robot_lengths,
            "rigid_offsets_m": {k: [float(x) for x in v] for k, v in self.rigid_offsets.items()},
        }


def tree_parents(keys: Sequence[str]) -> dict[str, str | None]:
    """Each key's nearest ancestor in :data:`PARENT` that is also in ``keys``."""
    out: dict[str, str | None] = {}
    for k in keys:
        p = PARENT[k]
        while p is not None and p not in keys:
            p = PARENT[p]
        out[k] = p
    return out


def derive_scaling(human: Mapping[str, np.ndarray], robot_home: Mapping[str, np.ndarray]) -> Scaling:
    """Segment ratios from human keypoint tracks (T, 3) [m] and robot home-pose positions (3,) [m].

    Keys of ``robot_home`` are the keypoints to scale; each must be in ``human``. The robot's
    home pose stands upright facing +x (its offsets are then in the body frame).
    """
    keys = [k for k in PARENT if k in robot_home]
    parents = tree_parents(keys)
    ratios, hl, rl = {}, {}, {}
    for k in keys:
        p = parents[k]
        if p is None:
            continue
        hl[k] = float(np.median(np.linalg.norm(human[k] - human[p], axis=-1)))
        rl[k] = float(np.linalg.norm(robot_home[k] - robot_home[p]))
        ratios[k] = rl[k] / hl[k] if hl[k] > 1e-6 else 1.0
    legs = []
    for side in ("left", "right"):
        chain = [f"{side}_{j}" for j in LEG]
        if all(c in hl for c in chain[1:]) and parents[chain[1]] == chain[0]:
            legs.append((sum(rl[c] for c in chain[1:]), sum(hl[c] for c in chain[1:])))
    if legs:
        root = sum(r for r, _ in legs) / sum(h for _, h in legs)
    else:  # no full leg chain mapped: the typical segment ratio
        root = float(np.median(list(ratios.values()))) if ratios else 1.0
    rigid = {
        k: np.asarray(robot_home[k] - robot_home["pelvis"], dtype=float)
        for k in RIGID
        if k in parents and parents[k] == "pelvis"
    }
    return Scaling(float(root), parents, ratios, hl, rl, rigid)


def apply_scaling(
    human: Mapping[str, np.ndarray], scaling: Scaling, frames: Mapping[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """Scaled keypoint tracks (T, 3) [m] for every keypoint in ``scaling.parents`` (module docstring).

    ``frames``: the human's body frames (T, 3, 3) by keypoint, x forward / y left / z up; the
    parent of each keypoint in ``scaling.rigid_offsets`` needs one (the pelvis for the hips).
    """
    out: dict[str, np.ndarray] = {}
    for k, p in scaling.parents.items():  # PARENT order: parents first
        if p is None:
            out[k] = scaling.root * human[k]
        elif k in scaling.rigid_offsets:
            if frames is None or p not in frames:
                raise ValueError(f"apply_scaling: {k} sits rigidly on {p}, which needs its frame in frames")
            out[k] = out[p] + frames[p] @ scaling.rigid_offsets[k]
        else:
            out[k] = out[p] + scaling.ratios[k] * (human[k] - human[p])
    return out
