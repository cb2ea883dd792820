"""The built-in humanoid and arm models meet the robot-model contract (simreal/sim/robots/__init__.py).

The humanoids cannot stand freely under PD alone with their real gains (ankle stiffness 2 x 40
N m/rad is below the m g h ~ 220 (G1) / 500 (H1) N m/rad an inverted pendulum of their size
needs), so the 2 s PD-hold check pins their base (``fixed_base`` option); a separate short
free-base check verifies that the ``home`` keyframe stands on its feet.
"""

from __future__ import annotations

import dataclasses
import functools

import mujoco
import numpy as np
import pytest

from simreal.errors import ConfigError
from simreal.robot_spec import RobotSpec, load_robot_spec
from simreal.sim.robots import build_model
from simreal.sim.robots.articulated import keypoint_name

ROBOTS = ["g1", "g1_23dof", "g1_12dof", "h1", "h1_10dof", "franka", "so100"]
HUMANOIDS = ["g1", "g1_23dof", "g1_12dof", "h1", "h1_10dof"]
# Published masses [kg] and relative tolerance: Unitree G1 / H1 spec sheets ("about 35 / 47 kg"),
# Franka Panda datasheet (arm about 18 kg). The SO-100 has no datasheet mass: it must be < 1 kg.
REAL_MASS = {
    "g1": (35.0, 0.1),
    "g1_23dof": (35.0, 0.1),
    "g1_12dof": (35.0, 0.1),
    "h1": (47.0, 0.12),
    "h1_10dof": (47.0, 0.12),
    "franka": (18.0, 0.1),
}


@functools.cache
def _spec(name: str) -> RobotSpec:
    return load_robot_spec(name)


@functools.cache
def _model(name: str) -> mujoco.MjModel:
    return build_model(_spec(name))


def _with_options(spec: RobotSpec, **options) -> RobotSpec:
    return dataclasses.replace(spec, model=dataclasses.replace(spec.model, options={**spec.model.options, **options}))


def _joint_actuators(m: mujoco.MjModel) -> list[int]:
    return [i for i in range(m.nu) if m.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT]


def _touching_floor(m: mujoco.MjModel) -> set[int]:
    """The geoms MuJoCo's filter lets touch the floor: (contype_a & conaffinity_b) | (contype_b & conaffinity_a)."""
    floor = m.geom("floor").id
    return {
        g
        for g in range(m.ngeom)
        if g != floor
        and (m.geom_contype[g] & m.geom_conaffinity[floor] or m.geom_contype[floor] & m.geom_conaffinity[g])
    }


def _assert_welded_like_the_whole_robot(part: RobotSpec, whole: mujoco.MjModel, joint: str, angle: float) -> None:
    """The variant ``part`` with its held ``joint`` at ``angle`` [rad] (the others at their
    targets, 0) puts every body where the whole robot does with that joint at ``angle``."""
    held = tuple(dataclasses.replace(h, target=angle) if h.name == joint else h for h in part.held)
    m = build_model(_with_options(dataclasses.replace(part, held=held), hold="weld"))
    d, dw = mujoco.MjData(m), mujoco.MjData(whole)
    dw.qpos[whole.joint(joint).qposadr[0]] = angle
    mujoco.mj_kinematics(m, d)
    mujoco.mj_kinematics(whole, dw)
    np.testing.assert_allclose(d.xpos, dw.xpos, atol=1e-9)
    np.testing.assert_allclose(d.xquat, dw.xquat, atol=1e-9)


@pytest.mark.parametrize("name", ROBOTS)
def test_actuators_are_the_specs_in_driver_order(name):
    m, spec = _model(name), _spec(name)
    names = tuple(m.actuator(i).name for i in range(m.nu))
    assert names == spec.actuator_names


@pytest.mark.parametrize("name", ROBOTS)
def test_actuators_carry_the_specs_gains_limits_and_joint_constants(name):
    m, spec = _model(name), _spec(name)
    for i, a in enumerate(spec.actuators):
        assert m.actuator_gainprm[i, 0] == pytest.approx(a.kp)
        assert m.actuator_biasprm[i, :3] == pytest.approx([0.0, -a.kp, -a.kd])
        assert m.actuator_forcerange[i] == pytest.approx([-a.effort_limit, a.effort_limit])
        assert m.actuator_ctrlrange[i] == pytest.approx(a.range)
    for i in _joint_actuators(m):
        a, j = spec.actuators[i], m.actuator_trnid[i, 0]
        assert m.jnt_range[j] == pytest.approx(a.range)
        assert m.dof_armature[m.jnt_dofadr[j]] == pytest.approx(a.armature)
        assert m.dof_frictionloss[m.jnt_dofadr[j]] == pytest.approx(a.friction)
    assert m.opt.timestep == pytest.approx(spec.physical["physics_dt_s"])


