"""dm_control's cart-pole, as in MuJoCo Playground's ``CartpoleBalance`` (same bodies, joints,
masses, damping, timestep 0.01 s, 1 solver iteration, 4 line-search iterations, no contacts,
no Euler damping), built with MjSpec so the two can be benchmarked on the same model."""

from __future__ import annotations

import mujoco

from simreal.robot_spec import RobotSpec


def build_spec(spec: RobotSpec) -> mujoco.MjSpec:
    """The cart-pole MjSpec (actuator ``slide``: motor, gear 10, ctrl in [-1, 1])."""
    s = mujoco.MjSpec()
    s.modelname = spec.name
    s.option.timestep = float(spec.physical.get("physics_dt_s", 0.01))
    s.option.iterations = 1
    s.option.ls_iterations = 4
    s.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_EULERDAMP
    s.worldbody.add_light(pos=[0, 0, 6])
    s.worldbody.add_camera(name="fixed", pos=[0, -4, 1], xyaxes=[1, 0, 0, 0, 0, 1])
    s.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, pos=[0, 0, -0.05], size=[4, 4, 0.2])
    for y in (0.07, -0.07):
        s.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=[-2, y, 1, 2, y, 1], size=[0.02, 0, 0])
    cart = s.worldbody.add_body(name="cart", pos=[0, 0, 1])
    cart.add_joint(
        name="slider",
        type=mujoco.mjtJoint.mjJNT_SLIDE,
        axis=[1, 0, 0],
        range=[-1.8, 1.8],
        limited=mujoco.mjtLimited.mjLIMITED_TRUE,
        solref_limit=[0.08, 1],
        damping=[5e-4],
    )
    cart.add_geom(name="cart", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.2, 0.15, 0.1], mass=1.0)
    pole = cart.add_body(name="pole_1")
    pole.add_joint(name="hinge_1", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], damping=[2e-6])
    pole.add_geom(
        name="pole_1", type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=[0, 0, 0, 0, 0, 1], size=[0.045, 0, 0], mass=0.1
    )
    s.add_actuator(
        name="slide",
        target="slider",
        trntype=mujoco.mjtTrn.mjTRN_JOINT,
        gear=[10, 0, 0, 0, 0, 0],
        ctrllimited=True,
        ctrlrange=[-1, 1],
    )
    return s
