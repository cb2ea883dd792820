"""Rewards from one demonstration (Human2Sim2Robot, issue 13 item 5): the object-trajectory file,
box keypoints, the keypoint tracking term, and the ``arm-demo-track`` task built on them.

The demonstration is the scripted push of tests/fixtures/demo_trajectory.py: a cube resting
0.5 s, sliding 10 cm along +x over 2 s while turning 0.3 rad, resting again.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixtures.demo_trajectory import HALF_SIZE_M, PRE_GRASP_FRANKA, START_W, pushed_cube, write_pushed_cube
from simreal.errors import ConfigError, DataFileError
from simreal.object_trajectory import (
    ObjectTrajectory,
    from_dataset,
    keypoints,
    load_demo,
    load_trajectory,
    resampled,
    save_trajectory,
)
from simreal.rewards import terms as rw

TURN_RAD = 0.3
NO_NOISE = [
    "backend=native",
    "env.randomize=false",
    "env.obs_noise_scale=0",
    "env.action_delay_steps=[0,0]",
    "env.init_joint_noise_rad=0",
]
TINY = [
    "train.num_envs=4",
    "train.num_timesteps=64",
    "train.unroll_length=8",
    "train.num_minibatches=2",
    "train.num_updates_per_batch=1",
    "train.num_eval_envs=2",
    "train.eval_every_steps=0",
    "train.policy_hidden=[16,16]",
    "train.value_hidden=[16,16]",
    "env.episode_length_s=1.0",
]
N = 4


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


# -- the trajectory file --------------------------------------------------------------------------
def test_trajectory_file_round_trip(tmp_path):
    demo = pushed_cube(turn_rad=TURN_RAD)
    save_trajectory(tmp_path / "a.npz", demo)
    back = load_trajectory(tmp_path / "a.npz")
    assert back.fps == demo.fps and back.robot == "franka" and back.provenance == demo.provenance
    for key in ("pos", "quat_wxyz", "pre_grasp_joint_pos"):
        np.testing.assert_array_equal(getattr(back, key), getattr(demo, key), err_msg=key)
    assert back.num_frames == 91 and back.duration_s == pytest.approx(3.0)
    bare = ObjectTrajectory(10.0, demo.pos[:5], demo.quat_wxyz[:5])  # a tracker's minimum: fps, pos, quat
    save_trajectory(tmp_path / "b.npz", bare)
    back = load_trajectory(tmp_path / "b.npz")
    assert back.pre_grasp_joint_pos is None and back.robot is None and back.provenance == {}


def _arrays(**change) -> dict:
    demo = pushed_cube()
    arrays = {
        "fps": np.array(30.0),
        "pos": demo.pos,
        "quat_wxyz": demo.quat_wxyz,
        "pre_grasp_joint_pos": demo.pre_grasp_joint_pos,
        "provenance": np.array("{}"),
    }
    arrays.update(change)
    return {k: v for k, v in arrays.items() if v is not None}


@pytest.mark.parametrize(
    "change, key",
    [
        ({"pos": None}, "pos"),
        ({"quat_wxyz": None}, "quat_wxyz"),
        ({"fps": None}, "fps"),
        ({"fps": np.array(0.0)}, "fps"),
        ({"pos": np.zeros((91, 2))}, "pos"),
        ({"quat_wxyz": np.tile([1.0, 0, 0, 0], (90, 1))}, "quat_wxyz"),  # one frame short
        ({"quat_wxyz": np.tile([2.0, 0, 0, 0], (91, 1))}, "quat_wxyz"),  # not unit length
        ({"pos": np.full((91, 3), np.nan)}, "pos"),
        ({"pre_grasp_joint_pos": np.zeros((2, 8))}, "pre_grasp_joint_pos"),
        ({"provenance": np.array("{not json")}, "provenance"),
        ({"pos": np.array(["a", "b"])}, "pos"),  # text, not numbers
        ({"pos": np.array([object()] * 3, dtype=object)}, "pos"),  # a pickle: refused
    ],
)
def test_trajectory_file_errors_are_one_line_naming_the_key(tmp_path, change, key):
    path = tmp_path / "bad.npz"
    np.savez(path, **_arrays(**change))
    with pytest.raises(DataFileError) as e:
        load_trajectory(path)
    msg = str(e.value)
    assert f"'{key}'" in msg and str(path) in msg and "\n" not in msg, msg


def test_a_file_that_is_not_an_npz_is_one_line(tmp_path):
    path = tmp_path / "demo.npz"
    path.write_bytes(b"FoundationPose wrote CSV here\n1,2,3\n")
    with pytest.raises(DataFileError, match="not an npz archive") as e:
        load_trajectory(path)
    assert "\n" not in str(e.value)


# -- keypoints and resampling ----------------------------------------------------------------------
def test_keypoints_of_a_known_pose():
    h = 0.5
    corners = keypoints(np.zeros(3), np.array([1.0, 0, 0, 0]), h)
    assert corners.shape == (8, 3)
    assert {tuple(c) for c in corners} == {(x, y, z) for x in (-h, h) for y in (-h, h) for z in (-h, h)}
    # a quarter turn about z maps the box's (x, y, z) to world (-y, x, z), then the centre is added
    pos = np.array([1.0, 2.0, 3.0])
    turned = keypoints(pos, _yaw_quat(math.pi / 2), h)
    np.testing.assert_allclose(turned, pos + corners[:, [1, 0, 2]] * [-1, 1, 1], atol=1e-12)
    # half extents per axis, batched frames, and jax.numpy alike
    box = keypoints(np.stack([pos, pos]), np.stack([_yaw_quat(0.0)] * 2), np.array([0.1, 0.2, 0.3]))
    assert box.shape == (2, 8, 3)
    np.testing.assert_allclose(np.ptp(box[0], axis=0), [0.2, 0.4, 0.6], atol=1e-12)
    in_jax = keypoints(jnp.asarray(pos), jnp.asarray(_yaw_quat(0.7)), h, jnp)
    np.testing.assert_allclose(np.asarray(in_jax), keypoints(pos, _yaw_quat(0.7), h), atol=1e-6)


def test_resampled_to_the_control_rate():
    """1 s at 10 fps (x linear, yaw linear 0 -> 0.4 rad) at 50 Hz: 51 frames on the same lines."""
    t = np.arange(11) / 10.0
    demo = ObjectTrajectory(10.0, np.outer(t, [0.2, 0, 0]), np.stack([_yaw_quat(0.4 * s) for s in t]))
    r = resampled(demo, 50.0)
    t50 = np.arange(51) / 50.0
    assert r.fps == 50.0 and r.num_frames == 51
    np.testing.assert_allclose(r.pos[:, 0], 0.2 * t50, atol=1e-12)
    yaw = 2 * np.arctan2(r.quat_wxyz[:, 3], r.quat_wxyz[:, 0])
    np.testing.assert_allclose(yaw, 0.4 * t50, atol=1e-5)  # nlerp over 0.04 rad steps
    np.testing.assert_allclose(np.linalg.norm(r.quat_wxyz, axis=1), 1.0, atol=1e-12)
    assert resampled(ObjectTrajectory(10.0, demo.pos[:1], demo.quat_wxyz[:1]), 50.0).num_frames == 1


# -- from a LeRobot dataset -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """One episode of the scripted push, recorded with an object-pose column and joint states that
    change every frame (so the pre-grasp frame can be told)."""
    from simreal.dataset.writer import DatasetWriter

    root = tmp_path_factory.mktemp("ds") / "push"
    demo = pushed_cube()
    names = [f"j{i}" for i in range(8)]
    features = {
        "observation.object_pose": {"dtype": "float32", "shape": [7], "names": None},
        "observation.state": {"dtype": "float32", "shape": [8], "names": names},
    }
    with DatasetWriter.create(root, fps=30, features=features, robot_type="franka") as w:
        for k in range(demo.num_frames):
            w.add_frame(
                {
                    "observation.object_pose": np.concatenate([demo.pos[k], demo.quat_wxyz[k]]),
                    "observation.state": PRE_GRASP_FRANKA + 0.001 * k,
                },
                task="push the cube 10 cm",
            )
        w.save_episode()
    return root


def test_from_dataset_reads_the_pose_and_the_pre_grasp_frame(dataset):
    t = from_dataset(dataset, 0, joint_key="observation.state", moved_m=0.004)
    demo = pushed_cube()
    assert t.fps == 30.0 and t.num_frames == demo.num_frames and t.robot == "franka"
    np.testing.assert_allclose(t.pos, demo.pos, atol=1e-6)
    np.testing.assert_allclose(t.quat_wxyz, demo.quat_wxyz, atol=1e-6)
    # the cube moves 0.05 m/s from 0.5 s: 4 mm is passed first at frame 18 (0.6 s, 5 mm; 17: 3.3 mm)
    np.testing.assert_allclose(t.pre_grasp_joint_pos, PRE_GRASP_FRANKA + 0.001 * 17, atol=1e-6)
    assert t.provenance["episode"] == 0
    assert load_demo(dataset).num_frames == t.num_frames and load_demo(dataset).pre_grasp_joint_pos is None


def test_from_dataset_errors_name_the_feature(dataset):
    with pytest.raises(DataFileError, match="no feature 'observation.object_pos'.*observation.object_pose"):
        from_dataset(dataset, 0, key="observation.object_pos")
    with pytest.raises(DataFileError, match=r"feature 'observation.state' has shape \[8\] per frame, expected \[7\]"):
        from_dataset(dataset, 0, key="observation.state")
    with pytest.raises(DataFileError, match="no episode 3: the dataset has 1 episodes"):
        from_dataset(dataset, 3)


# -- the reward term -----------------------------------------------------------------------------------
def test_keypoint_tracking_on_hand_computed_values():
    kp_ref = jnp.asarray(np.random.default_rng(0).normal(size=(8, 3)))
    assert float(rw.keypoint_tracking(kp_ref, kp_ref, 10.0)) == 1.0
    shifted = kp_ref + jnp.asarray([0.03, 0.0, 0.04])  # every corner 5 cm off
    assert float(rw.keypoint_distance(shifted, kp_ref)) == pytest.approx(0.05, rel=1e-6)
    assert float(rw.keypoint_tracking(shifted, kp_ref, 10.0)) == pytest.approx(math.exp(-0.5), rel=1e-6)
    half = kp_ref.at[:4].add(jnp.asarray([0.0, 0.1, 0.0]))  # half the corners 10 cm off: mean 5 cm
    assert float(rw.keypoint_tracking(half, kp_ref, 20.0)) == pytest.approx(math.exp(-1.0), rel=1e-6)
    batch = jnp.stack([kp_ref, shifted, half])  # (3, 8, 3): one value per leading index
    np.testing.assert_allclose(
        np.asarray(jax.jit(jax.vmap(lambda a: rw.keypoint_tracking(a, kp_ref, 10.0)))(batch)),
        np.asarray(rw.keypoint_tracking(batch, kp_ref, 10.0)),
        rtol=1e-6,
    )


def test_keypoint_tracking_slope_matches_finite_differences():
    """r(s) for every keypoint moved s along one unit direction: dr/ds = -k exp(-k s)."""
    kp_ref = jnp.asarray(np.random.default_rng(1).normal(size=(8, 3)))
    u = jnp.asarray([2.0, -1.0, 2.0]) / 3.0
    k = 12.0
    r = lambda s: rw.keypoint_tracking(kp_ref + s * u, kp_ref, k)  # noqa: E731
    s, eps = 0.04, 1e-3
    fd = (float(r(s + eps)) - float(r(s - eps))) / (2 * eps)
    assert fd == pytest.approx(-k * math.exp(-k * s), rel=1e-3)
    assert float(jax.grad(r)(jnp.float32(s))) == pytest.approx(-k * math.exp(-k * s), rel=1e-4)


# -- the task ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_file(tmp_path_factory) -> str:
    return write_pushed_cube(tmp_path_factory.mktemp("demo") / "push.npz", turn_rad=TURN_RAD)


@pytest.fixture(scope="module")
def env(demo_file):
    from simreal.policies.run_config import make_env, resolve

    return make_env(resolve("arm-demo-track", NO_NOISE + [f"env.demo_file={demo_file}"]))


@pytest.fixture(scope="module")
def started(env):
    return jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), N))


def test_initial_pose_is_pre_grasp_and_the_reference_starts_on_the_cube(env, started):
    s = started
    np.testing.assert_allclose(
        np.asarray(jax.vmap(env.joint_pos)(s.pipeline_state)), np.tile(PRE_GRASP_FRANKA, (N, 1)), atol=1e-6
    )
    np.testing.assert_allclose(np.asarray(env.action_layout()["offset"]), PRE_GRASP_FRANKA, atol=1e-6)
    yaw = np.asarray(s.info["demo_yaw"])
    assert len(np.unique(np.round(yaw, 4))) == N and np.all(np.abs(yaw) <= env.cfg.spawn_yaw_rad)
    origin = np.asarray(s.info["demo_origin"])
    assert np.all(np.abs(origin[:, :2] - START_W[:2]) <= 0.03 + 1e-6) and np.allclose(origin[:, 2], HALF_SIZE_M)
    np.testing.assert_allclose(np.asarray(jax.vmap(env.object_pos)(s.pipeline_state)), origin, atol=1e-6)
    d = np.asarray(jax.vmap(env.keypoint_dist)(s.pipeline_state, s.info))
    assert np.all(d < 1e-6), d


def test_reference_is_the_demo_moved_and_turned_with_the_start(env):
    """Step k targets the demo at k ctrl_dt, turned by the start's yaw about its start point."""
    origin, psi = jnp.asarray([0.4, 0.05, HALF_SIZE_M]), 0.5
    for t_s, s in ((0.0, 0.0), (1.0, 0.25), (2.5, 1.0), (10.0, 1.0)):  # s: the push's progress at t_s
        ref = env.reference(origin, jnp.float32(psi), jnp.int32(round(t_s / env.ctrl_dt)))
        pos = np.asarray(origin) + 0.1 * s * np.array([math.cos(psi), math.sin(psi), 0.0])
        np.testing.assert_allclose(np.asarray(ref["pos"]), pos, atol=1e-6)
        np.testing.assert_allclose(
            np.asarray(ref["keypoints"]), keypoints(pos, _yaw_quat(psi + TURN_RAD * s), HALF_SIZE_M), atol=1e-6
        )
        speed = 0.05 if 0.5 <= t_s < 2.5 else 0.0
        np.testing.assert_allclose(
            np.asarray(ref["vel"]), speed * np.array([math.cos(psi), math.sin(psi), 0.0]), atol=1e-6
        )


