"""A user's own MJCF or URDF stands in for a built-in model through the robot spec
(``model.asset_root`` / ``model.asset_file``), adapted by ``simreal.sim.robots.user_model``.

Every model here is written by the test into tmp_path with exactly the traits a real file
(Unitree's ``g1_29dof.xml``, Menagerie's arms) has: torque motors named apart from their
joints, no floor, no keyframe, meshes under a ``meshdir``, MJCF's degree angles, a URDF
with no actuators and a root link welded to the world.
"""

from __future__ import annotations

import dataclasses
import math

import mujoco
import numpy as np
import pytest

from simreal.cli import main
from simreal.errors import ConfigError
from simreal.robot_spec import load_robot_spec
from simreal.sim.robots import build_model

# -- a two-link arm: position actuators, angles in degrees (MJCF's default) ------------------------------
MJCF = """<mujoco model="two_link">
  <worldbody>
    <body name="link1">
      <joint name="shoulder" type="hinge" axis="0 1 0" range="-60 60"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="link2" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-90 90"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.025"/>
        <site name="end_effector" pos="0.25 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="{a0}" joint="{a0}" kp="20" kv="1" forcerange="-4 4"/>
    <position name="{a1}" joint="{a1}" kp="10" kv="0.5" forcerange="-2 2"/>
  </actuator>
</mujoco>
"""

SPEC = """name: two_link
family: arm
model: {{asset_root: {root}, asset_file: {file}}}
control_rate_hz: 50
actuators:
  - {{name: shoulder, effort_limit: 5, {gains0} range: [-1.5, 1.5], default: 0.2}}
  - {{name: elbow, effort_limit: 3, {gains1} range: [-2, 2]}}
"""


def write(tmp_path, order=("shoulder", "elbow"), file="two_link.xml", gains=("kp: 30, kd: 2,", "kp: 15,")):
    (tmp_path / "two_link.xml").write_text(MJCF.format(a0=order[0], a1=order[1]))
    (tmp_path / "two_link.yaml").write_text(SPEC.format(root=tmp_path, file=file, gains0=gains[0], gains1=gains[1]))
    return load_robot_spec(str(tmp_path / "two_link.yaml"))


def test_user_mjcf_loads_through_the_spec(tmp_path):
    m = build_model(write(tmp_path))
    assert m.nu == 2 and m.njnt == 2 and m.nsite == 1


def test_file_actuator_order_gives_way_to_the_specs_driver_order(tmp_path):
    m = build_model(write(tmp_path, order=("elbow", "shoulder")))
    assert [m.actuator(i).name for i in range(m.nu)] == ["shoulder", "elbow"]
    assert [m.joint(m.actuator_trnid[i, 0]).name for i in range(m.nu)] == ["shoulder", "elbow"]


def test_spec_gains_win_and_unset_ones_keep_the_files(tmp_path):
    m = build_model(write(tmp_path))
    assert m.actuator_gainprm[:, 0] == pytest.approx([30, 15])  # spec kp
    assert -m.actuator_biasprm[:, 2] == pytest.approx([2, 0.5])  # spec kd, then the file's kv
    assert m.actuator_forcerange[:, 1] == pytest.approx([5, 3])  # spec effort limits
    m = build_model(write(tmp_path, gains=("", "")))
    assert m.actuator_gainprm[:, 0] == pytest.approx([20, 10])  # the file's kp
    assert -m.actuator_biasprm[:, 1] == pytest.approx([20, 10])


def test_spec_radians_become_joint_ranges_in_a_degree_file(tmp_path):
    m = build_model(write(tmp_path))
    assert m.jnt_range == pytest.approx(np.array([[-1.5, 1.5], [-2.0, 2.0]]))
    assert m.actuator_ctrlrange == pytest.approx(np.array([[-1.5, 1.5], [-2.0, 2.0]]))


def test_missing_user_mjcf_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="model.asset_file"):
        build_model(write(tmp_path, file="nope.xml"))


