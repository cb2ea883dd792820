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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

PARENT: dict[str, str | None] = {
    "pelvis": None, "left_hip": "pelvis", "right_hip": "pelvis", "left_knee": "left_hip",
    "right_knee": "right_hip", "left_ankle": "left_knee", "right_ankle": "right_knee",
    "left_toe": "left_ankle", "right_toe": "right_ankle", "left_foot": "left_ankle",
    "right_foot": "right_ankle", "torso": "pelvis", "neck": "torso", "head": "neck",
    "left_shoulder": "torso", "right_shoulder": "torso", "left_elbow": "left_shoulder",
    "right_elbow": "right_shoulder", "left_wrist": "left_elbow", "right_wrist": "right_elbow",
}
LEG: tuple[str, ...] = ("hip", "knee", "ankle", "foot")


@dataclasses.dataclass(frozen=True)
class Scaling:
    """Derived scale factors.

    Attributes:
      root: pelvis position scale (robot leg length / human leg length).
      parents: keypoint -> the keypoint it hangs off (None for the pelvis).
      ratios: keypoint -> robot/human length of the segment to its parent.
      human_lengths, robot_lengths: keypoint -> segment length [m].
    """

    root: float
    parents: dict[str, str | None]
    ratios: dict[str, float]
    human_lengths: dict[str, float]
    robot_lengths: dict[str, float]

    def to_dict(self) -> dict:
        return {"root": self.root, "ratios": self.ratios, "human_lengths_m": self.human_lengths,
                "robot_lengths_m": self.robot_lengths}


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

    Keys of ``robot_home`` are the keypoints to scale; each must be in ``human``.
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
    return Scaling(float(root), parents, ratios, hl, rl)


def apply_scaling(human: Mapping[str, np.ndarray], scaling: Scaling) -> dict[str, np.ndarray]:
    """Scaled keypoint tracks (T, 3) [m] for every keypoint in ``scaling.parents``."""
    out: dict[str, np.ndarray] = {}
    for k, p in scaling.parents.items():  # PARENT order: parents first
        if p is None:
            out[k] = scaling.root * human[k]
        else:
            out[k] = out[p] + scaling.ratios[k] * (human[k] - human[p])
    return out
