"""The solvers' math against finite differences: collision distance Jacobians, the interaction
mesh's Laplacian energy, stance-foot flatness rows, rotations, scaling, and the slack QP."""

from __future__ import annotations

import copy
import dataclasses

import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from simreal.retarget import collisions
from simreal.retarget import interaction_mesh as im
from simreal.retarget.body_frames import fill_unreliable, frame_from_left_up, heading_from_left, yaw_frame
from simreal.retarget.contacts import FLAT, ON_BALL, ON_HEEL, clean_runs, detect_contacts, hysteresis, pivots
from simreal.retarget.qp import INF, solve_qp
from simreal.retarget.robot import load_robot
from simreal.retarget.scaling import apply_scaling, derive_scaling
from simreal.retarget.settings import ContactConfig
from simreal.retarget.targets import FOOT_YAW_MAX_RAD, foot_yaw, level_feet, vertical_offsets
from simreal.rotations import log_so3, rotation_log, wrap_angle


@pytest.fixture(scope="module")
def g1():
    return load_robot("g1")


def _perturbed(m, q, v, eps):
    out = q.copy()
    mujoco.mj_integratePos(m, out, v, eps)
    return out


def _contacts_at(m, d, robot, q, jac):
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    cs = collisions.contacts(m, d, robot.floor_geom, with_jacobian=jac)
    return {tuple(g): (cs.dist[i], None if cs.jac is None else cs.jac[i]) for i, g in enumerate(cs.geom)}


def test_collision_distance_jacobian_matches_finite_differences(g1):
    m = copy.deepcopy(g1.model)
    collisions.set_margin(m, 0.2)
    d = mujoco.MjData(m)
    q = g1.q_home.copy()
    q[2] += 0.03  # feet just above the floor
    rng = np.random.default_rng(0)
    q[7:] += rng.normal(scale=0.2, size=m.nq - 7)
    q[g1.qpos_adr] = np.clip(q[g1.qpos_adr], g1.q_lower, g1.q_upper)
    base = _contacts_at(m, d, g1, q, True)
    # Only pairs whose closest points move smoothly: sphere/capsule pairs and capsule-plane.
    smooth = {int(mujoco.mjtGeom.mjGEOM_SPHERE), int(mujoco.mjtGeom.mjGEOM_CAPSULE), int(mujoco.mjtGeom.mjGEOM_PLANE)}
    pairs = [k for k in base if all(int(m.geom_type[g]) in smooth for g in k)]
    assert len(pairs) >= 5
    on_floor = [k for k in pairs if g1.floor_geom in k]
    assert on_floor and len(on_floor) < len(pairs)  # ground and self pairs both checked
    eps = 1e-6
    for _ in range(3):
        v = rng.normal(size=m.nv)
        plus = _contacts_at(m, d, g1, _perturbed(m, q, v, eps), False)
        minus = _contacts_at(m, d, g1, _perturbed(m, q, v, -eps), False)
        checked = 0
        for k in pairs:
            if k in plus and k in minus:
                checked += 1
                fd = (plus[k][0] - minus[k][0]) / (2 * eps)
                assert base[k][1] @ v == pytest.approx(fd, rel=1e-4, abs=1e-6), k
        assert checked >= 5


def test_laplacian_energy_gradient_and_invariances():
    rng = np.random.default_rng(1)
    kp = rng.normal(size=(12, 3))
    env = np.concatenate([rng.normal(size=(6, 2)), np.zeros((6, 1))], axis=1)
    M = im.laplacian_metric(kp, env)
    np.testing.assert_allclose(M, M.T, atol=1e-12)
    assert np.linalg.eigvalsh(M).min() > -1e-10
    human = kp + rng.normal(scale=0.05, size=kp.shape)
    robot = kp.copy()
    E = lambda P: im.laplacian_energy(P, human, M)  # noqa: E731
    grad = 2 * M @ (robot - human)  # per axis
    eps = 1e-6
    for k in range(len(kp)):
        for a in range(3):
            dP = np.zeros_like(robot)
            dP[k, a] = eps
            assert (E(robot + dP) - E(robot - dP)) / (2 * eps) == pytest.approx(grad[k, a], rel=1e-5, abs=1e-8)
    assert im.laplacian_energy(human, human, M) == 0.0
    # Rows of L sum to zero: the mesh without environment points ignores a common translation.
    L = im.laplacian(len(kp), im.delaunay_edges(kp))
    np.testing.assert_allclose(L.sum(axis=1), 0.0, atol=1e-12)
    M0 = im.laplacian_metric(kp, np.zeros((0, 3)))
    assert im.laplacian_energy(human + [0.3, -0.2, 0.1], human, M0) == pytest.approx(0.0, abs=1e-12)
    # With ground points the same translation costs: the mesh ties the body to its environment.
    assert im.laplacian_energy(human + [0.0, 0.0, 0.1], human, M) > 1e-4