def test_arm_gets_a_floor_and_a_home_key_at_the_spec_defaults(tmp_path):
    m = build_model(write(tmp_path))
    floors = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE]
    assert len(floors) == 1 and m.geom_pos[floors[0], 2] == 0.0
    home = m.key("home")
    assert home.qpos == pytest.approx([0.2, 0.0]) and home.ctrl == pytest.approx([0.2, 0.0])


def test_motor_gear_times_ctrlrange_is_the_effort_limit_and_the_files_home_key_stays(tmp_path):
    xml = (
        MJCF.format(a0="shoulder", a1="elbow")
        .replace(
            '<position name="shoulder" joint="shoulder" kp="20" kv="1" forcerange="-4 4"/>',
            '<motor name="shoulder" joint="shoulder" gear="2" ctrlrange="-3 3"/>',
        )
        .replace("</mujoco>", '<keyframe><key name="home" qpos="0.4 -0.3" ctrl="1.5 0"/></keyframe>\n</mujoco>')
    )
    (tmp_path / "two_link.xml").write_text(xml)
    (tmp_path / "two_link.yaml").write_text(
        SPEC.format(root=tmp_path, file="two_link.xml", gains0="kp: 30,", gains1="")
        .replace("default: 0.2", "default: 0")
        .replace("effort_limit: 5", "effort_limit: 0")
    )
    m = build_model(load_robot_spec(str(tmp_path / "two_link.yaml")))
    assert m.actuator_forcerange[0] == pytest.approx([-6, 6])  # gear 2 * ctrl 3 [N m]
    home = m.key("home")  # the spec's defaults are all 0: the file's pose, its ctrl now the set-points
    assert home.qpos == pytest.approx([0.4, -0.3]) and home.ctrl == pytest.approx([0.4, -0.3])


# -- a gripper as Menagerie's Panda drives it: a fixed tendon, set-points scaled to 0..255 --------------
GRIPPER = """<mujoco model="gripper">
  <compiler angle="radian"/>
  <worldbody>
    <body name="hand" pos="0 0 0.5">
      <geom type="box" size="0.03 0.08 0.02"/>
      <body name="left_finger"><joint name="finger1" type="slide" axis="0 1 0" range="0 0.04"/>
        <geom type="box" size="0.01 0.005 0.02" pos="0 0.01 -0.04"/></body>
      <body name="right_finger" quat="0 0 0 1"><joint name="finger2" type="slide" axis="0 1 0" range="0 0.04"/>
        <geom type="box" size="0.01 0.005 0.02" pos="0 0.01 -0.04"/></body>
    </body>
  </worldbody>
  <tendon><fixed name="split"><joint joint="finger1" coef="0.5"/><joint joint="finger2" coef="0.5"/></fixed></tendon>
  <equality><joint joint1="finger1" joint2="finger2" polycoef="0 1 0 0 0"/></equality>
  <actuator>
    <general name="actuator8" tendon="split" biastype="affine" forcerange="-100 100" ctrlrange="0 255"
      gainprm="0.01568627451 0 0" biasprm="0 -100 -10"/>
  </actuator>
</mujoco>
"""


def test_scaled_tendon_actuator_becomes_a_servo_in_metres_with_the_files_gains(tmp_path):
    (tmp_path / "gripper.xml").write_text(GRIPPER)
    (tmp_path / "gripper.yaml").write_text(
        "name: gripper\nfamily: arm\nmodel: {asset_file: gripper.xml}\n"
        "control_rate_hz: 50\nactuators:\n"
        "  - {name: split, effort_limit: 0, default: 0.03}\n"
    )
    m = build_model(load_robot_spec(str(tmp_path / "gripper.yaml")))
    assert m.actuator(0).name == "split" and m.actuator_trntype[0] == mujoco.mjtTrn.mjTRN_TENDON
    assert m.actuator_gainprm[0, 0] == pytest.approx(100) and m.actuator_biasprm[0, 1:3] == pytest.approx([-100, -10])
    assert m.actuator_ctrlrange[0] == pytest.approx([0.0, 0.04])  # 255 * 0.0157 / 100 m of tendon
    assert m.actuator_forcerange[0] == pytest.approx([-100, 100])
    home = m.key("home")
    assert home.qpos == pytest.approx([0.03, 0.03]) and home.ctrl == pytest.approx([0.03])


