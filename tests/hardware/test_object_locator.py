"""The camera object locator: the projection math on a known camera, and the whole chain
(render, colour mask, centroid, ray onto the plane) against the simulation's ground truth."""

from __future__ import annotations

import types

import numpy as np
import pytest

pytest.importorskip("cv2")
pytest.importorskip("mujoco")

from simreal.errors import ConfigError  # noqa: E402
from simreal.hardware.benchmark.object_locator import (  # noqa: E402
    CameraCalibration,
    ObjectLocator,
    load_calibration,
    mujoco_camera,
    pixel_on_plane,
)

W, H = 320, 240


def test_a_camera_looking_straight_down_maps_pixels_onto_the_plane():
    # 1 m above the origin, optical axis down (-z), image x along world +x, image y along world -y
    cal = CameraCalibration(
        width=640,
        height=480,
        fx=500.0,
        fy=500.0,
        cx=320.0,
        cy=240.0,
        position_m=(0.0, 0.0, 1.0),
        rotation_wxyz=(0.0, 1.0, 0.0, 0.0),
    )  # 180 deg about x
    np.testing.assert_allclose(pixel_on_plane(cal, 320.0, 240.0, 0.0), [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(pixel_on_plane(cal, 420.0, 240.0, 0.0), [0.2, 0, 0], atol=1e-12)  # 100 px = 0.2 m
    np.testing.assert_allclose(pixel_on_plane(cal, 320.0, 340.0, 0.5), [0, -0.1, 0.5], atol=1e-12)
    assert pixel_on_plane(cal, 320.0, 240.0, 2.0) is None  # the plane is behind the camera


@pytest.fixture(scope="module")
def scene():
    import mujoco

    from simreal.policies.run_config import make_env, resolve
    from simreal.sim.headless_gl import use_headless_gl

    use_headless_gl()
    m = make_env(resolve("arm-push"), backend="native").mj_model
    renderer = mujoco.Renderer(m, H, W)
    yield m, renderer
    renderer.close()


def _view(scene, pos, yaw):
    import mujoco

    m, renderer = scene
    d = mujoco.MjData(m)
    a = int(m.jnt_qposadr[m.joint("object_joint").id])
    d.qpos[a : a + 3] = pos
    d.qpos[a + 3 : a + 7] = [np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
    mujoco.mj_forward(m, d)
    renderer.update_scene(d, camera="front")
    return renderer.render(), mujoco_camera(m, d, "front", W, H)


def test_the_arm_tasks_cube_is_found_within_2_cm_from_the_front_camera(scene):
    rng = np.random.default_rng(0)
    errors = []
    for _ in range(12):
        truth = np.array([rng.uniform(0.35, 0.6), rng.uniform(-0.15, 0.15), 0.025])
        image, cal = _view(scene, truth, rng.uniform(0, np.pi))
        found = ObjectLocator(cal)(image)
        assert found is not None
        errors.append(np.linalg.norm(found - truth))
    assert max(errors) < 0.02 and np.mean(errors) < 0.012, np.round(errors, 4)


def test_a_cube_out_of_view_is_not_found(scene):
    image, cal = _view(scene, np.array([3.0, 3.0, 0.025]), 0.0)
    assert ObjectLocator(cal)(image) is None
    with pytest.raises(ConfigError, match="for 640x480 images, the camera gives 320x240"):
        ObjectLocator(CameraCalibration())(image)  # a calibration for 640x480


def test_a_bad_calibration_file_names_the_file_and_the_key(tmp_path):
    f = tmp_path / "cam.yaml"
    f.write_text("width: 640\nfx: -3\n")
    with pytest.raises(ConfigError, match=f"{f}: config key 'fx'"):
        load_calibration(f)
    f.write_text("object:\n  hsv_lo: [0, 0, 0]\n")
    with pytest.raises(ConfigError, match="'object.hsv_lo'"):
        load_calibration(f)


def test_the_real_bench_judges_the_object_from_the_camera(scene):
    """``RealBench`` with a locator: ``object_pos_w`` joins the measured state, NaN when unseen."""
    from fixtures.fake_robot import FakeJointRobot
    from simreal.hardware.benchmark.harness import RealBench
    from simreal.robot_spec import load_robot_spec

    truth = np.array([0.45, 0.05, 0.025])
    image, cal = _view(scene, truth, 0.3)
    frame = types.SimpleNamespace(image=image)
    camera = types.SimpleNamespace(read=lambda: frame)
    robot = FakeJointRobot(load_robot_spec("so100"))
    bench = RealBench(robot, "fake", ask=None, camera=camera, locator=ObjectLocator(cal))
    with robot:
        assert "object_pos_w" in bench.state_keys()
        assert np.linalg.norm(bench.state()["object_pos_w"] - truth) < 0.02
        frame.image = np.zeros_like(image)
        assert np.isnan(bench.state()["object_pos_w"]).all()
