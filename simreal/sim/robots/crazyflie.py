"""Crazyflie 2.x class quadrotor, built in code from its robot spec.

A single rigid body with a free joint and four rotor actuators on sites at the ends of an
X frame (Bitcraze numbering: M1 front-right, M2 back-right, M3 back-left, M4 front-left,
body x forward, y left, z up). Each rotor actuator produces a thrust ``f`` [N] along the
body z axis and a drag torque ``s_i k f`` about it (k = torque_to_thrust_m, s_i = +1 for
the clockwise M1/M3 whose reaction torque on the body is counter-clockwise, -1 for M2/M4).

The rotor's first-order lag is MuJoCo actuator dynamics, integrated every physics step::

    dyntype = filterexact:  d(act)/dt = (ctrl - act) / tau,   f = act
    ctrl = commanded thrust [N] in [0, effort_limit]

so both physics backends (MJX and the C engine) simulate it identically, and domain
randomisation of ``tau`` is a model parameter (``actuator_dynprm[:, 0]``) and of the thrust
coefficient a gain (``actuator_gainprm[:, 0]``).

No contacts: the floor is visual; the task ends an episode on ground impact.
"""

from __future__ import annotations

import mujoco

from simreal.errors import ConfigError
from simreal.quadrotor_control import ROTOR_SPIN, physical, rotor_positions
from simreal.robot_spec import RobotSpec


def build_spec(spec: RobotSpec) -> mujoco.MjSpec:
    """The quadrotor's MjSpec (see module docstring for the rotor model)."""
    if len(spec.actuators) != 4:
        raise ConfigError("actuators", f"a quadrotor needs 4 rotors, got {len(spec.actuators)}", spec.source)
    s = mujoco.MjSpec()
    s.modelname = spec.name
    s.option.timestep = physical(spec, "physics_dt_s")
    s.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    s.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    s.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[5, 5, 0.1],
        rgba=[0.35, 0.4, 0.45, 1],
        contype=0,
        conaffinity=0,
    )
    s.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1])
    base = s.worldbody.add_body(name="base", pos=[0, 0, 1])
    base.add_freejoint(name="root")
    base.explicitinertial = True
    base.ipos = [0, 0, 0]  # centre of mass at the frame origin; unset, MuJoCo 4 puts it at `pos` (1 m up)
    base.iquat = [1, 0, 0, 0]
    base.mass = physical(spec, "mass_kg")
    base.inertia = [physical(spec, "ixx_kg_m2"), physical(spec, "iyy_kg_m2"), physical(spec, "izz_kg_m2")]
    base.add_geom(
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[0.02, 0.02, 0.006],
        rgba=[0.15, 0.15, 0.15, 1],
        contype=0,
        conaffinity=0,
        mass=0,
    )
    base.add_site(name="imu", pos=[0, 0, 0])
    arm = physical(spec, "arm_length_m")
    tau = physical(spec, "motor_time_constant_s")
    k_m = physical(spec, "torque_to_thrust_m")
    for act, pos, spin in zip(spec.actuators, rotor_positions(spec), ROTOR_SPIN):
        base.add_geom(
            type=mujoco.mjtGeom.mjGEOM_CAPSULE,
            fromto=[0, 0, 0, *pos[:2], 0],
            size=[0.003, 0, 0],
            rgba=[0.2, 0.2, 0.2, 1],
            contype=0,
            conaffinity=0,
            mass=0,
        )
        base.add_geom(
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            pos=[*pos[:2], 0.006],
            size=[0.4 * arm, 0.001, 0],
            rgba=[0.8, 0.2, 0.2, 0.5] if pos[0] > 0 else [0.2, 0.2, 0.8, 0.5],
            contype=0,
            conaffinity=0,
            mass=0,
        )
        base.add_site(name=act.name, pos=pos)
        s.add_actuator(
            name=act.name,
            target=act.name,
            trntype=mujoco.mjtTrn.mjTRN_SITE,
            gear=[0, 0, 1, 0, 0, spin * k_m],
            dyntype=mujoco.mjtDyn.mjDYN_FILTEREXACT,
            dynprm=[tau] + [0] * 9,
            gaintype=mujoco.mjtGain.mjGAIN_FIXED,
            gainprm=[1] + [0] * 9,
            biastype=mujoco.mjtBias.mjBIAS_NONE,
            ctrllimited=True,
            ctrlrange=[0, act.effort_limit],
        )
    s.worldbody.add_camera(
        name="chase",
        mode=mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM,
        pos=[-0.5, -0.5, 1.4],
        xyaxes=[0.707, -0.707, 0, 0.3, 0.3, 0.9],
    )
    return s
