"""Cameras in the model (robot spec and task) and the batched renderer: poses, image sizes,
depth in metres, threads agreeing with one thread, inactive rows left unrendered, and one-line
errors for bad camera configs. Tiny images, a tiny scene."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest

from simreal.errors import ConfigError, SimrealError, UnknownNameError
from simreal.robot_spec import CameraSpec, check_cameras, load_robot_spec


def _headless_gl_or_skip() -> None:
    from simreal.sim.headless_gl import use_headless_gl

    try:
        use_headless_gl()
    except SimrealError as e:
        pytest.skip(f"no headless OpenGL here: {e}")


def _scene(*cameras: CameraSpec) -> mujoco.MjModel:
    """A floor, a free unit-coloured box at z = 0.1 m, and ``cameras``."""
    from simreal.sim.cameras import add_cameras

    s = mujoco.MjSpec()
    s.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], rgba=[0.2, 0.2, 0.2, 1])
    box = s.worldbody.add_body(name="box", pos=[0, 0, 0.1])
    box.add_freejoint()
    box.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.1, 0.1, 0.1], rgba=[1, 0, 0, 1])
    add_cameras(s, cameras, "env.cameras", "test", "the test scene")
    return s.compile()


def test_lookat_points_the_camera_minus_z_at_the_target_with_image_up_towards_world_z():
    pos, target = (1.0, -0.5, 0.8), (0.2, 0.1, 0.0)
    m = _scene(CameraSpec("c", pos=pos, lookat=target))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    R = d.cam_xmat[0].reshape(3, 3)  # columns: camera x, y, z in world
    want = np.subtract(target, pos) / np.linalg.norm(np.subtract(target, pos))
    np.testing.assert_allclose(-R[:, 2], want, atol=1e-6)
    assert R[2, 1] > 0 and abs(R[2, 0]) < 1e-6  # image up has +z, image x is horizontal
    np.testing.assert_allclose(d.cam_xpos[0], pos, atol=1e-9)


def test_robot_spec_cameras_reach_the_model_on_their_body_with_size_and_fov():
    from simreal.sim.robots import build_model

    spec = load_robot_spec("so100")
    wrist = CameraSpec(
        "wrist", body=_last_body(spec), pos=(0.0, 0.0, 0.05), quat=(1, 0, 0, 0), width=40, height=30, fovy_deg=70
    )
    m = build_model(dataclasses.replace(spec, model=dataclasses.replace(spec.model, cameras=(wrist,))))
    cam = m.camera("wrist")
    assert m.body(int(cam.bodyid[0])).name == wrist.body
    assert tuple(m.cam_resolution[cam.id]) == (40, 30) and float(m.cam_fovy[cam.id]) == pytest.approx(70)


def _last_body(spec) -> str:
    """The name of the robot model's last body (its gripper or hand)."""
    from simreal.sim.robots import build_model

    m = build_model(spec)
    return m.body(m.nbody - 1).name


def test_camera_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"env.cameras\[0\]': set exactly one of 'lookat'"):
        check_cameras((CameraSpec("c", pos=(1, 0, 1)),), "env.cameras", "t.yaml")
    with pytest.raises(ConfigError, match=r"env.cameras\[1\].name"):
        check_cameras((CameraSpec("c", pos=(1, 0, 1), lookat=(0, 0, 0)),) * 2, "env.cameras", "t.yaml")
    with pytest.raises(ConfigError, match=r"env.cameras\[0\].lookat"):
        check_cameras((CameraSpec("c", pos=(1, 0, 1), lookat=(1, 0, 1)),), "env.cameras", "t.yaml")
    with pytest.raises(ConfigError, match=r"env.cameras\[0\].body.*no body 'hand'.*bodies: world, box"):
        _scene(CameraSpec("c", body="hand", pos=(1, 0, 1), lookat=(0, 0, 0)))


def test_render_model_turns_off_what_a_policy_camera_does_not_need_and_leaves_the_task_model():
    from simreal.sim.render import PLANE_HALF_EXTENT_M, render_model

    m = _scene(CameraSpec("c", pos=(0, 0, 1), lookat=(0, 0, 0)))
    r = render_model(m, 32, 24)
    assert (r.vis.global_.offwidth, r.vis.global_.offheight, r.vis.quality.offsamples) == (32, 24, 0)
    assert np.all(r.geom_size[0] == PLANE_HALF_EXTENT_M) and np.all(m.geom_size[0, :2] == 0)
    assert m.vis.global_.offwidth == 640 and m.vis.quality.offsamples == 4


