"""Arm targets that clear the robot's own hips (simreal/retarget/self_clearance.py)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import simreal.retarget.targets as targets_mod
from simreal.retarget.metrics import forward_all
from simreal.retarget.pipeline import retarget
from simreal.retarget.robot import load_robot
from simreal.retarget.self_clearance import SAMPLES, Hips, arm_pushes, hip_obstacles, signed_distance
from simreal.retarget.skeleton import HumanMotion
from tests.fixtures import synth_motion as synth

PRIMITIVES = """
<mujoco>
  <worldbody>
    <geom name="sphere" type="sphere" size="0.05" pos="0 0 0"/>
    <geom name="capsule" type="capsule" size="0.04 0.1" pos="0.5 0 0" euler="30 60 0"/>
    <geom name="cylinder" type="cylinder" size="0.06 0.08" pos="0 0.5 0" euler="0 45 20"/>
    <geom name="box" type="box" size="0.05 0.08 0.03" pos="0 0 0.5" euler="10 20 30"/>
    <body name="probe" mocap="true"><geom name="probe" type="sphere" size="0.001"/></body>
  </worldbody>
</mujoco>
"""


def _as_hips(model: mujoco.MjModel, data: mujoco.MjData, names: list[str]) -> Hips:
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, n) for n in names]
    kind = {"sphere": 0, "capsule": 1, "cylinder": 2, "box": 3}
    size = [
        np.array([model.geom_size[g, 0], model.geom_size[g, 1], 0.0]) if n != "box" else model.geom_size[g].copy()
        for n, g in zip(names, ids)
    ]
    return Hips(
        data.geom_xpos[ids].copy(),
        data.geom_xmat[ids].reshape(-1, 3, 3).copy(),
        np.array([kind[n] for n in names]),
        np.array(size),
        0.05,
        0.0,
    )


def test_signed_distance_matches_mujoco_on_each_primitive():
    """Outside each geom the distance is MuJoCo's own (a probe sphere's distance plus its radius);
    inside it is negative; at random points round each geom."""
    model = mujoco.MjModel.from_xml_string(PRIMITIVES)
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    names = ["sphere", "capsule", "cylinder", "box"]
    hips = _as_hips(model, data, names)
    probe = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "probe")
    rng = np.random.default_rng(0)
    checked_inside = 0
    for g, name in enumerate(names):
        for p in hips.centre[g] + rng.uniform(-0.12, 0.12, size=(80, 3)):
            ours = float(signed_distance(p, hips)[g])
            data.mocap_pos[0] = p
            mujoco.mj_kinematics(model, data)
            gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name)
            theirs = mujoco.mj_geomDistance(model, data, probe, gid, 1.0, None) + 0.001
            if theirs > 0.002:  # outside: MuJoCo's distance (the cylinder's through its convex solver)
                assert ours == pytest.approx(theirs, abs=2e-3 if name == "cylinder" else 1e-5), (name, p)
            elif theirs < -0.002:
                assert ours < 0, (name, p)
                checked_inside += 1
    assert checked_inside > 10


def test_h1_hips_are_its_hip_motors_and_g1_s_its_pitch_links():
    h1, g1 = hip_obstacles(load_robot("h1")), hip_obstacles(load_robot("g1"))
    assert set(h1.bodies) == {
        "pelvis",
        "left_hip_yaw_link",
        "left_hip_roll_link",
        "right_hip_yaw_link",
        "right_hip_roll_link",
    }
    assert set(g1.bodies) == {"pelvis", "left_hip_pitch_link", "right_hip_pitch_link"}
    assert h1.arm_radius == pytest.approx(0.033 + 0.02)  # H1's hand sphere
    assert g1.hand_reach > 0.2  # G1's hand reaches 8 cm past its wrist keypoint


def test_an_arm_goes_round_the_hip_outside_and_comes_forward_off_the_belly():
    """H1, arms held still (pelvis frame): a hand beside the hip motor is pushed outwards, on each
    side; a hand held against the belly comes forward a few centimetres rather than 23 cm out."""
    hips = hip_obstacles(load_robot("h1"))
    T = 30

    def still(p) -> np.ndarray:
        return np.tile(p, (T, 1))

    for sign in (1.0, -1.0):
        m = np.array([1.0, sign, 1.0])
        push, _ = arm_pushes(
            still(m * [0.0, 0.21, 0.44]),
            still(m * [-0.05, 0.22, 0.12]),
            still(m * [0.04, 0.20, -0.15]),
            sign,
            hips,
            30.0,
        )
        assert push[T // 2, 1] * sign > 0.05 and abs(push[T // 2, 0]) < 1e-9, push[T // 2]
    push, _ = arm_pushes(
        still([0.0, 0.21, 0.44]), still([0.10, 0.18, 0.12]), still([0.07, 0.0, -0.08]), 1.0, hips, 30.0
    )
    assert 0.0 < push[T // 2, 0] < 0.06 and push[T // 2, 1] == 0.0, push[T // 2]


@pytest.fixture(scope="module")
def arms_at_the_hips():
    """H1 on a walk whose hands hang straight down and swing past the hips (a real walk's arms),
    retargeted with and without the clearance."""
    clip = synth.walking(
        duration_s=3.0,
        fps=60.0,
        turn_rate_rad_s=0.0,
        feet=synth.REAL_FEET,
        arm_swing_rad=0.8,
        arm_hang_rad=-1.6,
        elbow_rad=0.1,
    )
    human = HumanMotion(clip.names, clip.positions, clip.fps, clip.parents, {"path": clip.name})
    robot = load_robot("h1")
    with_clearance = retarget(human, robot, "interaction")
    mp = pytest.MonkeyPatch()
    mp.setattr(targets_mod, "hip_obstacles", lambda robot: None)
    try:
        without = retarget(human, robot, "interaction")
    finally:
        mp.undo()
    return robot, with_clearance, without


def _arm_figures(robot, result) -> tuple[float, float]:
    """(the arm joints' peak speed [rad/s], the wrists' largest distance from their targets [m])."""
    names = list(result.motion.joint_names)
    arm = [names.index(n) for n in names if "shoulder" in n or "elbow" in n]
    peak = float((np.abs(np.diff(result.motion.dof_pos[:, arm], axis=0)) * result.motion.fps).max())
    wrists = [result.targets.keypoints.index(k) for k in ("left_wrist", "right_wrist")]
    site_pos = forward_all(robot, result.qpos)[0]
    return peak, float(
        np.linalg.norm(site_pos[:, robot.site_ids[wrists]] - result.targets.positions[:, wrists], axis=-1).max()
    )


def test_h1_s_forearm_no_longer_catches_behind_its_hip(arms_at_the_hips):
    """Without the clearance the forearm catches behind H1's hip motor: the wrist ends half a
    metre from its target and the arm joints jump to get round (before the elbows were kept from
    bending back, the elbow folded through straight at its 20 rad/s limit); with it the arm
    swings past the motor."""
    robot, ok, before = arms_at_the_hips
    peak_before, err_before = _arm_figures(robot, before)
    peak, err = _arm_figures(robot, ok)
    assert err_before > 0.3 and peak_before > 10.0, (err_before, peak_before)  # 0.50 m, 12.0 rad/s: the defect
    assert err < 0.06 and peak < 8.0, (err, peak)  # 0.04 m, 5.7 rad/s
    assert ok.motion.provenance["arm_clearance"]["frames_pushed"] > 0


def test_pushed_arm_targets_clear_the_hips_and_move_smoothly(arms_at_the_hips):
    robot, ok, before = arms_at_the_hips
    hips = hip_obstacles(robot)
    tg = ok.targets
    k = {n: tg.keypoints.index(n) for n in ("pelvis", "left_elbow", "left_wrist", "right_elbow", "right_wrist")}
    pelvis_frames = np.einsum(
        "tab,bc->tac", tg.rotations[:, k["pelvis"]], np.linalg.inv(targets_mod.robot_home_sites(robot)[1][k["pelvis"]])
    )
    worst = np.inf
    for side in ("left", "right"):
        e, w = (
            np.einsum("tab,ta->tb", pelvis_frames, tg.positions[:, k[f"{side}_{j}"]] - tg.positions[:, k["pelvis"]])
            for j in ("elbow", "wrist")
        )
        points = e[:, None] + np.array(SAMPLES)[:, None] * (w - e)[:, None]
        worst = min(worst, float(signed_distance(points, hips).min()))
    assert worst > hips.arm_radius - 0.005  # the push's resolution, and smoothing only adds
    push = tg.arm_push_m
    assert push.max() > 0.05
    assert (np.abs(np.diff(push, axis=0)) * tg.fps).max() < 1.5  # m/s: swung out over ~0.2 s, not in a frame
    same = (push == 0).all(axis=1)
    assert same.any()
    assert np.array_equal(tg.positions[same], before.targets.positions[same])  # untouched where clear
