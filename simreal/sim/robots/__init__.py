"""Robot models: a robot spec (``simreal.robot_spec``) becomes a MuJoCo model.

Built-in robots are built in code: the spec's ``model.builder`` names a
``module:function`` that takes the spec and returns a ``mujoco.MjSpec``. A user's own
robot names an MJCF or URDF file instead (``model.asset_root`` + ``model.asset_file``),
adapted to the contract below by :mod:`~simreal.sim.robots.user_model` (floor, PD servos from
the spec, ``home`` keyframe). Either way ``model.sites`` adds sites the model lacks and
``model.cameras`` cameras (:mod:`~simreal.sim.cameras`).

Contract every model meets (tests check it for each shipped robot):
- one actuator per spec actuator, named alike and in the spec's (driver) order;
- joint robots: position actuators with the spec's kp, kd (``kv``) and effort limits
  (``forcerange``), joint armature, friction loss and range;
- a ``home`` keyframe whose ``ctrl`` holds its pose (joint robots);
- a site ``imu`` on the base body where the robot has an IMU.
"""

from __future__ import annotations

import importlib

import mujoco
import numpy as np

from simreal.errors import ConfigError
from simreal.robot_spec import RobotSpec
from simreal.sim.cameras import add_cameras
from simreal.sim.robots.elements import add_spec_sites, model_origin
from simreal.sim.robots.user_model import load_user_model


def build_mjspec(spec: RobotSpec) -> mujoco.MjSpec:
    """The robot's ``MjSpec``, from its builder or its MJCF/URDF file, plus ``model.sites``."""
    src = spec.model
    if src.builder is not None:
        mod_name, fn_name = src.builder.split(":", 1)
        try:
            fn = getattr(importlib.import_module(mod_name), fn_name)
        except (ImportError, AttributeError) as e:
            raise ConfigError("model.builder", f"cannot import {src.builder!r}: {e}", spec.source) from None
        s = fn(spec, **src.options)
    else:
        s = load_user_model(spec)
    add_spec_sites(s, spec)
    add_cameras(s, spec.model.cameras, "model.cameras", spec.source, model_origin(spec))
    return s


def build_model(spec: RobotSpec) -> mujoco.MjModel:
    """Compile the robot's model and check its actuators match the spec's names and order."""
    m = build_mjspec(spec).compile()
    check_actuator_order(spec, m)
    return m


def check_actuator_order(spec: RobotSpec, m: mujoco.MjModel) -> None:
    """Raise ConfigError unless the model's actuators are the spec's, in the spec's order."""
    names = tuple(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(m.nu))
    if spec.actuators and names != spec.actuator_names:
        raise ConfigError(
            "actuators",
            f"model actuators {list(names)} differ from the spec's "
            f"{list(spec.actuator_names)} (names and driver order must match)",
            spec.source,
        )


def free_base_body(model: mujoco.MjModel) -> int | None:
    """The id of the body on the model's first free joint (a quadrotor's, a humanoid's pelvis),
    None when no joint is free (an arm bolted down)."""
    free = np.flatnonzero(np.asarray(model.jnt_type) == mujoco.mjtJoint.mjJNT_FREE)
    return int(model.jnt_bodyid[free[0]]) if free.size else None