def test_stance_flatness_row_matches_finite_differences(g1):
    m, d = g1.model, mujoco.MjData(g1.model)
    rng = np.random.default_rng(2)
    q = g1.q_home.copy()
    q[7:] += rng.normal(scale=0.1, size=m.nq - 7)
    site = int(g1.foot_sites[0])

    def up(qq):
        d.qpos[:] = qq
        mujoco.mj_kinematics(m, d)
        return d.site_xmat[site].reshape(3, 3) @ g1.foot_up_local[0]

    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    jr = np.zeros((3, m.nv))
    mujoco.mj_jacSite(m, d, None, jr, site)
    u = up(q)
    row = -np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]]) @ jr
    eps = 1e-6
    for _ in range(3):
        v = rng.normal(size=m.nv)
        fd = (up(_perturbed(m, q, v, eps)) - up(_perturbed(m, q, v, -eps))) / (2 * eps)
        np.testing.assert_allclose(row @ v, fd, rtol=1e-5, atol=1e-8)


def test_rotations():
    for i in range(5):
        R = Rotation.random(random_state=i).as_matrix()
        np.testing.assert_allclose(log_so3(R), rotation_log(R), atol=1e-12)
        np.testing.assert_allclose(Rotation.from_rotvec(log_so3(R)).as_matrix(), R, atol=1e-12)
    F = frame_from_left_up(np.array([[0.1, 1.0, 0.0]]), np.array([[0.0, 0.2, 1.0]]))[0]
    np.testing.assert_allclose(F.T @ F, np.eye(3), atol=1e-12)
    assert np.linalg.det(F) == pytest.approx(1.0)
    assert F[0, 0] > 0.9  # x forward


def test_scaling_is_derived_from_limb_lengths():
    robot_home = {
        "pelvis": np.array([0, 0, 0.8]),
        "left_hip": np.array([0, 0.1, 0.7]),
        "left_knee": np.array([0, 0.1, 0.4]),
        "left_ankle": np.array([0, 0.1, 0.1]),
        "left_foot": np.array([0.03, 0.1, 0.0]),
    }
    T = 5
    human = {k: np.tile(2.0 * v, (T, 1)) for k, v in robot_home.items()}  # a human twice the robot's size
    s = derive_scaling(human, robot_home)
    assert s.root == pytest.approx(0.5)
    assert all(r == pytest.approx(0.5) for r in s.ratios.values())
    upright = {"pelvis": np.tile(np.eye(3), (T, 1, 1))}
    scaled = apply_scaling(human, s, upright)
    for k, v in robot_home.items():
        np.testing.assert_allclose(scaled[k][0], v, atol=1e-12)
    human["left_knee"][:, 0] += 0.2  # bent knee: directions follow the human, lengths the robot
    scaled = apply_scaling(human, derive_scaling(human, robot_home), upright)
    assert np.linalg.norm(scaled["left_knee"][0] - scaled["left_hip"][0]) == pytest.approx(0.3, rel=1e-6)
    with pytest.raises(ValueError, match="left_hip sits rigidly on pelvis"):
        apply_scaling(human, s)