def test_reward_is_higher_when_the_cube_follows_the_reference(env, started):
    """Two rollouts from the same starts, zero actions: in one the cube is put on the reference
    pose before every step (set by hand in the physics state), in the other it is left alone."""
    step = jax.jit(jax.vmap(env.step))
    zero = jnp.zeros((N, env.action_size))

    def on_reference(s):
        """The cube on the pose the reference will have after the coming step."""
        k = s.info["step"] + 1
        ref = jax.vmap(env.reference)(s.info["demo_origin"], s.info["demo_yaw"], k)
        yaw = s.info["demo_yaw"] + TURN_RAD * jnp.clip((k * env.ctrl_dt - 0.5) / 2.0, 0.0, 1.0)  # the push's turn
        quat = jnp.stack([jnp.cos(yaw / 2), 0 * yaw, 0 * yaw, jnp.sin(yaw / 2)], axis=1)
        qpos = s.pipeline_state.qpos.at[:, env.obj_qpos].set(jnp.concatenate([ref["pos"], quat], axis=1))
        return s.replace(pipeline_state=s.pipeline_state.replace(qpos=qpos))

    totals = {}
    for name, place in (("follows", on_reference), ("left", lambda s: s)):
        s, total, last = started, 0.0, None
        for _ in range(int(round(1.5 / env.ctrl_dt))):  # into the push: the reference 5 cm away
            s = step(place(s), zero)
            total = total + np.asarray(s.metrics["reward/keypoints"])
            last = np.asarray(s.metrics["reward/keypoints"])
        assert np.all(np.asarray(s.done) == 0)
        totals[name] = (total, last)
    follows, left = totals["follows"], totals["left"]
    assert np.all(follows[0] > left[0]), totals
    assert np.all(follows[1] > 0.97) and np.all(left[1] < math.exp(-10.0 * 0.045)), totals  # 5 cm behind


