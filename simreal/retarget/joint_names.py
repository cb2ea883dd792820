"""Canonical human keypoints and the joint names different mocap rigs give them.

Retargeting speaks one vocabulary of human keypoints (:data:`CANONICAL`); each rig spells
them its own way: LAFAN1 and Mixamo (``LeftUpLeg``, ``LeftLeg``, ``LeftArm``), CMU
(``lfemur``, ``ltibia`` or the BVH conversions' ``LeftUpLeg``), SMPL / AMASS
(``left_hip``, ``left_knee``), Unreal (``thigh_l``, ``calf_l``), 3ds Max Biped
(``Bip01 L Thigh``). :func:`resolve_keypoints` matches a skeleton's names against the
alias table after normalising case, separators and namespace prefixes (``mixamorig:``, and a
prefix every joint shares, such as MotionBuilder's ``Character1_``); a user's ``joint_map``
(canonical name -> source name) overrides any guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from simreal.errors import ConfigError, DataFileError

# Keypoints, parents first. "torso" is chest level; "left_foot" (the sole) is derived
# later from ankle and toe, so it is not looked up by name.
CANONICAL: tuple[str, ...] = (
    "pelvis",
    "left_hip",
    "right_hip",
    "torso",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
    "left_toe",
    "right_toe",
    "neck",
    "head",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
)
REQUIRED: tuple[str, ...] = ("pelvis", "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")

# Side-less base names in priority order (normalised: lowercase, alphanumerics only).
_CENTRE: dict[str, tuple[str, ...]] = {
    "pelvis": ("hips", "hip", "pelvis"),
    "torso": ("spine2", "chest", "spine03", "spine3", "thorax", "upperback", "spine1", "spine02", "spine"),
    "neck": ("neck", "neck1", "lowerneck", "neck01", "upperneck"),
    "head": ("head",),
}
_SIDED: dict[str, tuple[str, ...]] = {
    "hip": ("upleg", "hip", "thigh", "femur", "upperleg"),
    "knee": ("leg", "knee", "calf", "tibia", "shin", "lowerleg"),
    "ankle": ("ankle", "foot", "tarsus"),
    "toe": ("toebase", "toe", "toes", "ball", "toe0", "foot"),
    "shoulder": ("arm", "upperarm", "humerus", "shoulder"),
    "elbow": ("forearm", "elbow", "lowerarm", "radius"),
    "wrist": ("wrist", "hand"),
}
_SIDE_FORMS = {
    "left": ("left{}", "l{}", "{}left", "{}l", "lft{}"),
    "right": ("right{}", "r{}", "{}right", "{}r", "rt{}"),
}


def normalise(name: str) -> str:
    """``mixamorig:LeftUpLeg`` -> ``leftupleg``; ``Bip01 L Thigh`` -> ``lthigh``."""
    n = re.split(r"[:|]", name)[-1].lower()
    n = re.sub(r"[^a-z0-9]", "", n)
    return re.sub(r"^bip0*1", "", n)


def _candidates(canonical: str) -> list[str]:
    if canonical in _CENTRE:
        return list(_CENTRE[canonical])
    side, part = canonical.split("_", 1)
    return [form.format(base) for base in _SIDED[part] for form in _SIDE_FORMS[side]]


def shared_prefix(names: Sequence[str]) -> str:
    """The prefix every joint name shares up to a separator (``Character1_``), or ''."""
    common = os.path.commonprefix([n for n in names if not n.endswith("_end")] or [""])
    cut = max(common.rfind(sep) for sep in "_: |.-") + 1
    return common[:cut] if 0 < cut < min(len(n) for n in names) else ""


def resolve_keypoints(
    names: Sequence[str],
    joint_map: Mapping[str, str] | None = None,
    required: Sequence[str] = REQUIRED,
    source: str = "",
) -> dict[str, int]:
    """Map canonical keypoints to joint indices of a skeleton.

    Args:
      names: the skeleton's joint names.
      joint_map: canonical name -> source joint name, overriding the alias table.
      required: canonical names that must be found.
      source: the motion file, named by the error when no ``joint_map`` was given.

    Returns:
      canonical name -> index into ``names``, for every keypoint found.

    Raises:
      ConfigError: a ``joint_map`` entry names an unknown keypoint or joint, or a required
        keypoint is not found with one (the message lists the skeleton's joints).
      DataFileError: a required keypoint is not found without a ``joint_map`` (names ``source``).
    """
    joint_map = dict(joint_map or {})
    found: dict[str, int] = {}
    used: set[int] = set()
    for canon, src in joint_map.items():
        if canon not in CANONICAL:
            raise ConfigError(f"joint_map.{canon}", f"unknown keypoint; valid: {', '.join(CANONICAL)}")
        if src not in names:
            raise ConfigError(
                f"joint_map.{canon}", f"no joint named {src!r} in the skeleton; its joints: {', '.join(names)}"
            )
        found[canon] = names.index(src)
        used.add(found[canon])
    prefix = shared_prefix(names)
    norm = [normalise(n.removeprefix(prefix)) for n in names]
    for canon in CANONICAL:
        if canon in found:
            continue
        for cand in _candidates(canon):
            hits = [i for i, n in enumerate(norm) if n == cand and i not in used]
            if hits:
                found[canon] = hits[0]
                used.add(hits[0])
                break
    missing = [c for c in required if c not in found]
    if missing:
        what = (
            f"could not find {', '.join(missing)} in the skeleton (joints: {', '.join(names)}); pass a joint "
            "map (--joint-map FILE.yaml with lines 'canonical: SourceName')"
        )
        if joint_map or not source:
            raise ConfigError("joint_map", what)
        raise DataFileError(source, what)
    return found