def test_hips_sit_on_the_pelvis_at_the_robots_offset():
    """A human hip mostly beside the pelvis joint and a robot hip mostly below it (as a Bandai rig
    and a G1): the hip target is the robot's offset turned by the pelvis frame, not the human's
    direction at the robot's length, and the leg hangs from it with the human's directions."""
    robot_home = {
        "pelvis": np.array([0, 0, 0.78]),
        "left_hip": np.array([0, 0.116, 0.65]),
        "left_knee": np.array([0, 0.116, 0.35]),
        "left_ankle": np.array([0, 0.116, 0.04]),
        "left_foot": np.array([0, 0.116, 0.0]),
    }
    human = {
        "pelvis": np.array([0, 0, 1.0]),
        "left_hip": np.array([0, 0.09, 0.95]),
        "left_knee": np.array([0, 0.07, 0.52]),
        "left_ankle": np.array([0, 0.05, 0.09]),
        "left_foot": np.array([0, 0.05, 0.0]),
    }
    T = 4
    human = {k: np.tile(v, (T, 1)) for k, v in human.items()}
    yaw = np.linspace(0.0, np.pi / 2, T)  # the pelvis turns a quarter
    R = np.zeros((T, 3, 3))
    R[:, 0, 0], R[:, 0, 1], R[:, 1, 0], R[:, 1, 1], R[:, 2, 2] = np.cos(yaw), -np.sin(yaw), np.sin(yaw), np.cos(yaw), 1
    s = derive_scaling(human, robot_home)
    assert s.ratios["left_hip"] > 1.4  # 0.18 m of robot offset on 0.10 m of human offset
    out = apply_scaling(human, s, {"pelvis": R})
    offset = robot_home["left_hip"] - robot_home["pelvis"]
    for t in range(T):
        np.testing.assert_allclose(out["left_hip"][t] - out["pelvis"][t], R[t] @ offset, atol=1e-12)
    thigh = out["left_knee"] - out["left_hip"]  # the human's direction, the robot's length
    np.testing.assert_allclose(np.linalg.norm(thigh, axis=1), 0.3, rtol=1e-9)
    h = human["left_knee"] - human["left_hip"]
    np.testing.assert_allclose(thigh / 0.3, h / np.linalg.norm(h, axis=1, keepdims=True), atol=1e-12)
    ratio_rule = out["pelvis"] + s.ratios["left_hip"] * (human["left_hip"] - human["pelvis"])
    assert ratio_rule[0, 1] > 0.15 and out["left_hip"][0, 1] == pytest.approx(0.116)  # wide vs on the pelvis


