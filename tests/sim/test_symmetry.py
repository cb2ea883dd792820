"""The left-right mirror (simreal/sim/symmetry.py) held to the model and the task's own observation:
the mirrored joint vector puts every body at its mirror image, and the mirrored observation of a
state is the observation of the mirrored state."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from simreal.errors import ConfigError
from simreal.policies.run_config import make_env, resolve
from simreal.sim.symmetry import Mirror, joint_mirror, layout_mirror

M = np.array([1.0, -1.0, 1.0])


@pytest.fixture(scope="module")
def env():
    """One observation frame (stacked frames are mirrored alike, tested below)."""
    return make_env(resolve("g1-velocity", ["train.num_envs=4", "env.obs_history_steps=1"]))


def _partner(name: str) -> str:
    return name.replace("left_", "@").replace("right_", "left_").replace("@", "right_")


def _hinge_mirror(m: mujoco.MjModel) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The hinge joint ids, each one's partner joint id and the sign (Unitree's axes: roll and yaw
    flip, pitch keeps): the whole body's mirror, held joints included."""
    hinges = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    names = [m.joint(j).name for j in hinges]
    partner = np.array([hinges[names.index(_partner(n))] for n in names])
    sign = np.array([-1.0 if "roll" in n or "yaw" in n else 1.0 for n in names])
    return hinges, partner, sign


def test_the_mirrored_pose_puts_every_body_at_its_mirror_image(env):
    """The actuated joints' mirror (``joint_mirror``) is the whole body's, restricted to them; the
    whole body's (the held waist and arms, joints under the driver's PD, included) puts every
    body at its mirror image."""
    m = env.mj_model
    perm, sign = joint_mirror(m, env.robot.actuator_names)
    assert sorted(perm) == list(range(m.nu)) and set(sign) == {-1.0, 1.0}
    assert m.njnt > m.nu + 1  # the held joints are joints
    hinges, partner_j, sign_j = _hinge_mirror(m)
    hinge_of = {j: k for k, j in enumerate(hinges)}
    act_j = [int(m.actuator_trnid[i, 0]) for i in range(m.nu)]
    assert [act_j.index(partner_j[hinge_of[j]]) for j in act_j] == list(perm)
    np.testing.assert_array_equal([sign_j[hinge_of[j]] for j in act_j], sign)
    d = mujoco.MjData(m)
    adr = m.jnt_qposadr[hinges]
    q = np.random.default_rng(0).uniform(-0.4, 0.4, len(adr))

    def bodies(joints: np.ndarray) -> np.ndarray:
        d.qpos[:] = m.key_qpos[0]
        d.qpos[adr] = joints
        mujoco.mj_kinematics(m, d)
        return d.xpos.copy()

    names = [m.body(i).name for i in range(m.nbody)]
    partner = [names.index(_partner(n)) for n in names]
    qm = np.empty_like(q)
    qm[[hinge_of[j] for j in partner_j]] = q * sign_j
    a, b = bodies(q), bodies(qm)
    np.testing.assert_allclose(a * M, b[partner], atol=1e-9)
    assert np.abs(a * M - bodies(q)[partner]).max() > 0.05  # (the unmirrored pose is not its own mirror)
    # hip roll and yaw, ankle roll flip sign; hip pitch, knee, ankle pitch keep it (Unitree's axes)
    for i, n in enumerate(env.robot.actuator_names):
        assert sign[i] == (-1.0 if "roll" in n or "yaw" in n else 1.0), n


def _mirrored_state(env, state):
    """The physical mirror of ``state`` and its task inputs (command; the clock half a period on)."""
    phys, m = state.pipeline_state, env.mj_model
    perm, sign = joint_mirror(m, env.robot.actuator_names)
    hinges, partner_j, sign_j = _hinge_mirror(m)  # the held joints mirrored too: the whole body's mirror state
    qadr, dadr = m.jnt_qposadr[partner_j], m.jnt_dofadr[partner_j]
    qpos = phys.qpos.at[0:3].multiply(jnp.asarray(M)).at[3:7].multiply(jnp.array([1.0, -1.0, 1.0, -1.0]))
    qpos = qpos.at[qadr].set(phys.qpos[m.jnt_qposadr[hinges]] * sign_j)
    qvel = phys.qvel.at[0:3].multiply(jnp.asarray(M)).at[3:6].multiply(jnp.array([-1.0, 1.0, -1.0]))
    qvel = qvel.at[dadr].set(phys.qvel[m.jnt_dofadr[hinges]] * sign_j)
    info = dict(state.info)
    info["command"] = info["command"] * jnp.array([1.0, -1.0, -1.0])
    info["joint_offset"] = info["joint_offset"][perm] * sign
    info["last_action"] = info["last_action"][perm] * sign
    info["step"] = info["step"] + env.cycle_steps // 2
    return phys.replace(qpos=qpos, qvel=qvel), info