@pytest.mark.parametrize("name", ROBOTS)
def test_total_mass_matches_the_real_robot(name):
    mass = float(_model(name).body_mass.sum())
    if name == "so100":
        assert 0.3 < mass < 1.0
    else:
        real, tol = REAL_MASS[name]
        assert abs(mass - real) / real < tol, f"{name}: model {mass:.2f} kg vs real {real} kg"


@pytest.mark.parametrize("name", ROBOTS)
def test_defaults_lie_inside_joint_ranges(name):
    m, spec = _model(name), _spec(name)
    for a in spec.actuators:
        assert a.range[0] <= a.default <= a.range[1], a.name
    qpos = m.key("home").qpos
    for j in range(m.njnt):
        if m.jnt_limited[j]:
            q = qpos[m.jnt_qposadr[j]]
            assert m.jnt_range[j, 0] - 1e-9 <= q <= m.jnt_range[j, 1] + 1e-9, m.joint(j).name
    assert m.key("home").ctrl == pytest.approx([a.default for a in spec.actuators])


@pytest.mark.parametrize("name", ROBOTS)
def test_floor_sites_and_sensors(name):
    m, spec = _model(name), _spec(name)
    assert m.geom("floor").type == mujoco.mjtGeom.mjGEOM_PLANE and m.geom_friction[m.geom("floor").id, 0] > 0
    for b in range(1, m.nbody):
        m.site(keypoint_name(m.body(b).name))  # one retargeting keypoint per link; KeyError if missing
    if spec.family == "humanoid":
        for site in ("imu", "left_foot", "right_foot", "left_knee", "left_hand", "right_hand", "head"):
            m.site(site)
        assert m.site("imu").bodyid == m.body("pelvis").id
        assert m.joint(0).type == mujoco.mjtJoint.mjJNT_FREE
        for sensor in ("imu_gyro", "imu_acc", "imu_quat"):
            assert m.sensor(sensor).objid == m.site("imu").id
    else:
        m.site("end_effector")
        assert mujoco.mjtJoint.mjJNT_FREE not in m.jnt_type


@pytest.mark.parametrize("name", ROBOTS)
def test_pd_holds_the_default_pose_for_2_s(name):
    spec = _spec(name)
    if spec.family == "humanoid":
        spec = _with_options(spec, fixed_base=True)  # see the module docstring
    m = build_model(spec)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    adr = m.jnt_qposadr[m.actuator_trnid[_joint_actuators(m), 0]]
    q0, z0 = d.qpos[adr].copy(), d.xpos[1, 2].copy()
    worst = 0.0
    for _ in range(round(2.0 / m.opt.timestep)):
        mujoco.mj_step(m, d)
        worst = max(worst, float(np.abs(d.qpos[adr] - q0).max()))
    assert np.isfinite(d.qpos).all()
    assert worst < 0.05, f"{name}: a joint left its default by {worst:.3f} rad"
    assert d.xpos[1, 2] > z0 - 0.05


@pytest.mark.parametrize("name", HUMANOIDS)
def test_home_keyframe_stands_on_the_feet(name):
    m = _model(name)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_forward(m, d)
    feet = {m.geom("left_foot").id, m.geom("right_foot").id}
    for g in feet:  # boxes aligned with the world at home: sole height = centre z - half height
        assert d.geom_xpos[g, 2] - m.geom_size[g, 2] == pytest.approx(0.0, abs=2e-3)
    z0 = d.qpos[2]
    for _ in range(round(0.3 / m.opt.timestep)):
        mujoco.mj_step(m, d)
    touching = {c.geom1 for c in d.contact[: d.ncon]} | {c.geom2 for c in d.contact[: d.ncon]}
    assert feet <= touching
    assert d.qpos[2] > z0 - 0.05  # the knees sag under PD (H1: ~0.15 rad at kp 200), the base stays up


@pytest.mark.parametrize("name", ROBOTS)
def test_swapped_actuators_raise_config_error(name):
    spec = _spec(name)
    acts = list(spec.actuators)
    acts[0], acts[1] = acts[1], acts[0]
    with pytest.raises(ConfigError, match="order"):
        build_model(dataclasses.replace(spec, actuators=tuple(acts)))


def test_unknown_actuator_lists_the_valid_names():
    spec = _spec("g1")
    bad = (dataclasses.replace(spec.actuators[0], name="left_hip_pich_joint"), *spec.actuators[1:])
    with pytest.raises(ConfigError, match="left_hip_pitch_joint"):
        build_model(dataclasses.replace(spec, actuators=bad))