# -- a free-base biped: torque motors, no floor, no keyframe, mesh feet ----------------------------------
SIDE = """      <body name="{s}_thigh" pos="0 {y} -0.05">
        <joint name="{s}_hip_joint" axis="0 1 0" range="-1.2 1.2"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="1"/>
        <body name="{s}_shin" pos="0 0 -0.3">
          <joint name="{s}_knee_joint" axis="0 1 0" range="0 2"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="1"/>
          <body name="{s}_ankle_link" pos="0 0 -0.3">
            <joint name="{s}_ankle_joint" axis="0 1 0" range="-1 1"/>
            <geom type="mesh" mesh="foot" mass="0.3"/>
          </body>
        </body>
      </body>
"""
BIPED = f"""<mujoco model="biped">
  <compiler angle="radian" meshdir="meshes"/>
  <asset><mesh name="foot" file="foot.obj"/></asset>
  <worldbody>
    <body name="pelvis" pos="0 0 1.5">
      <freejoint/>
      <geom type="box" size="0.08 0.14 0.05" mass="4"/>
      <geom type="cylinder" size="0.05 0.03" pos="0 0 0.08" mass="0.5"/>
{SIDE.format(s="left", y=0.1)}{SIDE.format(s="right", y=-0.1)}    </body>
  </worldbody>
  <actuator>
{
    "".join(
        f'    <motor name="{s}_{j}" joint="{s}_{j}_joint" ctrlrange="-80 80"/>{chr(10)}'
        for s in ("left", "right")
        for j in ("hip", "knee", "ankle")
    )
}  </actuator>
</mujoco>
"""
JOINTS = [f"{s}_{j}_joint" for s in ("left", "right") for j in ("hip", "knee", "ankle")]
DEFAULTS = {"hip": -0.25, "knee": 0.5, "ankle": -0.25}
RANGES = {"hip": [-1.2, 1.2], "knee": [0.0, 2.0], "ankle": [-1.0, 1.0]}
FOOT_SITES = """  sites:
    - {name: left_foot, body: left_ankle_link, pos: [0.03, 0, -0.04]}
    - {name: right_foot, body: right_ankle_link, pos: [0.03, 0, -0.04]}
"""


def foot_obj(lo=(-0.09, -0.06, -0.04), hi=(0.15, 0.06, 0.0)) -> str:
    """A box as a Wavefront OBJ: 8 vertices, 12 triangles [m]."""
    v = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    faces = [(1, 2, 4, 3), (5, 7, 8, 6), (1, 5, 6, 2), (3, 4, 8, 7), (1, 3, 7, 5), (2, 6, 8, 4)]
    tris = [t for a, b, c, d in faces for t in ((a, b, c), (a, c, d))]
    return "".join(f"v {x} {y} {z}\n" for x, y, z in v) + "".join(f"f {a} {b} {c}\n" for a, b, c in tris)


def biped_spec(tmp_path, name="biped", root=None, file="biped.xml", sites=True, mesh=True, options=""):
    """The biped's model under tmp_path/robot (mesh in robot/meshes) and its spec under tmp_path/specs."""
    robot, specs = tmp_path / "robot", tmp_path / "specs"
    (robot / "meshes").mkdir(parents=True, exist_ok=True)
    specs.mkdir(exist_ok=True)
    (robot / "biped.xml").write_text(BIPED)
    if mesh:
        (robot / "meshes" / "foot.obj").write_text(foot_obj())
    acts = "".join(
        f"  - {{name: {j}, effort_limit: 60, kp: 150, kd: 4, armature: 0.01, friction: 0.05, "
        f"range: {RANGES[j.split('_')[1]]}, default: {DEFAULTS[j.split('_')[1]]}}}\n"
        for j in JOINTS
    )
    root_line = f"asset_root: {robot if root is None else root}\n  " if root != "" else ""
    (specs / f"{name}.yaml").write_text(
        f"name: {name}\nfamily: humanoid\nmodel:\n  {root_line}asset_file: {file}\n{FOOT_SITES if sites else ''}"
        f"{'  options: ' + options + chr(10) if options else ''}"
        "control_rate_hz: 50\nphysical: {physics_dt_s: 0.004, floor_friction: 0.8, joint_damping: 0.3}\n"
        f"actuators:\n{acts}"
    )
    return load_robot_spec(str(specs / f"{name}.yaml"))