def test_the_mirrored_observation_is_the_observation_of_the_mirrored_state(env):
    """Every rule of TERM_RULES checked against the task's own terms, policy and critic, on a
    state a few random steps in (tilted, moving, a command with all three components)."""
    from simreal.observations import build_observation

    state = jax.jit(env.reset)(jax.random.PRNGKey(3))
    step = jax.jit(env.step)
    for k in range(5):
        state = step(state, jax.random.uniform(jax.random.PRNGKey(k), (env.action_size,), minval=-1, maxval=1))
    mir = Mirror(env)
    phys_m, info_m = _mirrored_state(env, state)
    for terms, (perm, sign) in ((env.obs_terms, mir.policy), (env.critic_obs_terms, mir.critic)):
        obs = np.asarray(build_observation(terms, env.observed_state(state.pipeline_state, state.info), jnp))
        obs_m = np.asarray(build_observation(terms, env.observed_state(phys_m, info_m), jnp))
        assert np.abs(obs).min() < np.abs(obs).max()  # a state with something to mirror
        np.testing.assert_allclose(obs[perm] * sign, obs_m, atol=1e-5)
    a = np.random.default_rng(1).uniform(-1, 1, env.action_size)
    perm, sign = mir.action
    np.testing.assert_allclose((a[perm] * sign)[perm] * sign, a)  # the mirror of the mirror


def test_a_stacked_observation_is_mirrored_frame_by_frame(env):
    """``env.obs_history_steps=5`` (run 14's): the policy's observation is five frames of the same
    terms, each mirrored in place as the one frame is (the frames' order kept, newest first)."""
    stacked = make_env(resolve("g1-velocity", ["train.num_envs=4", "env.obs_history_steps=5"]))
    k = stacked.cfg.obs_history_steps
    (p1, s1), (pk, sk) = Mirror(env).policy, Mirror(stacked).policy
    n = p1.size
    assert k > 1 and stacked.observation_size == k * n == pk.size
    frames = np.random.default_rng(0).normal(size=(k, n))
    mirrored = (frames.reshape(-1)[pk] * sk).reshape(k, n)
    np.testing.assert_allclose(mirrored, frames[:, p1] * s1)


def test_a_term_without_a_mirror_is_refused_by_name(env):
    joints = joint_mirror(env.mj_model, env.robot.actuator_names)
    with pytest.raises(ConfigError, match="no mirror for observation term 'pos_error_w'"):
        layout_mirror([{"name": "pos_error_w", "size": 3}], joints)


def test_rsl_rl_learns_from_both_halves_and_brax_refuses_the_setting():
    pytest.importorskip("rsl_rl")
    import torch
    from tensordict import TensorDict

    from simreal.policies.trainers.rsl_rl import mirrored_batch, runner_cfg

    cfg = resolve("g1-velocity", ["train.num_envs=4"])
    assert runner_cfg(cfg)["algorithm"]["symmetry_cfg"]["data_augmentation_func"] is mirrored_batch
    assert runner_cfg(cfg)["algorithm"]["schedule"] == "adaptive"

    class Venv:
        mirror = Mirror(make_env(cfg))

    n_policy, n_critic = Venv.mirror.policy[0].size, Venv.mirror.critic[0].size
    obs = TensorDict({"policy": torch.randn(3, n_policy), "critic": torch.randn(3, n_critic)}, batch_size=[3])
    act = torch.randn(3, 12)
    o2, a2 = mirrored_batch(Venv, obs, act)
    assert o2.batch_size[0] == 6 and a2.shape == (6, 12)
    torch.testing.assert_close(o2["policy"][:3], obs["policy"])
    perm, sign = Venv.mirror.policy
    torch.testing.assert_close(o2["policy"][3:], obs["policy"][:, perm] * torch.as_tensor(sign, dtype=torch.float32))
    with pytest.raises(ConfigError, match="train.symmetry.*trainer=brax does not learn from mirrored samples"):
        resolve("g1-velocity", ["trainer=brax"])
