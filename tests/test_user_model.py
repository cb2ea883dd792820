"""A user's own MJCF stands in for a built-in model through the robot spec (asset_root/asset_file)."""

import pytest

from simreal.errors import ConfigError
from simreal.robot_spec import load_robot_spec
from simreal.sim.robots import build_model

MJCF = """<mujoco model="two_link">
  <worldbody>
    <body name="link1">
      <joint name="shoulder" type="hinge" axis="0 1 0" range="-1.5 1.5"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="link2" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.025"/>
        <site name="end_effector" pos="0.25 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="{a0}" joint="{a0}" kp="20"/>
    <position name="{a1}" joint="{a1}" kp="10"/>
  </actuator>
</mujoco>
"""

SPEC = """name: two_link
family: arm
model: {{asset_root: {root}, asset_file: {file}}}
control_rate_hz: 50
actuators:
  - {{name: shoulder, effort_limit: 5, kp: 20, range: [-1.5, 1.5]}}
  - {{name: elbow, effort_limit: 3, kp: 10, range: [-2, 2]}}
"""


def write(tmp_path, order=("shoulder", "elbow"), file="two_link.xml"):
    (tmp_path / "two_link.xml").write_text(MJCF.format(a0=order[0], a1=order[1]))
    (tmp_path / "two_link.yaml").write_text(SPEC.format(root=tmp_path, file=file))
    return load_robot_spec(str(tmp_path / "two_link.yaml"))


def test_user_mjcf_loads_through_the_spec(tmp_path):
    m = build_model(write(tmp_path))
    assert m.nu == 2 and m.njnt == 2 and m.nsite == 1


def test_user_mjcf_with_other_actuator_order_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="driver order"):
        build_model(write(tmp_path, order=("elbow", "shoulder")))


def test_missing_user_mjcf_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="model.asset_file"):
        build_model(write(tmp_path, file="nope.xml"))