def test_depth_is_the_distance_along_the_optical_axis_and_threads_match_one_thread():
    _headless_gl_or_skip()
    from simreal.sim.render import BatchRenderer

    # straight down from 1 m over the floor: the box (top at z = 0.2 m) fills the centre
    m = _scene(CameraSpec("down", pos=(0.6, 0, 1.0), quat=(1, 0, 0, 0), fovy_deg=60, width=24, height=16, depth=True))
    qpos = np.tile(m.qpos0, (5, 1))
    qpos[:, 0] = np.linspace(-0.3, 0.9, 5)  # slide the box under the camera (x = 0.6 m in row 4)
    with BatchRenderer(m, ["down"], depth=["down"], nthread=1) as one:
        a = one.render(qpos)
    with BatchRenderer(m, ["down"], depth=["down"], nthread=2) as two:
        b = two.render(qpos)
        part = two.render(qpos, active=np.array([False, True, False, False, True]))
    assert a["pixels/down"].shape == (5, 16, 24, 3) and a["pixels/down"].dtype == np.uint8
    assert a["depth/down"].shape == (5, 16, 24, 1) and a["depth/down"].dtype == np.float32
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    centre = a["depth/down"][:, 8, 12, 0]
    assert centre[0] == pytest.approx(1.0, abs=2e-3)  # the floor
    assert a["depth/down"][0, 0, 0, 0] == pytest.approx(1.0, abs=2e-3)  # planar depth, not the ray length
    assert centre[3] == pytest.approx(0.8, abs=2e-3)  # the box's top (box at x = 0.6 m)
    red = a["pixels/down"][3, 8, 12].astype(int)
    assert red[0] > 2 * red[1] and red[0] > 2 * red[2]
    for k in a:
        np.testing.assert_array_equal(part[k][[1, 4]], a[k][[1, 4]])
        assert not part[k][[0, 2, 3]].any()


def test_unknown_camera_lists_the_model_cameras():
    from simreal.sim.render import BatchRenderer

    m = _scene(CameraSpec("front", pos=(1, 0, 1), lookat=(0, 0, 0)))
    with pytest.raises(UnknownNameError, match="unknown camera 'back'; valid cameras: front"):
        BatchRenderer(m, ["back"])


def test_observe_renders_the_whole_vmapped_batch_in_one_callback():
    _headless_gl_or_skip()
    import jax
    import jax.numpy as jnp

    from simreal.sim.render import BatchRenderer

    m = _scene(CameraSpec("c", pos=(1.0, 0, 0.6), lookat=(0, 0, 0.1), width=16, height=12))
    qpos = np.tile(m.qpos0, (3, 1)).astype(np.float32)
    qpos[:, 1] = [-0.3, 0.0, 0.3]
    with BatchRenderer(m, ["c"], nthread=1) as r:
        calls = []
        host = r._host_render
        r._host_render = lambda q, a, mocap: (calls.append(q.shape), host(q, a, mocap))[1]
        out = jax.jit(jax.vmap(r.observe))(jnp.asarray(qpos))
        want = r.render(qpos)
    assert calls == [(3, m.nq)]
    np.testing.assert_array_equal(np.asarray(out["pixels/c"]), want["pixels/c"])
    assert len({want["pixels/c"][i].tobytes() for i in range(3)}) == 3  # the box moved in the image


def test_the_follow_camera_keeps_a_free_base_in_view_and_frames_a_fixed_arm():
    """What `simreal play` sees without a model camera: a G1 whose clip starts 3 m away is looked
    at where its base is (MuJoCo's default camera looked at the origin: only its legs showed);
    a fixed-base arm is framed once, at its centre."""
    import mujoco

    from simreal.robot_spec import load_robot_spec
    from simreal.sim.follow_camera import FollowCamera
    from simreal.sim.robots import build_model

    g1 = build_model(load_robot_spec("g1"))
    d = mujoco.MjData(g1)
    d.qpos[0:3] = [0.4, 3.06, 0.79]
    mujoco.mj_kinematics(g1, d)
    cam = FollowCamera(g1)
    assert cam.base == g1.body("pelvis").id
    np.testing.assert_allclose(cam(d).lookat, [0.4, 3.06, 0.79])
    assert 1.0 < cam(d).distance < 5.0

    arm = build_model(load_robot_spec("franka"))
    fixed = FollowCamera(arm)
    da = mujoco.MjData(arm)
    before = fixed(da).lookat.copy()
    da.qpos[:] = 0.3
    mujoco.mj_kinematics(arm, da)
    assert fixed.base is None and np.array_equal(fixed(da).lookat, before)

    # the free body need not be the first: a scene whose table comes before the robot
    scene = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body name='table' pos='1 0 0.4'><geom type='box' size='.3 .3 .02'/></body>"
        "<body name='drone' pos='0 0 1'><freejoint/><geom type='sphere' size='.05'/></body></worldbody></mujoco>"
    )
    ds = mujoco.MjData(scene)
    ds.qpos[0:3] = [2.0, -1.0, 1.5]
    mujoco.mj_kinematics(scene, ds)
    np.testing.assert_allclose(FollowCamera(scene)(ds).lookat, [2.0, -1.0, 1.5])