def test_motors_become_pd_servos_with_the_specs_gains_and_joint_constants(tmp_path):
    spec = biped_spec(tmp_path)
    m = build_model(spec)
    assert [m.actuator(i).name for i in range(m.nu)] == JOINTS
    assert m.actuator_gainprm[:, 0] == pytest.approx([150.0] * 6)  # tau = kp ctrl
    assert m.actuator_biasprm[:, 1:3] == pytest.approx(np.array([[-150.0, -4.0]] * 6))  # - kp q - kd qdot
    assert m.actuator_forcerange == pytest.approx(np.array([[-60.0, 60.0]] * 6))
    assert m.actuator_ctrlrange == pytest.approx(np.array([RANGES[j.split("_")[1]] for j in JOINTS]))
    dof = m.jnt_dofadr[m.actuator_trnid[:, 0]]
    assert m.dof_armature[dof] == pytest.approx([0.01] * 6) and m.dof_frictionloss[dof] == pytest.approx([0.05] * 6)
    assert m.dof_damping[dof] == pytest.approx([0.3] * 6)
    assert m.opt.timestep == pytest.approx(0.004)
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST


def test_solver_caps_from_the_spec_replace_the_files_and_are_said(tmp_path, capsys):
    m = build_model(biped_spec(tmp_path))
    assert (m.opt.iterations, m.opt.ls_iterations) == (100, 50)  # the file's (MuJoCo's defaults)
    spec = biped_spec(tmp_path, name="capped")
    spec = dataclasses.replace(spec, physical={**spec.physical, "solver_iterations": 10, "ls_iterations": 20})
    capsys.readouterr()
    m = build_model(spec)
    assert (m.opt.iterations, m.opt.ls_iterations) == (10, 20)
    assert "solver caps 10 / 20" in capsys.readouterr().err


def test_floor_added_once_with_the_specs_friction_and_said_once(tmp_path, capsys):
    spec = biped_spec(tmp_path)
    build_model(spec)
    m = build_model(spec)
    floors = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE]
    assert len(floors) == 1 and m.geom_friction[floors[0], 0] == pytest.approx(0.8)
    err = capsys.readouterr().err.splitlines()
    assert sum("added a floor" in line for line in err) == 1
    assert sum("kp from the spec" in line for line in err) == 1


def test_home_key_is_the_default_pose_with_the_lowest_mesh_point_on_the_floor(tmp_path):
    m = build_model(biped_spec(tmp_path))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_kinematics(m, d)
    adr = m.jnt_qposadr[m.actuator_trnid[:, 0]]
    assert d.qpos[adr] == pytest.approx([DEFAULTS[j.split("_")[1]] for j in JOINTS])
    assert m.key("home").ctrl == pytest.approx(d.qpos[adr])
    vert = m.mesh_vert[: m.mesh_vertnum[0]]  # the one mesh, in its geom's frame
    feet = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
    lowest = min((d.geom_xpos[g] + vert @ d.geom_xmat[g].reshape(3, 3).T)[:, 2].min() for g in feet)
    assert lowest == pytest.approx(0.0, abs=1e-6)
    assert d.qpos[2] < 1.0  # lowered from the file's 1.5 m