def test_success_is_the_final_keypoint_distance(env):
    from fixtures.episode_samples import fed

    stats = fed(env, [{"keypoint_dist": d} for d in [0.0325] * 8 + [0.03, 0.01]])  # mean 0.03, the last 0.01
    out = {k: float(v) for k, v in env.final_stats(stats, jnp.bool_(False)).items()}
    assert out["success"] == 1.0 and out["final_keypoint_dist_m"] == pytest.approx(0.01)
    assert out["mean_keypoint_dist_m"] == pytest.approx(0.03) and out["object_lost"] == 0.0
    far = fed(env, [{"keypoint_dist": d} for d in [0.0325] * 8 + [0.03, 0.05]])
    assert float(env.final_stats(far, jnp.bool_(False))["success"]) == 0.0
    lost = env.final_stats(stats, jnp.bool_(True))
    assert float(lost["success"]) == 0.0 and float(lost["final_keypoint_dist_m/n"]) == 0.0


def test_bundle_reference_is_the_demo_where_it_was_recorded(env):
    deployment = env.deployment()
    ref = deployment.reference
    assert ref.rate_hz == pytest.approx(50.0) and not ref.loop and ref.num_rows == 151  # 3 s at 50 Hz
    np.testing.assert_allclose(ref.values["target_pos_w"][0], START_W, atol=1e-6)
    np.testing.assert_allclose(ref.values["target_pos_w"][-1], START_W + [0.1, 0, 0], atol=1e-6)
    assert ref.values["command"][50, 0] == pytest.approx(0.05, rel=1e-4)
    params = deployment.task_params
    np.testing.assert_allclose(np.asarray(params["target_pos_w"]), START_W, atol=1e-6)
    # the target comes from the reference, not a goal topic; judged over the episode, not at its end
    assert set(deployment.task_topics) == {"object"} and not deployment.judged_at_end


