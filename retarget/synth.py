"""Synthesised human motion for tests and benchmarks (no mocap download needed).

A LAFAN1-style skeleton (Z-up, metres, x forward, y left) is driven procedurally:
the root follows a path, feet are planted on footsteps during stance and swing on arcs
between them, legs reach their feet by analytic two-link IK, arms swing or wave. The
result carries its exact joint positions and foot contacts, so loaders and solvers can be
checked against ground truth, and :func:`write_bvh` writes it in any unit, up axis and
channel order a studio might use.

    >>> clip = walking(duration_s=4.0)                                 # doctest: +SKIP
    >>> write_bvh("walk.bvh", clip, units="cm", up="y", order="ZXY")   # doctest: +SKIP

Four clips: :func:`walking`, :func:`running` (flight phases), :func:`dancing` (side
steps, a spin, arms overhead) and :func:`crouching` (feet planted, deep squats).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from scipy.ndimage import gaussian_filter1d
from scipy.spatial.transform import Rotation

from simreal.retarget.rotations import R_ZUP_FROM_YUP
from simreal.retarget.skeleton import UNITS_M, forward_kinematics
from simreal.yaml_io import atomic_write_text

# name, parent, offset [m] in the parent's frame (T-pose, Z-up, x forward, y left).
_SKELETON: tuple[tuple[str, str | None, tuple[float, float, float]], ...] = (
    ("Hips", None, (0.0, 0.0, 0.0)),
    ("LeftUpLeg", "Hips", (0.0, 0.09, -0.06)),
    ("LeftLeg", "LeftUpLeg", (0.0, 0.0, -0.42)),
    ("LeftFoot", "LeftLeg", (0.0, 0.0, -0.41)),
    ("LeftToe", "LeftFoot", (0.14, 0.0, -0.06)),
    ("RightUpLeg", "Hips", (0.0, -0.09, -0.06)),
    ("RightLeg", "RightUpLeg", (0.0, 0.0, -0.42)),
    ("RightFoot", "RightLeg", (0.0, 0.0, -0.41)),
    ("RightToe", "RightFoot", (0.14, 0.0, -0.06)),
    ("Spine", "Hips", (0.0, 0.0, 0.10)),
    ("Spine1", "Spine", (0.0, 0.0, 0.12)),
    ("Spine2", "Spine1", (0.0, 0.0, 0.12)),
    ("Neck", "Spine2", (0.0, 0.0, 0.18)),
    ("Head", "Neck", (0.0, 0.0, 0.10)),
    ("LeftShoulder", "Spine2", (0.0, 0.03, 0.13)),
    ("LeftArm", "LeftShoulder", (0.0, 0.15, 0.0)),
    ("LeftForeArm", "LeftArm", (0.0, 0.27, 0.0)),
    ("LeftHand", "LeftForeArm", (0.0, 0.25, 0.0)),
    ("RightShoulder", "Spine2", (0.0, -0.03, 0.13)),
    ("RightArm", "RightShoulder", (0.0, -0.15, 0.0)),
    ("RightForeArm", "RightArm", (0.0, -0.27, 0.0)),
    ("RightHand", "RightForeArm", (0.0, -0.25, 0.0)),
)
_END_SITES = {"LeftToe": (0.05, 0.0, 0.0), "RightToe": (0.05, 0.0, 0.0), "Head": (0.0, 0.0, 0.15),
              "LeftHand": (0.0, 0.08, 0.0), "RightHand": (0.0, -0.08, 0.0)}
ANKLE_HEIGHT_M = 0.08


@dataclasses.dataclass(frozen=True)
class SynthClip:
    """A synthesised clip with its ground truth.

    Attributes:
      name: clip name (``walking`` ...).
      names, parents: joints (end sites included, named ``<parent>_end``) and tree.
      offsets: (J, 3) rest offsets [m], Z-up.
      root_pos: (T, 3) [m]; local_rots: (T, J, 3, 3) joint rotations in the parent frame.
      positions: (T, J, 3) world joint positions [m], Z-up.
      contacts: (T, 2) ground-truth stance of the left and right foot.
      fps: [Hz].
    """

    name: str
    names: tuple[str, ...]
    parents: tuple[int, ...]
    offsets: np.ndarray
    root_pos: np.ndarray
    local_rots: np.ndarray
    positions: np.ndarray
    contacts: np.ndarray
    fps: float


def skeleton(scale: float = 1.0) -> tuple[tuple[str, ...], tuple[int, ...], np.ndarray]:
    """Joint names, parents and offsets (J, 3) [m] of the synthetic rig, end sites last in each branch."""
    names: list[str] = []
    parents: list[int] = []
    offsets: list[tuple[float, float, float]] = []
    for name, parent, off in _SKELETON:
        names.append(name)
        parents.append(-1 if parent is None else names.index(parent))
        offsets.append(off)
    for parent, off in _END_SITES.items():
        names.append(f"{parent}_end")
        parents.append(names.index(parent))
        offsets.append(off)
    order = _topological(parents)
    names = [names[i] for i in order]
    remap = {old: new for new, old in enumerate(order)}
    parents = [-1 if parents[i] < 0 else remap[parents[i]] for i in order]
    return tuple(names), tuple(parents), scale * np.array([offsets[i] for i in order])


def _topological(parents: list[int]) -> list[int]:
    """Depth-first order (children right after their parent), as BVH nests joints."""
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parents):
        children.setdefault(p, []).append(i)
    out: list[int] = []
    stack = list(reversed(children[-1]))
    while stack:
        j = stack.pop()
        out.append(j)
        stack.extend(reversed(children.get(j, [])))
    return out


def _rot(axis: str, angle: np.ndarray) -> np.ndarray:
    return Rotation.from_euler(axis, np.reshape(angle, (-1, 1))).as_matrix()


def _root_path(t: np.ndarray, v_body: np.ndarray, yaw_rate: np.ndarray, yaw0: float = 0.0):
    """Integrate body-frame velocity (T, 2) [m/s] and yaw rate (T,) [rad/s] to xy and yaw."""
    dt = np.diff(t, prepend=t[0] - (t[1] - t[0]))
    yaw = yaw0 + np.cumsum(yaw_rate * dt)
    c, s = np.cos(yaw), np.sin(yaw)
    vw = np.stack([c * v_body[:, 0] - s * v_body[:, 1], s * v_body[:, 0] + c * v_body[:, 1]], 1)
    return np.cumsum(vw * dt[:, None], axis=0), yaw


def _feet(t, xy, yaw, cycle_s, duty, width, step_h, ankle_h):
    """Ankle positions (T, 2, 3), foot yaw (T, 2) and stance (T, 2) from a footstep plan."""
    T = len(t)
    ankles = np.zeros((T, 2, 3))
    foot_yaw = np.zeros((T, 2))
    stance = np.zeros((T, 2), dtype=bool)
    for f, (phase, side) in enumerate(((0.0, 1.0), (0.5, -1.0))):
        if duty >= 1.0:
            k0 = 0
            p = xy[k0] + width * side * np.array([-np.sin(yaw[k0]), np.cos(yaw[k0])])
            ankles[:, f, :2], ankles[:, f, 2], foot_yaw[:, f], stance[:, f] = p, ankle_h, yaw[k0], True
            continue
        ks = np.arange(np.floor(t[0] / cycle_s - phase) - 1, np.ceil(t[-1] / cycle_s - phase) + 2)
        starts = (ks + phase) * cycle_s
        mids = starts + 0.5 * duty * cycle_s
        mid_i = np.clip(np.searchsorted(t, mids), 0, T - 1)
        steps = xy[mid_i] + width * side * np.stack([-np.sin(yaw[mid_i]), np.cos(yaw[mid_i])], 1)
        for i, ti in enumerate(t):
            k = int(np.searchsorted(starts, ti, side="right") - 1)
            end = starts[k] + duty * cycle_s
            if ti < end:
                ankles[i, f, :2], ankles[i, f, 2] = steps[k], ankle_h
                foot_yaw[i, f], stance[i, f] = yaw[mid_i[k]], True
            else:
                u = (ti - end) / (starts[k + 1] - end)
                s = u * u * (3 - 2 * u)
                ankles[i, f, :2] = steps[k] + s * (steps[k + 1] - steps[k])
                ankles[i, f, 2] = ankle_h + step_h * np.sin(np.pi * u)
                dyaw = np.angle(np.exp(1j * (yaw[mid_i[k + 1]] - yaw[mid_i[k]])))
                foot_yaw[i, f] = yaw[mid_i[k]] + s * dyaw
    return ankles, foot_yaw, stance


def _leg_rotations(H, A, fwd, R_parent, l1, l2, foot_R):
    """Analytic two-link leg IK. Returns local rotations of thigh, shin and foot (T, 3, 3)."""
    d = A - H
    dist = np.linalg.norm(d, axis=1, keepdims=True)
    dn = d / dist
    reach = np.clip(dist, abs(l1 - l2) + 1e-4, (l1 + l2) * 0.99999)
    cos_a = np.clip((l1**2 + reach**2 - l2**2) / (2 * l1 * reach), -1, 1)
    e = fwd - np.sum(fwd * dn, 1, keepdims=True) * dn
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    K = H + l1 * (cos_a * dn + np.sqrt(1 - cos_a**2) * e)
    A_reached = H + reach * dn
    hinge = np.cross(fwd, dn)
    hinge /= np.linalg.norm(hinge, axis=1, keepdims=True)

    def frame(bone):
        z = -bone / np.linalg.norm(bone, axis=1, keepdims=True)
        return np.stack([np.cross(hinge, z), hinge, z], axis=-1)

    G_thigh, G_shin = frame(K - H), frame(A_reached - K)
    tr = lambda M: np.swapaxes(M, -1, -2)  # noqa: E731
    return tr(R_parent) @ G_thigh, tr(G_thigh) @ G_shin, tr(G_shin) @ foot_R


def _assemble(name, fps, t, root_xy, root_z, yaw, pitch, ankles, foot_yaw, stance,
              arm_l, arm_r, elbow, spine_pitch, spine_yaw, scale) -> SynthClip:
    """Pose every joint, clamping pelvis height so both stance feet stay reachable."""
    names, parents, offsets = skeleton(scale)
    ix = {n: i for i, n in enumerate(names)}
    T, J = len(t), len(names)
    l1, l2 = -offsets[ix["LeftLeg"], 2], -offsets[ix["LeftFoot"], 2]
    R_root = _rot("z", yaw) @ _rot("y", pitch)
    hip_off = np.stack([offsets[ix["LeftUpLeg"]], offsets[ix["RightUpLeg"]]])
    # Pelvis height: never so high that a foot is out of reach (else a planted foot slides).
    limit = np.full(T, np.inf)
    for f in range(2):
        H0 = np.einsum("tab,b->ta", R_root, hip_off[f])
        horiz = np.linalg.norm(root_xy + H0[:, :2] - ankles[:, f, :2], axis=1)
        reach = np.sqrt(np.maximum((0.985 * (l1 + l2))**2 - horiz**2, 0))
        limit = np.minimum(limit, ankles[:, f, 2] + reach - H0[:, 2])
    z = gaussian_filter1d(np.minimum(root_z, limit), sigma=max(1.0, 0.03 * fps))
    root = np.concatenate([root_xy, np.minimum(z, limit)[:, None]], axis=1)
    rots = np.broadcast_to(np.eye(3), (T, J, 3, 3)).copy()
    rots[:, ix["Hips"]] = R_root
    fwd = R_root[:, :, 0].copy()
    fwd[:, 2] = 0.0
    fwd /= np.linalg.norm(fwd, axis=1, keepdims=True)
    for f, side in enumerate(("Left", "Right")):
        H = root + np.einsum("tab,b->ta", R_root, hip_off[f])
        foot_R = _rot("z", foot_yaw[:, f])
        th, sh, ft = _leg_rotations(H, ankles[:, f], fwd, R_root, l1, l2, foot_R)
        rots[:, ix[f"{side}UpLeg"]], rots[:, ix[f"{side}Leg"]], rots[:, ix[f"{side}Foot"]] = th, sh, ft
    rots[:, ix["Spine"]] = _rot("z", spine_yaw) @ _rot("y", spine_pitch)
    rots[:, ix["Neck"]] = _rot("y", -0.5 * spine_pitch - 0.5 * pitch) @ _rot("z", -spine_yaw)
    # Arms from T-pose: raise angle about x (-1.4 = hanging), swing about y, elbow about z.
    rots[:, ix["LeftArm"]] = _rot("y", -arm_l[:, 1]) @ _rot("x", arm_l[:, 0])
    rots[:, ix["RightArm"]] = _rot("y", -arm_r[:, 1]) @ _rot("x", -arm_r[:, 0])
    rots[:, ix["LeftForeArm"]] = _rot("z", -elbow[:, 0])
    rots[:, ix["RightForeArm"]] = _rot("z", elbow[:, 1])
    trans = np.broadcast_to(offsets, (T, J, 3)).copy()
    trans[:, ix["Hips"]] = root
    pos = forward_kinematics(parents, trans, rots)
    return SynthClip(name, names, parents, offsets, root, rots, pos, stance, float(fps))


def _gait(name, duration_s, fps, v_body, yaw_rate, cycle_s, duty, width, step_h, z0, bob,
          pitch, arm_amp, arms_up, elbow0, scale):
    t = np.arange(int(round(duration_s * fps))) / fps
    T = len(t)
    xy, yaw = _root_path(t, v_body, yaw_rate)
    ankles, foot_yaw, stance = _feet(t, xy, yaw, cycle_s, duty, width * scale, step_h * scale,
                                     ANKLE_HEIGHT_M * scale)
    phase = 2 * np.pi * t / cycle_s
    root_z = scale * (z0 + bob * np.cos(2 * phase))
    swing = arm_amp * np.sin(phase)
    raise_l = np.where(arms_up, 0.6 * np.sin(0.5 * phase) + 0.3, -1.35)
    raise_r = np.where(arms_up, 0.6 * np.cos(0.5 * phase) + 0.3, -1.35)
    arm_l = np.stack([raise_l + np.zeros(T), -swing], 1)
    arm_r = np.stack([raise_r + np.zeros(T), swing], 1)
    elbow = np.stack([elbow0 + 0.3 * np.maximum(swing, 0), elbow0 + 0.3 * np.maximum(-swing, 0)], 1)
    spine_yaw = 0.15 * np.sin(phase) * (arm_amp > 0)
    return _assemble(name, fps, t, xy, root_z, yaw, np.full(T, pitch), ankles, foot_yaw, stance,
                     arm_l, arm_r, elbow, np.full(T, 0.5 * pitch), spine_yaw, scale)


def walking(duration_s: float = 6.0, fps: float = 30.0, speed_m_s: float = 1.2,
            turn_rate_rad_s: float = 0.15, scale: float = 1.0) -> SynthClip:
    """Walking on a gentle curve: 1.05 s gait cycle, 60 % stance per foot, arm swing."""
    T = int(round(duration_s * fps))
    ramp = np.clip(np.arange(T) / fps / 1.0, 0.2, 1.0)
    v = np.stack([speed_m_s * ramp, np.zeros(T)], 1)
    return _gait("walking", duration_s, fps, v, np.full(T, turn_rate_rad_s), 1.05, 0.6, 0.10, 0.10,
                 0.95, 0.015, 0.04, 0.45, False, 0.25, scale)


def running(duration_s: float = 5.0, fps: float = 30.0, speed_m_s: float = 3.0,
            scale: float = 1.0) -> SynthClip:
    """Running: 0.7 s gait cycle, 35 % stance (flight phases), forward lean, bent elbows."""
    T = int(round(duration_s * fps))
    ramp = np.clip(np.arange(T) / fps / 1.5, 0.3, 1.0)
    v = np.stack([speed_m_s * ramp, np.zeros(T)], 1)
    return _gait("running", duration_s, fps, v, np.full(T, 0.1), 0.7, 0.35, 0.08, 0.18,
                 0.93, 0.03, 0.15, 0.7, False, 1.3, scale)


def dancing(duration_s: float = 8.0, fps: float = 30.0, scale: float = 1.0) -> SynthClip:
    """Dancing: side steps back and forth, one full spin, arms waving overhead."""
    T = int(round(duration_s * fps))
    t = np.arange(T) / fps
    v = np.stack([0.25 * np.sin(2 * np.pi * t / 4.0), 0.45 * np.sin(2 * np.pi * t / 2.0)], 1)
    spin = np.where((t > 3.0) & (t < 5.0), np.pi, 0.0) + 0.4 * np.sin(2 * np.pi * t / 3.0)
    return _gait("dancing", duration_s, fps, v, spin, 0.8, 0.6, 0.12, 0.08, 0.93, 0.02, 0.0,
                 0.0, True, 0.6, scale)


def crouching(duration_s: float = 6.0, fps: float = 30.0, depth_m: float = 0.40,
              scale: float = 1.0) -> SynthClip:
    """Deep squats with both feet planted; the torso leans and the arms reach forward."""
    t = np.arange(int(round(duration_s * fps))) / fps
    T = len(t)
    s = 0.5 * (1 - np.cos(2 * np.pi * t / 3.0))  # 0 standing .. 1 deepest, 3 s per squat
    xy = np.zeros((T, 2))
    yaw = np.zeros(T)
    ankles, foot_yaw, stance = _feet(t, xy, yaw, 1.0, 1.0, 0.13 * scale, 0.0, ANKLE_HEIGHT_M * scale)
    root_z = scale * (0.95 - depth_m * s)
    pitch = 0.45 * s
    arm_l = np.stack([-1.35 + 0.2 * s, 1.2 * s], 1)
    arm_r = arm_l.copy()
    elbow = np.stack([0.2 + 0.3 * s, 0.2 + 0.3 * s], 1)
    return _assemble("crouching", fps, t, xy - np.array([0.06 * scale, 0.0]) * s[:, None], root_z, yaw,
                     pitch, ankles, foot_yaw, stance, arm_l, arm_r, elbow, 0.2 * s, np.zeros(T), scale)


def with_noise(clip: SynthClip, noise_deg: float = 1.0, root_noise_m: float = 0.003, seed: int = 0,
               smooth_frames: float = 1.5) -> SynthClip:
    """Mocap-like noise: smoothed random rotations (std ``noise_deg`` [deg]) on every joint and
    jitter of the root [m]. Planted feet then skate and jitter a little, as in real captures;
    the contact labels stay the intended ones."""
    rng = np.random.default_rng(seed)
    T, J = clip.local_rots.shape[:2]
    rv = gaussian_filter1d(rng.normal(size=(T, J, 3)), smooth_frames, axis=0)
    rv *= np.deg2rad(noise_deg) / max(rv.std(), 1e-12)
    rots = clip.local_rots @ Rotation.from_rotvec(rv.reshape(-1, 3)).as_matrix().reshape(T, J, 3, 3)
    rn = gaussian_filter1d(rng.normal(size=(T, 3)), smooth_frames, axis=0)
    root = clip.root_pos + root_noise_m * rn / max(rn.std(), 1e-12)
    trans = np.broadcast_to(clip.offsets, (T, J, 3)).copy()
    trans[:, 0] = root
    pos = forward_kinematics(clip.parents, trans, rots)
    return dataclasses.replace(clip, name=f"{clip.name}+noise", root_pos=root, local_rots=rots, positions=pos)


CLIPS = {"walking": walking, "running": running, "dancing": dancing, "crouching": crouching}


def write_bvh(path: str | Path, clip: SynthClip, units: str = "cm", up: str = "y",
              order: str = "ZXY", six_channels: bool = False, decimals: int = 6) -> None:
    """Write ``clip`` as BVH.

    Args:
      units: ``m``, ``cm``, ``mm``, ``in`` or ``ft`` for lengths in the file.
      up: ``"y"`` (file is Y-up, the BVH default) or ``"z"``.
      order: rotation channel order for every joint, e.g. ``"ZXY"``, ``"XYZ"``, ``"ZYX"``.
      six_channels: position channels on every joint (some exporters do this), not just the root.
    """
    k = 1.0 / UNITS_M[units]
    C = R_ZUP_FROM_YUP.T if up == "y" else np.eye(3)  # file <- Z-up
    off = k * offsets_file(clip.offsets, C)
    root = k * clip.root_pos @ C.T
    children: dict[int, list[int]] = {}
    for j, p in enumerate(clip.parents):
        children.setdefault(p, []).append(j)
    out = ["HIERARCHY"]
    chans: list[tuple[int, bool]] = []  # (joint, has position channels)
    rot_ch = " ".join(f"{a}rotation" for a in order)

    def emit(j: int, depth: int) -> None:
        ind = "  " * depth
        name = clip.names[j]
        if name.endswith("_end"):
            out.extend([f"{ind}End Site", f"{ind}{{", f"{ind}  OFFSET {_fmt(off[j], decimals)}", f"{ind}}}"])
            return
        kw = "ROOT" if clip.parents[j] < 0 else "JOINT"
        pos = clip.parents[j] < 0 or six_channels
        out.extend([f"{ind}{kw} {name}", f"{ind}{{", f"{ind}  OFFSET {_fmt(off[j], decimals)}",
                    f"{ind}  CHANNELS {6 if pos else 3} " + ("Xposition Yposition Zposition " if pos else "") + rot_ch])
        chans.append((j, pos))
        for c in children.get(j, []):
            emit(c, depth + 1)
        out.append(f"{ind}}}")

    emit(children[-1][0], 0)
    T = clip.root_pos.shape[0]
    out += ["MOTION", f"Frames: {T}", f"Frame Time: {1.0 / clip.fps:.8f}"]
    cols = []
    for j, pos in chans:
        if pos:
            cols.append(root if clip.parents[j] < 0 else np.broadcast_to(off[j], (T, 3)))
        R_file = C @ clip.local_rots[:, j] @ C.T
        cols.append(Rotation.from_matrix(R_file).as_euler(order.upper(), degrees=True))
    table = np.concatenate(cols, axis=1)
    out += [" ".join(f"{v:.{decimals}f}" for v in row) for row in table]
    atomic_write_text(path, "\n".join(out) + "\n")


def offsets_file(offsets: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Offsets (J, 3) rotated into the file's axes by ``C`` (file <- Z-up)."""
    return offsets @ C.T


def _fmt(v: np.ndarray, decimals: int) -> str:
    return " ".join(f"{x:.{decimals}f}" for x in v)