def test_g1_23dof_welds_waist_roll_pitch_and_wrist_pitch_yaw():
    m23, m29 = _model("g1_23dof"), _model("g1")
    assert (m23.nu, m29.nu) == (23, 29)
    joints = {m23.joint(j).name for j in range(m23.njnt)}
    assert not joints & {"waist_roll_joint", "waist_pitch_joint", "left_wrist_yaw_joint", "right_wrist_pitch_joint"}
    assert m23.nbody == m29.nbody and m23.body_mass.sum() == pytest.approx(m29.body_mass.sum())
    with pytest.raises(ConfigError, match="23dof"):
        build_model(_with_options(_spec("g1"), variant="27dof"))


def test_g1_12dof_drives_the_legs_and_welds_the_rest_where_the_driver_holds_it():
    """Unitree's own 12-DoF G1 (unitree_rl_gym): the 12 leg motors in LowCmd order, the waist and
    arms welded at their held targets (``hold: weld``), the same links and mass as the 29-DoF G1,
    the legs' gains and limits the 29-DoF spec's; only the soles touch the floor."""
    s12, s29 = _spec("g1_12dof"), _spec("g1")
    m12, m29 = build_model(_with_options(s12, hold="weld")), _model("g1")
    assert m12.nu == 12 and m12.nv == 18 and s12.actuator_names == s29.actuator_names[:12]
    assert [h.name for h in s12.held] == list(s29.actuator_names[12:]) and s12.whole_robot == "g1"
    assert {h.kp for h in s12.held} == {300.0, 100.0, 50.0, 20.0}  # unitree_rl_gym's arm_waist_kps
    for a12, a29 in zip(s12.actuators, s29.actuators):
        assert a12 == a29
    assert m12.nbody == m29.nbody and m12.body_mass.sum() == pytest.approx(m29.body_mass.sum())
    # welded at 0 (every held target), the 29-DoF model at zero joint angles puts every body alike;
    # a held target other than 0 turns the welded body there, as the joint would
    for angle in (0.0, 0.8):
        _assert_welded_like_the_whole_robot(s12, m29, "left_elbow_joint", angle)


def test_h1_10dof_drives_the_legs_and_welds_the_torso_and_arms_where_the_driver_holds_them():
    """Unitree's own H1 (unitree_rl_gym: h1.urdf with torso and arms fixed, 10 actions): the 10 leg
    motors in LowCmd order (the torso's slot 6 skipped), the torso and arms welded at their held
    targets, the same links and mass as the 19-DoF H1, the legs' gains and limits h1.yaml's; only
    the soles touch the floor."""
    s10, s19 = _spec("h1_10dof"), _spec("h1")
    m10, m19 = build_model(_with_options(s10, hold="weld")), _model("h1")
    legs = tuple(n for n in s19.actuator_names if any(p in n for p in ("hip", "knee", "ankle")))
    assert m10.nu == 10 and m10.nv == 16 and s10.actuator_names == legs
    assert [h.name for h in s10.held] == [n for n in s19.actuator_names if n not in legs] and s10.whole_robot == "h1"
    held = {h.name: (h.kp, h.kd, h.target) for h in s10.held}  # unitree_rl_gym's arm_waist_kps / kds / target
    assert held["torso_joint"] == (300.0, 3.0, 0.0) and held["left_elbow_joint"] == (50.0, 2.0, 0.0)
    assert {h.kp for h in s10.held} == {300.0, 100.0, 50.0}
    for a in s10.actuators:
        assert a == s19.actuator(a.name)
    assert m10.nbody == m19.nbody and m10.body_mass.sum() == pytest.approx(m19.body_mass.sum())
    assert m10.key("home").qpos[2] == pytest.approx(m19.key("home").qpos[2])  # the same stance
    assert _touching_floor(m10) == {m10.geom("left_foot").id, m10.geom("right_foot").id}
    # welded at 0 as the 19-DoF H1 at zero joint angles; a held torso at 0.5 rad turns the upper body
    for angle in (0.0, 0.5):
        _assert_welded_like_the_whole_robot(s10, m19, "torso_joint", angle)
    with pytest.raises(ConfigError, match="10dof"):
        build_model(_with_options(s19, variant="12dof"))