def test_free_base_robot_stands_on_the_floor_for_1_s_under_pd(tmp_path):
    m = build_model(biped_spec(tmp_path))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    z0 = d.qpos[2]
    for _ in range(round(1.0 / m.opt.timestep)):
        mujoco.mj_step(m, d)
    assert np.isfinite(d.qpos).all()
    assert abs(d.qpos[2] - z0) < 0.03, f"base moved from {z0:.3f} to {d.qpos[2]:.3f} m"
    assert d.qpos[3] > 0.99  # upright: quaternion w
    assert d.ncon >= 2


@pytest.mark.parametrize(
    "root,file",
    [(None, "biped.xml"), ("../robot", "biped.xml"), ("", "../robot/biped.xml")],
    ids=["absolute-root", "root-relative-to-spec", "no-root"],
)
def test_asset_root_and_file_combinations_resolve_the_model_and_its_meshes(tmp_path, root, file):
    assert build_model(biped_spec(tmp_path, root=root, file=file)).nmesh == 1


def test_missing_mesh_is_one_line_naming_the_file(tmp_path):
    with pytest.raises(ConfigError, match="model.asset_file") as e:
        build_model(biped_spec(tmp_path, mesh=False))
    assert "foot.obj" in str(e.value) and "\n" not in str(e.value)


def test_robot_touches_the_world_not_itself_so_mjx_takes_it(tmp_path):
    from mujoco import mjx

    m = build_model(biped_spec(tmp_path))
    robot = m.geom_bodyid != 0
    assert (m.geom_contype[robot] == 2).all() and (m.geom_conaffinity[robot] == 1).all()
    mjx.put_model(m)  # a cylinder on the pelvis and mesh feet: MJX has no cylinder-mesh collision


def test_self_collision_option_keeps_the_files_contacts_and_unknown_options_are_named(tmp_path):
    m = build_model(biped_spec(tmp_path, options="{self_collision: true}"))
    assert (m.geom_contype == 1).all() and (m.geom_conaffinity == 1).all()
    with pytest.raises(ConfigError, match=r"model.options.*\['variant'\].*valid: self_collision"):
        build_model(biped_spec(tmp_path, options="{variant: 29dof}"))


def test_motor_without_spec_kp_says_which_key_to_set(tmp_path):
    spec = biped_spec(tmp_path)
    (tmp_path / "specs" / "biped.yaml").write_text(
        (tmp_path / "specs" / "biped.yaml").read_text().replace("kp: 150, ", "", 1)
    )
    with pytest.raises(ConfigError, match=r"actuators\[0\]\.kp.*<motor>"):
        build_model(load_robot_spec(spec.source))


def test_missing_site_is_one_line_from_the_cli(tmp_path, capsys):
    spec = biped_spec(tmp_path, name="no_feet", sites=False)
    rc = main(
        [
            "train",
            "g1-velocity",
            f"robot={spec.source}",
            f"runs_root={tmp_path / 'runs'}",
            "backend=native",
            "train.num_envs=4",
            "train.num_minibatches=4",
            "train.num_timesteps=100",
        ]
    )
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("simreal train: error:")]
    assert rc == 2 and "Traceback" not in err
    assert len(errors) == 1
    assert "no_feet.yaml" in errors[0] and "'left_foot'" in errors[0] and "model.sites" in errors[0]


def test_missing_tracked_body_names_it_and_the_bodies(tmp_path):
    from simreal.sim.robots import build_mjspec
    from simreal.sim.robots.elements import require_sensor_targets

    spec = biped_spec(tmp_path)
    s = build_mjspec(spec)
    s.add_sensor(
        name="hand_xpos",
        type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
        objtype=mujoco.mjtObj.mjOBJ_XBODY,
        objname="left_hand_link",
    )  # as g1-tracking tracks bodies
    with pytest.raises(ConfigError, match=r"task Tracking reads body 'left_hand_link'.*biped.xml.*left_ankle_link"):
        require_sensor_targets(s, spec, "Tracking")


def test_spec_site_on_an_unknown_body_lists_the_bodies(tmp_path):
    spec = biped_spec(tmp_path)
    path = tmp_path / "specs" / "biped.yaml"
    path.write_text(path.read_text().replace("body: left_ankle_link", "body: left_foot_link"))
    with pytest.raises(ConfigError, match=r"model.sites\[0\].body.*left_ankle_link"):
        build_model(load_robot_spec(spec.source))


