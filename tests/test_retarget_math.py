"""The solvers' math against finite differences: collision distance Jacobians, the interaction
mesh's Laplacian energy, stance-foot flatness rows, rotations, scaling, and the slack QP."""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from simreal.retarget import collisions, interaction_mesh as im
from simreal.retarget.contacts import clean_runs, detect_contacts
from simreal.retarget.qp import INF, solve_qp
from simreal.retarget.robot import load_robot
from simreal.retarget.rotations import frame_from_left_up, log_so3, rotation_log
from simreal.retarget.scaling import apply_scaling, derive_scaling
from simreal.retarget.settings import ContactConfig


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
    robot_home = {"pelvis": np.array([0, 0, 0.8]), "left_hip": np.array([0, 0.1, 0.7]),
                  "left_knee": np.array([0, 0.1, 0.4]), "left_ankle": np.array([0, 0.1, 0.1]),
                  "left_foot": np.array([0.03, 0.1, 0.0])}
    T = 5
    human = {k: np.tile(2.0 * v, (T, 1)) for k, v in robot_home.items()}  # a human twice the robot's size
    s = derive_scaling(human, robot_home)
    assert s.root == pytest.approx(0.5)
    assert all(r == pytest.approx(0.5) for r in s.ratios.values())
    scaled = apply_scaling(human, s)
    for k, v in robot_home.items():
        np.testing.assert_allclose(scaled[k][0], v, atol=1e-12)
    human["left_knee"][:, 0] += 0.2  # bent knee: directions follow the human, lengths the robot
    scaled = apply_scaling(human, derive_scaling(human, robot_home))
    assert np.linalg.norm(scaled["left_knee"][0] - scaled["left_hip"][0]) == pytest.approx(0.3, rel=1e-6)


def test_contact_labels_clean_short_runs():
    x = np.array([0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0], dtype=bool)
    y = clean_runs(x, min_true=3, min_false=2)
    np.testing.assert_array_equal(y, [0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0])
    T = 60
    soles = np.zeros((T, 1, 3))
    soles[:, 0, 0] = np.where(np.arange(T) < 30, 0.0, (np.arange(T) - 30) * 0.05)  # stands, then walks off
    soles[30:, 0, 2] = 0.1
    c = detect_contacts(soles, 30.0, np.zeros((T, 1)), ContactConfig())
    assert c[:28, 0].all() and not c[32:, 0].any()


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
