"""Retargeting on real motion capture: the issue-10 figures per clip and robot.

    python bench/bench_retarget_real.py ~/mocap/*.bvh                  # g1 and h1, interaction
    python bench/bench_retarget_real.py walk.bvh kick.bvh --robots g1 --method ik

The clips are the user's (public captures such as LAFAN1, CMU or the Bandai Namco Research
Motion dataset; never committed here). Per clip and robot, through the same pipeline as
``simreal retarget`` (graded report included): frames, the solver's frames/s, the fraction of
frames with |hip yaw| > 1 rad, the peak joint speed [rad/s] (backward differences) and its
joint, the fraction of stance foot-frames whose sole is within 1 cm of the ground, the fraction
of foot-frames where the human's foot stands flat (by its speed, not the labels) and the robot's
sole centre moves (slides, or swivels about its pinned edge), slack
(infeasible) frames, and the report's verdict with the checks that are not ``ok``; then what
``simreal retarget`` emits after its default ``--defects repair`` (``simreal/retarget/repair.py``): the
frames kept, in how many parts, the frames bridged (and emitted) and cut, the worst verdict of the parts, and
PD playback's mean follow time over the parts' windows (before -> after). Prints a markdown
table for docs/benchmarks-log.md.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # small dense problems: BLAS threads only contend

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from simreal.retarget.checks import LEVELS  # noqa: E402
from simreal.retarget.contacts import smoothed_tracks  # noqa: E402
from simreal.retarget.loaders import load_motion_source  # noqa: E402
from simreal.retarget.pipeline import retarget  # noqa: E402
from simreal.retarget.repair import fix_defects  # noqa: E402
from simreal.retarget.robot import RetargetRobot, load_robot  # noqa: E402
from simreal.retarget.targets import STILL_M_S, STILL_SMOOTH_S  # noqa: E402

HIP_YAW_LIMIT_RAD = 1.0
GROUND_TOL_M = 0.01


def sole_heights(robot: RetargetRobot, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T, 2) height above z = 0 [m] of each sole's lowest contact: the sole site at its flat-foot
    height, or an edge (ball or heel) of a foot on that edge; and (T, 2, 2) the sole sites' xy [m]."""
    d = mujoco.MjData(robot.model)
    out, xy = np.empty((len(qpos), 2)), np.empty((len(qpos), 2, 2))
    for t, q in enumerate(qpos):
        d.qpos[:] = q
        mujoco.mj_kinematics(robot.model, d)
        rot = d.site_xmat.reshape(-1, 3, 3)
        edges = np.minimum(
            robot.ball_points(d.site_xpos, rot)[:, 2], robot.ball_points(d.site_xpos, rot, robot.heel_local)[:, 2]
        )
        out[t] = np.minimum(d.site_xpos[robot.foot_sites, 2] - robot.sole_height, edges)
        xy[t] = d.site_xpos[robot.foot_sites, :2]
    return out, xy


def slides_where_human_stands(res, xy: np.ndarray) -> float:
    """Fraction of the foot-frames where the human's sole stands flat (slower than ``STILL_M_S``,
    whatever the stance labels say; not on its ball or heel, where the sole's centre swings
    about the edge) in which the robot's sole centre moves faster than that horizontally: a
    foot that slides or swivels about its pinned edge, or one the labels missed."""
    fps = res.motion.fps
    feet = [res.targets.keypoints.index(k) for k in ("left_foot", "right_foot")]
    _, human = smoothed_tracks(res.targets.human[:, feet], fps, STILL_SMOOTH_S)
    robot = np.linalg.norm(np.gradient(xy, axis=0), axis=-1) * fps
    stands = (human < STILL_M_S) & (res.targets.pivot == 0)
    return float((robot[stands] > STILL_M_S).mean()) if stands.any() else float("nan")


def row(clip: Path, robot_name: str, robot: RetargetRobot, method: str) -> str:
    """One markdown row (module docstring)."""
    human = load_motion_source(str(clip))
    t0 = time.perf_counter()
    res = retarget(human, robot, method)
    wall = time.perf_counter() - t0
    m, q = res.motion, res.motion.dof_pos
    names = list(m.joint_names)
    yaw = [i for i, n in enumerate(names) if "hip_yaw" in n]
    hip = float((np.abs(q[:, yaw]) > HIP_YAW_LIMIT_RAD).any(axis=1).mean()) if yaw else float("nan")
    speed = np.abs(np.diff(q, axis=0)) * m.fps
    joint = names[int(speed.max(axis=0).argmax())].removesuffix("_joint")
    stance = m.foot_contacts.astype(bool)
    h, xy = sole_heights(robot, res.qpos)
    slides = slides_where_human_stands(res, xy)
    on_ground = float((np.abs(h[stance]) < GROUND_TOL_M).mean()) if stance.any() else float("nan")
    quality = m.quality
    slack = len(quality["solver"].get("infeasible_frames", []))
    fps = quality["solver"].get("frames_per_s", len(q) / wall)
    flagged = "; ".join(f"{k} {c['level']}" for k, c in quality.get("checks", {}).items() if c["level"] != "ok")
    parts, rec = fix_defects(robot, res)
    kept = sum(p.last - p.first + 1 for p in parts)
    emitted = np.zeros(len(q), dtype=bool)
    for part in parts:
        emitted[part.first : part.last + 1] = True
    bridged = sum(int(emitted[a : b + 1].sum()) for a, b in rec["repaired"])  # bridged and emitted
    cut = len(q) - kept
    verdict = max((p.result.motion.quality["verdict"] for p in parts), key=LEVELS.index, default="-")
    follow = [(p.result.motion.quality["checks"]["feasibility"], p.last - p.first + 1) for p in parts]
    after = sum(f["mean_follow_s"] * n for f, n in follow) / max(kept, 1)
    before = quality["checks"]["feasibility"]["mean_follow_s"]
    return (
        f"| {clip.stem} | {robot_name} | {len(q)} | {fps:.0f} | {100 * hip:.1f} | {speed.max():.1f} ({joint}) | "
        f"{100 * on_ground:.1f} | {100 * slides:.1f} | {slack} | "
        f"{quality.get('verdict', '-')}{': ' + flagged if flagged else ''} | "
        f"{kept} in {len(parts)} | {bridged} / {cut} | {verdict} | {before:.2f} -> {after:.2f} |"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("clips", nargs="+", type=Path)
    p.add_argument("--robots", nargs="+", default=["g1", "h1"])
    p.add_argument("--method", default="interaction", choices=("interaction", "ik"))
    a = p.parse_args()
    load = os.getloadavg()
    print(
        f"`python bench/bench_retarget_real.py {' '.join(sys.argv[1:])}`; {os.cpu_count()} CPUs, load "
        f"{load[0]:.2f} at the start; {time.strftime('%Y-%m-%d')}.\n"
    )
    print(
        f"| clip | robot | frames | solver frames/s | % frames \\|hip yaw\\| > {HIP_YAW_LIMIT_RAD:g} rad | "
        f"peak joint speed [rad/s] | stance soles within 1 cm [%] | robot sole slides where the human's stands [%] | "
        f"slack frames | report | emitted frames in "
        f"parts | frames bridged / cut | emitted verdict | playback follows [s] |"
    )
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | --- | --- | --- |")
    robots = {name: load_robot(name) for name in a.robots}
    for clip in a.clips:
        for name, robot in robots.items():
            print(row(clip, name, robot, a.method), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