def test_user_biped_steps_through_a_joint_task_without_nan(tmp_path):
    import jax

    from simreal.policies.run_config import make_env, resolve

    spec = biped_spec(tmp_path)
    env = make_env(resolve("g1-velocity", [f"robot={spec.source}", "backend=native", "env.episode_length_s=0.2"]))
    assert env.action_size == 6
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    s = reset(jax.random.split(jax.random.PRNGKey(0), 4))
    a = jax.random.uniform(jax.random.PRNGKey(1), (4, env.action_size), minval=-1.0, maxval=1.0)
    for _ in range(5):
        s = step(s, a)
    assert np.isfinite(np.asarray(s.obs)).all() and np.isfinite(np.asarray(s.reward)).all()
    assert float(np.asarray(s.pipeline_state.qpos)[:, 2].min()) > 0.3  # on its feet, not falling through


# -- URDF: no actuators, a root link MuJoCo welds to the world ------------------------------------------
def _link(name: str, mass: float, geom: str = "") -> str:
    inertia = '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>'
    return (
        f'<link name="{name}"><inertial><mass value="{mass}"/>{inertia}</inertial>'
        + (f"<collision>{geom}</collision>" if geom else "")
        + "</link>"
    )


URDF = f"""<robot name="hopper">
  {_link("base", 3.0, '<geometry><box size="0.3 0.3 0.1"/></geometry>')}
  {_link("leg", 1.0, '<origin xyz="0 0 -0.2"/><geometry><cylinder radius="0.03" length="0.4"/></geometry>')}
  {_link("foot", 0.5, '<origin xyz="0 0 -0.02"/><geometry><box size="0.3 0.3 0.04"/></geometry>')}
  {_link("toe_marker", 0.01)}
  <joint name="hip" type="revolute"><parent link="base"/><child link="leg"/><origin xyz="0 0 -0.05"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="50" velocity="5"/></joint>
  <joint name="ankle" type="revolute"><parent link="leg"/><child link="foot"/><origin xyz="0 0 -0.4"/>
    <axis xyz="0 1 0"/><limit lower="-0.5" upper="0.5" effort="30" velocity="5"/></joint>
  <joint name="toe_fixed" type="fixed"><parent link="foot"/><child link="toe_marker"/>
    <origin xyz="0.1 0 -0.04"/></joint>
</robot>
"""


def test_urdf_humanoid_gets_a_free_base_servos_from_the_spec_and_stands(tmp_path):
    (tmp_path / "hopper.urdf").write_text(URDF)
    (tmp_path / "hopper.yaml").write_text(
        "name: hopper\nfamily: humanoid\nmodel: {asset_file: hopper.urdf}\ncontrol_rate_hz: 50\n"
        "actuators:\n  - {name: hip, effort_limit: 0, kp: 200, kd: 5}\n"
        "  - {name: ankle, effort_limit: 25, kp: 100, kd: 3, default: 0.0}\n"
    )
    m = build_model(load_robot_spec(str(tmp_path / "hopper.yaml")))
    assert m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE and m.body(m.jnt_bodyid[0]).name == "base"
    assert m.actuator_gainprm[:, 0] == pytest.approx([200, 100])
    assert m.actuator_forcerange[:, 1] == pytest.approx([50, 25])  # the URDF's effort where the spec says 0
    assert m.actuator_ctrlrange == pytest.approx(np.array([[-1, 1], [-0.5, 0.5]]))  # the URDF's limits
    assert m.body("toe_marker").id > 0  # fixed links stay bodies, so sites and tasks can name them
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    assert d.qpos[2] == pytest.approx(0.05 + 0.4 + 0.04)  # base origin above the foot's sole
    for _ in range(round(1.0 / m.opt.timestep)):
        mujoco.mj_step(m, d)
    assert d.qpos[2] == pytest.approx(0.49, abs=0.02) and math.isfinite(d.qpos.sum())
