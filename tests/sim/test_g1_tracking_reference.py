"""A retargeted real-like capture as the ``g1-tracking`` reference (issue 10).

The clip is the real-like walk of tests/fixtures/synth_motion.py (feet pitched steeply in swing,
heel strike and roll; REAL_FEET), written as a Bandai Namco style BVH (Y-up centimetres) at the
dataset's 30 fps and retargeted to G1 by the CLI. Driving the joints at the reference's next frame
(PD playback, :meth:`G1Tracking.reference_action`) from a reference state must keep the
joint-position reward near 1 after one control step: on the real walk it once fell to 0.05
(joint flips in the reference), and a 30 fps clip looked up by nearest frame at the 50 Hz control
rate, with set-points clipped to home +- 0.5 rad, left 0.91 on average (0.71 at worst).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixtures import synth_motion as synth
from simreal.cli import main
from simreal.errors import ConfigError
from simreal.motion_file import load_motion
from simreal.policies.run_config import make_env, resolve

FPS = 30.0
N = 32
NO_NOISE = ["backend=native", "env.randomize=false", "env.obs_noise_scale=0", "env.action_delay_steps=[0,0]"]
MIN_MEAN_REWARD = 0.97  # joint_pos reward after one PD-driven step, mean over reference states
MIN_REWARD = 0.85  # and at the worst one


@pytest.fixture(scope="module")
def walk_g1(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("tracking_ref")
    clip = synth.with_noise(
        synth.walking(duration_s=2.0, fps=FPS, turn_rate_rad_s=0.1, feet=synth.REAL_FEET),
        noise_deg=0.3,
        root_noise_m=0.001,
        seed=3,
    )
    bvh, out = d / "walk.bvh", d / "walk_g1.npz"
    synth.write_bvh(bvh, clip, units="cm", up="y", order="ZXY", six_channels=True, rig="bandai")
    assert main(["retarget", str(bvh), "--robot", "g1", "--out", str(out)]) == 0
    return str(out)


@pytest.fixture(scope="module")
def env(walk_g1):
    return make_env(resolve("g1-tracking", NO_NOISE + [f"env.motion_file={walk_g1}"]))


def test_pd_playback_keeps_the_joint_reward_after_one_step(env):
    s = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), N))
    s = jax.jit(jax.vmap(env.step))(s, jax.vmap(env.reference_action)(s.info))
    r = np.asarray(s.metrics["reward/joint_pos"])
    assert np.all(np.asarray(s.done) == 0)
    assert r.mean() > MIN_MEAN_REWARD and r.min() > MIN_REWARD, (r.mean(), r.min())


def test_reference_is_interpolated_between_frames(env, walk_g1):
    """Half-way between two clip frames the reference is their mean (joints), a unit quaternion
    between the two (root); a 30 fps clip at 50 Hz is never held or jumped."""
    m = load_motion(walk_g1)
    cols = [m.joint_index(n) for n in env.robot.actuator_names]
    k = 7
    r = env.frame({"motion_t0": jnp.asarray(k + 0.5), "step": jnp.zeros((), jnp.int32)})
    np.testing.assert_allclose(np.asarray(r["dof_pos"]), 0.5 * (m.dof_pos[k, cols] + m.dof_pos[k + 1, cols]), atol=1e-5)
    q = np.asarray(r["root_quat"])
    assert abs(np.linalg.norm(q) - 1.0) < 1e-5
    assert np.dot(q, m.root_quat[k]) > np.dot(m.root_quat[k + 1], m.root_quat[k]) - 1e-6


def test_action_scale_that_cannot_reach_the_clip_is_a_config_error(walk_g1):
    """A walk's knee bends ~1 rad past home: at action_scale 0.5 its set-points would be clipped."""
    with pytest.raises(ConfigError) as e:
        make_env(resolve("g1-tracking", NO_NOISE + [f"env.motion_file={walk_g1}", "env.action_scale=0.5"]))
    msg = str(e.value)
    assert "env.action_scale" in msg and "needs" in msg and "\n" not in msg


def test_the_12dof_g1_tracks_the_whole_robots_clip_on_its_legs(walk_g1, tmp_path):
    """The walking variant (legs driven, waist and arms held) plays a clip of the whole G1: `simreal
    retarget --robot g1_12dof` retargets onto G1 (the clip it writes is G1's, joint for joint),
    the task reads the leg columns by name, tracks only the legs' and torso's bodies, and PD
    playback keeps the joint reward as on the whole robot. A clip of another robot is still refused."""
    from fixtures.robot_motion import synthetic_motion
    from simreal.errors import DataFileError
    from simreal.motion_file import save_motion
    from simreal.robot_spec import load_robot_spec
    from simreal.sim.robots import build_model

    bvh, out = tmp_path / "walk.bvh", tmp_path / "walk_12.npz"
    synth.write_bvh(bvh, synth.walking(duration_s=1.0, fps=FPS), units="cm", up="y", order="ZXY", rig="bandai")
    assert main(["retarget", str(bvh), "--robot", "g1_12dof", "--out", str(out)]) == 0
    assert load_motion(out).joint_names == load_motion(walk_g1).joint_names

    env12 = make_env(resolve("g1-tracking", NO_NOISE + ["robot=g1_12dof", f"env.motion_file={walk_g1}"]))
    m = load_motion(walk_g1)
    assert env12.mj_model.nu == 12 and not any("elbow" in b or "wrist" in b for b in env12.tracked_bodies)
    r = env12.frame({"motion_t0": jnp.asarray(5.0), "step": jnp.zeros((), jnp.int32)})
    cols = [m.joint_index(n) for n in env12.robot.actuator_names]
    np.testing.assert_allclose(np.asarray(r["dof_pos"]), m.dof_pos[5, cols], atol=1e-5)
    s = jax.jit(jax.vmap(env12.reset))(jax.random.split(jax.random.PRNGKey(0), N))
    s = jax.jit(jax.vmap(env12.step))(s, jax.vmap(env12.reference_action)(s.info))
    rew = np.asarray(s.metrics["reward/joint_pos"])
    assert np.all(np.asarray(s.done) == 0) and rew.mean() > MIN_MEAN_REWARD, rew.mean()

    h1_clip = tmp_path / "h1.npz"
    save_motion(h1_clip, synthetic_motion(build_model(load_robot_spec("h1")), seconds=0.5))
    with pytest.raises(DataFileError) as e:
        make_env(resolve("g1-tracking", NO_NOISE + ["robot=g1_12dof", f"env.motion_file={h1_clip}"]))
    assert "another robot" in str(e.value)