# -- configuration errors ------------------------------------------------------------------------------
def _build(overrides):
    from simreal.policies.run_config import make_env, resolve

    return make_env(resolve("arm-demo-track", ["backend=native", *overrides]))


def test_missing_demo_file_is_one_line_naming_the_key(capsys, tmp_path):
    from simreal.cli import main

    with pytest.raises(ConfigError, match="env.demo_file"):
        _build([])
    assert main(["train", "arm-demo-track", f"runs_root={tmp_path}", *TINY]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "env.demo_file" in err[0], err


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("missing", "file not found"),
        ("garbage", "not an npz archive"),
        ("other_robot", "pre_grasp_joint_pos is for robot 'so100'"),
        ("wrong_length", "pre_grasp_joint_pos has 6 values, robot franka has 8 actuators"),
        ("out_of_range", "pre_grasp_joint_pos panda_joint4 = 0.5 is outside its range"),
    ],
)
def test_bad_demo_file_is_one_line_naming_the_key(tmp_path, kind, expected):
    path = tmp_path / "demo.npz"
    if kind == "garbage":
        path.write_bytes(b"\x00" * 64)
    elif kind == "other_robot":
        write_pushed_cube(path, robot="so100")
    elif kind == "wrong_length":
        write_pushed_cube(path, pre_grasp=np.zeros(6), robot=None)
    elif kind == "out_of_range":
        write_pushed_cube(path, pre_grasp=PRE_GRASP_FRANKA.copy() + np.eye(8)[3] * 2.7)
    with pytest.raises(ConfigError) as e:
        _build([f"env.demo_file={path}"])
    msg = str(e.value)
    assert "env.demo_file" in msg and str(path) in msg and expected in msg and "\n" not in msg, msg


# -- train and export through the CLI ------------------------------------------------------------------------
@pytest.mark.slow
def test_tiny_train_exports_a_bundle_that_plays_the_demo_back(demo_file, tmp_path):
    from simreal.bundle import load_bundle
    from simreal.cli import main

    assert main(["train", "arm-demo-track", f"env.demo_file={demo_file}", f"runs_root={tmp_path}", *TINY]) == 0
    run_dir = next((tmp_path / "arm-demo-track").iterdir())
    assert main(["export", str(run_dir)]) == 0
    bundle = load_bundle(run_dir / "bundle")
    assert [t.name for t in bundle.obs_terms] == [
        "joint_pos_rel",
        "joint_vel",
        "object_pos_w",
        "target_pos_w",
        "command",
        "last_action",
    ]
    assert bundle.reference is not None and set(bundle.reference.values) == {"target_pos_w", "command"}
    np.testing.assert_allclose(bundle.reference.at(2.5)["target_pos_w"], START_W + [0.1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(bundle.reference.at(99.0)["target_pos_w"], START_W + [0.1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(bundle.action.offset, PRE_GRASP_FRANKA, atol=1e-6)
    assert set(bundle.task_topics) == {"object"}