def test_contact_labels_clean_short_runs():
    x = np.array([0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0], dtype=bool)
    y = clean_runs(x, min_true=3, min_false=2)
    np.testing.assert_array_equal(y, [0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
    T = 60
    soles = np.zeros((T, 1, 3))
    soles[:, 0, 0] = np.where(np.arange(T) < 30, 0.0, (np.arange(T) - 30) * 0.05)  # stands, then walks off
    soles[30:, 0, 2] = 0.1
    c = detect_contacts(soles[:, :, None], 30.0, np.zeros((T, 1)), ContactConfig())
    assert c[:28, 0].all() and not c[32:, 0].any()


def test_contact_hysteresis_keeps_a_planted_foot_through_speed_jitter():
    """A planted foot whose capture jitters around the entry speed stays in stance; with the
    release thresholds equal to the entry ones (no hysteresis) it would flicker."""
    T, fps = 90, 30.0
    cfg = ContactConfig(smooth_s=0.0, min_stance_s=0.0, min_swing_s=0.0)
    # Steps of 0.4x, 0.4x, 1.6x, 1.6x the entry speed: central differences read 0.4x to 1.6x.
    step = np.where(np.arange(T) % 4 < 2, 0.4, 1.6) * cfg.speed_m_s / fps
    heel = np.zeros((T, 1, 1, 3))
    heel[:, 0, 0, 0] = np.cumsum(step)
    heel[:, 0, 0, 2] = 0.5 * cfg.height_m * (1 + np.sin(np.arange(T)))  # and its height jitters below entry
    ball = heel + [0.1, 0.0, 0.0]
    pts = np.concatenate([heel, ball], axis=2)
    c = detect_contacts(pts, fps, np.zeros((T, 1)), cfg)[:, 0]
    first = int(np.argmax(c))
    assert first <= 4 and c[first:].all()
    plain = detect_contacts(
        pts,
        fps,
        np.zeros((T, 1)),
        dataclasses.replace(cfg, release_speed_m_s=cfg.speed_m_s, release_height_m=cfg.height_m),
    )[:, 0]
    assert not plain[first:].all()
    lifted = pts.copy()  # lifted past the release height: swing
    lifted[45:, 0, :, 2] += 2 * cfg.release_height_m
    assert not detect_contacts(lifted, fps, np.zeros((T, 1)), cfg)[46:, 0].any()


def test_hysteresis_and_min_durations():
    enter = np.array([0, 1, 0, 0, 0, 0, 0, 0], dtype=bool)
    stay = np.array([0, 1, 1, 1, 0, 1, 1, 1], dtype=bool)
    np.testing.assert_array_equal(hysteresis(enter, stay), [0, 1, 1, 1, 0, 0, 0, 0])


def test_slack_qp_relaxes_only_what_it_must():
    H, f = np.eye(2), np.zeros(2)
    lb, ub = np.full(2, -1.0), np.full(2, 1.0)
    A = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    lo = np.array([0.5, -INF, 0.2])
    hi = np.array([INF, 0.3, INF])  # x0 >= 0.5 and x0 <= 0.3 conflict; x1 >= 0.2 is fine
    soft = np.array([True, True, True])
    res = solve_qp(H, f, lb, ub, A, lo, hi, soft, slack_weight=1e3)
    assert res.status == "relaxed"
    assert res.slack[0] + res.slack[1] == pytest.approx(0.2, abs=1e-3)
    assert res.slack[2] == pytest.approx(0.0, abs=1e-9) and res.x[1] >= 0.2 - 1e-9
    assert np.all(res.x >= lb - 1e-9) and np.all(res.x <= ub + 1e-9)  # hard bounds kept
    ok = solve_qp(H, -np.ones(2), lb, ub, A[2:], lo[2:], hi[2:], soft[2:])
    assert ok.status == "optimal" and np.allclose(ok.x, 1.0)
    for backend in ("daqp", "quadprog"):
        r = solve_qp(H, f, lb, ub, A, lo, hi, soft, 1e3, backend)
        assert r.status == "relaxed" and r.slack[2] < 1e-9


def _leg_swing(T: int, heading: float, toe_pitch_deg: np.ndarray, shin_back_deg: np.ndarray):
    """Knee, ankle, toe tracks (T, 3) of a leg facing ``heading`` [rad]: the shin tilted back by
    ``shin_back_deg`` and the foot bone pitched ``toe_pitch_deg`` below horizontal (past 90: backwards)."""
    fwd = np.array([np.cos(heading), np.sin(heading), 0.0])
    up = np.array([0.0, 0.0, 1.0])
    a, b = np.radians(shin_back_deg)[:, None], np.radians(toe_pitch_deg)[:, None]
    ankle = np.tile([0.0, 0.0, 0.1], (T, 1))
    knee = ankle + 0.4 * (np.cos(a) * up + np.sin(a) * fwd)  # knee above, shifted forward as the shin leans back
    toe = ankle + 0.12 * (np.cos(b) * fwd - np.sin(b) * up)
    return knee, ankle, toe


def test_foot_heading_from_shin_and_foot_bones_stays_continuous():
    """In swing the foot points 80-125 deg down (past vertical): the horizontal projection of
    toe - ankle flips backwards, the heading from the two bones' lateral axis does not."""
    T, heading = 60, 0.4
    pitch = 40 + 85 * np.sin(np.linspace(0, np.pi, T))  # 40 (flat rig) -> 125 -> 40 deg down
    knee, ankle, toe = _leg_swing(T, heading, pitch, 35 * np.sin(np.linspace(0, np.pi, T)))
    old = yaw_frame(toe - ankle)
    old_yaw = np.arctan2(old[:, 1, 0], old[:, 0, 0])
    assert np.abs(wrap_angle(old_yaw - heading)).max() > 3.0  # the projection flips: the bug this guards
    yaw = foot_yaw(knee, ankle, toe, np.full(T, heading), sigma_frames=3.0)
    np.testing.assert_allclose(wrap_angle(yaw - heading), 0.0, atol=1e-6)
    # Turned feet are followed, up to the clamp, relative to the pelvis.
    for turn in (0.3, -0.3, 1.2):
        knee, ankle, toe = _leg_swing(T, heading + turn, pitch, np.full(T, 20.0))
        yaw = foot_yaw(knee, ankle, toe, np.full(T, heading), sigma_frames=3.0)
        np.testing.assert_allclose(yaw - heading, np.clip(turn, -FOOT_YAW_MAX_RAD, FOOT_YAW_MAX_RAD), atol=1e-6)


def test_foot_heading_fills_collinear_bones_and_tracks_the_sign_flip():
    """The foot bone swings through the shin line (pointed toes, a kick): there the lateral axis
    vanishes and changes sign; the heading is filled from its neighbours and stays on the pelvis'
    side, with no jump between frames."""
    T, heading = 80, -1.0
    shin_back = np.full(T, 0.0)
    pitch = 40 + 70 * np.sin(np.linspace(0, np.pi, T))  # foot bone reaches 110 deg down: 20 deg past the shin
    knee, ankle, toe = _leg_swing(T, heading, pitch, shin_back)
    rng = np.random.default_rng(0)
    toe = toe + rng.normal(scale=0.0005, size=toe.shape)  # capture noise makes the collinear frames arbitrary
    yaw = foot_yaw(knee, ankle, toe, np.full(T, heading), sigma_frames=3.0)
    assert np.abs(wrap_angle(yaw - heading)).max() < 0.1
    assert np.abs(np.diff(yaw)).max() < 0.1


def test_pivot_labels_pin_the_edge_the_foot_stands_on():
    """Per stance frame, the edge a foot stands on: the ball when the heel is raised, the heel when
    the toes are (and while the ball still swings about it after they come down), flat otherwise;
    measured against the foot's other point, so a foot lifted whole is flat."""
    T, fps = 60, 60.0
    cfg = ContactConfig(smooth_s=0.0)
    pts = np.zeros((T, 1, 2, 3))
    pts[:, 0, 1, 0] = 0.14  # heel at x = 0, ball 14 cm ahead
    contacts = np.ones((T, 1), dtype=bool)
    contacts[50:] = False
    pts[10:20, 0, 0, 2] = np.linspace(0.0, 0.03, 10)  # heel-off: the heel rises 3 cm
    pts[20:30, 0, 1, 2] = np.linspace(0.0, 0.02, 10)  # toes up 2 cm
    turn = np.linspace(0.0, 0.5, 10)  # a swivel on the heel, toes 1 cm up
    pts[30:40, 0, 1, :2] = 0.14 * np.stack([np.cos(turn), np.sin(turn)], 1)
    pts[30:40, 0, 1, 2] = 0.01
    turn = np.linspace(0.5, 0.6, 5)  # ... and finishes its turn with the toes down
    pts[40:45, 0, 1, :2] = 0.14 * np.stack([np.cos(turn), np.sin(turn)], 1)
    pts[45:, 0, 1, :2] = pts[44, 0, 1, :2]
    pts[40:50, 0, :, 2] += 0.004  # both points 4 mm up: still flat
    pts[50:, 0, 0, 2] = 0.2  # swing
    got = pivots(pts, fps, contacts, cfg)[:, 0]
    assert (got[12:20] == ON_BALL).all() and (got[23:30] == ON_HEEL).all() and (got[31:43] == ON_HEEL).all()
    assert (got[:10] == FLAT).all() and (got[46:] == FLAT).all()
    sliding = pts.copy()  # a flat foot whose ball slides (never toes-up first) stays flat
    sliding[:, 0, 1, 0] += np.linspace(0.0, 0.2, T)
    assert (pivots(sliding, fps, contacts, cfg)[:10, 0] == FLAT).all()
    assert not pivots(pts[:, :, :1], fps, contacts, cfg).any()  # no toe joint: always flat


def test_level_feet_levels_a_resting_offset_not_a_pose():
    """A foot whose toe joint rests 1.6 cm above its heel (a capture's marker offset) is levelled
    where it stands still; one on tiptoe (4 cm) is a pose and stays."""
    T, fps = 120, 60.0
    pts = np.zeros((T, 2, 2, 3))
    pts[:, :, 1, 0] = 0.14
    pts[:, 0, 1, 2] = 0.016  # left: toes 1.6 cm up whenever it stands
    pts[:, 1, 0, 2] = 0.04  # right: on tiptoe, heel 4 cm up
    pts[60:, :, :, 0] += np.linspace(0.0, 1.0, 60)[:, None, None]  # then both walk off (moving: not still)
    out = level_feet(pts, fps)
    np.testing.assert_allclose(out[:, 0, 0, 2] - out[:, 0, 1, 2], 0.0, atol=1e-12)
    np.testing.assert_allclose(out[:, 0].mean(axis=1), pts[:, 0].mean(axis=1), atol=1e-12)  # split evenly
    np.testing.assert_array_equal(out[:, 1], pts[:, 1])


def test_a_foot_turning_out_past_90_deg_keeps_its_side_across_the_shin_line():
    """A support foot turning out from 80 to 100 deg (a dance's turned-out leg) while its bone
    swings through the shin line twice: each run between the crossings is ambiguous on its own
    near 90 deg, so it continues the run before instead of jumping to the other side (the real
    dance's frames 636-641 went from +0.8 to -0.8 rad, the clamp, in two frames)."""
    T = 80
    pitch = 40 + 70 * np.abs(np.sin(np.linspace(0, 2 * np.pi, T)))  # crosses the shin line twice
    turn = np.radians(np.linspace(80.0, 100.0, T))
    legs = [_leg_swing(1, turn[t], pitch[t : t + 1], np.zeros(1)) for t in range(T)]
    knee, ankle, toe = (np.concatenate(part) for part in zip(*legs))
    toe = toe + np.random.default_rng(0).normal(scale=0.0005, size=toe.shape)
    yaw = foot_yaw(knee, ankle, toe, np.zeros(T), sigma_frames=3.0)
    np.testing.assert_allclose(yaw, FOOT_YAW_MAX_RAD, atol=1e-6)  # on its side, at the clamp, throughout


def test_pelvis_heading_and_fill():
    yaw, level = heading_from_left(np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.3], [0.0, 0.0, 1.0]]))
    assert yaw[0] == pytest.approx(0.0) and yaw[1] == pytest.approx(np.pi / 2) and level[2] == pytest.approx(0.0)
    R = np.stack([Rotation.from_rotvec([0, 0, 0.02 * t]).as_matrix() for t in range(20)])
    bad = R.copy()
    bad[10] = Rotation.from_rotvec([np.pi, 0, 0]).as_matrix()  # a degenerate frame flipped upside down
    rel = np.ones(20)
    rel[10] = 0.0
    out = fill_unreliable(bad, rel, 2.0)
    np.testing.assert_allclose(out[np.arange(20) != 10], R[np.arange(20) != 10], atol=1e-9)
    assert np.linalg.norm(rotation_log(out[10] @ R[10].T)) < 0.01


def test_vertical_offsets_put_stance_soles_on_the_ground():
    T = 40
    rng = np.random.default_rng(3)
    sole_z = 0.05 + rng.uniform(-0.03, 0.03, size=(T, 2))  # scaled stance soles wander by centimetres
    contacts = np.zeros((T, 2), dtype=bool)
    contacts[:15, 0] = contacts[25:, 1] = True  # a flight phase in between
    off = vertical_offsets(sole_z, contacts, fps=1e-9)  # no smoothing
    z = sole_z - off[:, None]
    np.testing.assert_allclose(z[contacts], 0.0, atol=1e-12)
    assert np.all(np.diff(off[14:26]) * np.sign(off[25] - off[14]) >= -1e-12)  # interpolated across the flight