@pytest.mark.parametrize("name, whole", [("g1_12dof", "g1"), ("h1_10dof", "h1")])
def test_a_variant_trains_its_held_joints_as_joints_under_the_drivers_pd(name, whole):
    """``hold: pd`` (the shipped variants' default): every held joint stays a joint without an
    actuator, its passive force the driver's hold ``kp (target - q) - kd qdot`` (plus the spec's
    joint damping), its armature and range the whole robot's; home stands with it at its target."""
    spec, ws = _spec(name), _spec(whole)
    assert spec.model.options["hold"] == "pd"
    held = tuple(dataclasses.replace(h, target=0.3) if "elbow" in h.name else h for h in spec.held)
    m, mw = build_model(dataclasses.replace(spec, held=held)), _model(whole)
    assert m.nu == len(spec.actuators) and m.nv == mw.nv and m.njnt == mw.njnt
    damping = spec.physical.get("joint_damping", 0.0)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    rng = np.random.default_rng(0)
    for h in held:
        j = m.joint(h.name)
        a, q, v = ws.actuator(h.name), int(j.qposadr[0]), int(j.dofadr[0])
        assert d.qpos[q] == pytest.approx(h.target)
        assert m.dof_armature[v] == pytest.approx(a.armature) and m.dof_frictionloss[v] == 0.0
        np.testing.assert_allclose(m.jnt_range[j.id], a.range)
        d.qpos[q] += rng.uniform(-0.2, 0.2)
        d.qvel[v] = rng.uniform(-1.0, 1.0)
    mujoco.mj_forward(m, d)
    for h in held:
        j = m.joint(h.name)
        q, v = int(j.qposadr[0]), int(j.dofadr[0])
        want = h.kp * (h.target - d.qpos[q]) - (h.kd + damping) * d.qvel[v]
        assert d.qfrc_passive[v] == pytest.approx(want, rel=1e-9, abs=1e-9), h.name
    with pytest.raises(ConfigError, match=r"model.options.hold.*weld, pd.*'glue'"):
        build_model(_with_options(spec, hold="glue"))
    with pytest.raises(ConfigError, match=r"model.options.hold.*whole_robot"):
        build_model(dataclasses.replace(spec, whole_robot=""))


def test_a_held_joint_that_is_an_actuator_is_refused_by_key(tmp_path):
    import yaml

    data = yaml.safe_load(open(_spec("g1_12dof").source))
    data["held"][0]["name"] = "left_knee_joint"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"held\[0\].name.*'left_knee_joint' is an actuator"):
        load_robot_spec(str(path))


@pytest.mark.parametrize("name", ["g1", "h1"])
def test_feet_only_floor_contact_drops_the_limbs_and_keeps_the_stance(name):
    spec = _spec(name)
    m_all, m_feet = build_model(spec), build_model(_with_options(spec, floor_contact="feet"))
    feet = {m_feet.geom("left_foot").id, m_feet.geom("right_foot").id}
    floor = m_feet.geom("floor").id
    assert _touching_floor(m_feet) == feet
    assert len(_touching_floor(m_all)) == m_all.ngeom - 1
    d = mujoco.MjData(m_feet)  # the home keyframe still stands on its soles, and only they touch
    mujoco.mj_resetDataKeyframe(m_feet, d, m_feet.key("home").id)
    for _ in range(round(0.3 / m_feet.opt.timestep)):
        mujoco.mj_step(m_feet, d)
    assert {c.geom1 for c in d.contact[: d.ncon]} | {c.geom2 for c in d.contact[: d.ncon]} == feet | {floor}
    with_self = build_model(_with_options(spec, floor_contact="feet", self_collision=True))
    assert _touching_floor(with_self) == feet and all(
        with_self.geom_contype[g] & with_self.geom_conaffinity[g] for g in range(with_self.ngeom) if g != floor
    )
    with pytest.raises(ConfigError, match="floor_contact.*all, feet"):
        build_model(_with_options(spec, floor_contact="hands"))


def test_solver_caps_come_from_the_spec():
    spec = _spec("g1")
    assert (_model("g1").opt.iterations, _model("g1").opt.ls_iterations) == (
        spec.physical["solver_iterations"],
        spec.physical["ls_iterations"],
    )
    capped = dataclasses.replace(spec, physical={**spec.physical, "solver_iterations": 3, "ls_iterations": 5})
    m = build_model(capped)
    assert (m.opt.iterations, m.opt.ls_iterations) == (3, 5)


def test_franka_ready_pose_puts_the_tcp_where_libfranka_does():
    m = _model("franka")
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_kinematics(m, d)
    # O_T_EE of the ready pose [0, -pi/4, 0, -3pi/4, 0, pi/2, pi/4] with the Franka Hand.
    assert d.site("end_effector").xpos == pytest.approx([0.307, 0.0, 0.487], abs=3e-3)


def test_franka_gripper_moves_both_fingers_together():
    m = _model("franka")
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    gripper = m.actuator("gripper").id
    fingers = [m.jnt_qposadr[m.joint(f"panda_finger_joint{i}").id] for i in (1, 2)]
    for width in (0.02, 0.06):
        d.ctrl[gripper] = width
        for _ in range(250):
            mujoco.mj_step(m, d)
        assert d.qpos[fingers] == pytest.approx([width / 2] * 2, abs=2e-3)
