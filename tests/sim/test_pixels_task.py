"""``arm-push-pixels``: dict observations (state, privileged state, camera images) from inside the
jitted step, through the SB3 and Gymnasium adapters, and a tiny SB3 ``MultiInputPolicy`` (CNN)
training run. 4 envs, 64x64 images (SB3's NatureCNN needs at least 36 px), short episodes."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from simreal.errors import SimrealError, UnknownNameError
from simreal.policies.run_config import make_env, resolve

N = 4


@pytest.fixture(scope="module")
def env():
    from simreal.sim.headless_gl import use_headless_gl

    try:
        use_headless_gl()
    except SimrealError as e:
        pytest.skip(f"no headless OpenGL here: {e}")
    return make_env(resolve("arm-push-pixels", ["backend=native", "env.episode_length_s=0.1", "env.render_threads=2"]))


def test_observation_is_state_privileged_state_and_pixels_rendered_in_the_step(env):
    assert env.observation_size == {"state": (27,), "privileged_state": (30,), "pixels/front": (64, 64, 3)}
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    s = reset(jax.random.split(jax.random.PRNGKey(0), N))
    assert {k: v.shape[1:] for k, v in s.obs.items()} == env.observation_size
    img0 = np.asarray(s.obs["pixels/front"])
    assert img0.dtype == np.uint8 and img0.std() > 5
    # the cube is where each episode put it: the images differ between envs
    assert len({img0[i].tobytes() for i in range(N)}) == N
    # the critic sees the cube (object_pos_w after the joints); the policy's state does not
    priv = np.asarray(s.obs["privileged_state"])
    obj = np.asarray(s.pipeline_state.qpos)[:, env.obj_qpos][:, :3]
    nq = env.action_size
    np.testing.assert_allclose(priv[:, 2 * nq : 2 * nq + 3], obj, atol=1e-6)
    a = jax.random.uniform(jax.random.PRNGKey(1), (N, env.action_size), minval=-1, maxval=1)
    for _ in range(3):
        s = step(s, a)
    assert np.all(np.isfinite(np.asarray(s.obs["state"]))) and np.all(np.isfinite(np.asarray(s.reward)))
    # the images follow the state: rendering the stepped qpos, the goal marker on each goal, gives
    # the observed pixels; without the marker (the model's own mocap position) they differ
    qpos, goals = np.asarray(s.pipeline_state.qpos), np.asarray(jax.vmap(env.mocap_pos)(s.info))
    np.testing.assert_array_equal(
        env.renderer.render(qpos, None, goals)["pixels/front"], np.asarray(s.obs["pixels/front"])
    )
    assert (env.renderer.render(qpos)["pixels/front"] != np.asarray(s.obs["pixels/front"])).any()


def test_any_arm_task_sees_through_a_camera_and_keeps_one_frame(env):
    """Cameras are the arm family's, not one task's: arm-reach with a pixel camera hides nothing
    (its state holds no object), so its policy and its critic read the same state; a policy that
    sees takes one frame, refused naming the key."""
    from simreal.errors import ConfigError

    reach = make_env(resolve("arm-reach", ["backend=native", "env.pixel_cameras=[front]", "env.render_threads=1"]))
    plain = make_env(resolve("arm-reach", ["backend=native"]))
    assert reach.observation_size == {
        "state": (plain.observation_size,),
        "privileged_state": (plain.observation_size,),
        "pixels/front": (64, 64, 3),
    }
    # arm-push through its camera: the cube's position is the one term the policy loses
    assert set(env.critic_obs_terms) - set(env.obs_terms) == {"object_pos_w"}
    with pytest.raises(ConfigError, match="env.obs_history_steps"):
        make_env(resolve("arm-push-pixels", ["backend=native", "env.obs_history_steps=2"]))


def test_unknown_pixel_camera_lists_the_cameras():
    with pytest.raises(UnknownNameError, match="unknown camera \\(env.pixel_cameras\\) 'wrist'; valid .*: front"):
        make_env(resolve("arm-push-pixels", ["backend=native", "env.pixel_cameras=[wrist]"]))


def test_sb3_dict_observations_terminal_images_and_multi_input_ppo(env):
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger

    from simreal.sim.adapter_sb3 import SB3VecEnv

    venv = SB3VecEnv(env, N, seed=0)
    space = venv.observation_space
    assert set(space.spaces) == {"state", "pixels/front"}  # the privileged state stays with the critic
    assert space["pixels/front"].dtype == np.uint8 and space["pixels/front"].shape == (64, 64, 3)
    obs = venv.reset()
    assert space.contains({k: v[0] for k, v in obs.items()})
    ended = []
    for _ in range(env.episode_steps):
        obs, rew, done, infos = venv.step(np.zeros((N, env.action_size), np.float32))
        ended += [infos[i] for i in np.flatnonzero(done)]
    assert len(ended) == N
    term = ended[0]["terminal_observation"]
    assert set(term) == {"state", "pixels/front"} and term["pixels/front"].std() > 5  # rendered, not zeros

    model = PPO(
        "MultiInputPolicy",
        venv,
        n_steps=8,
        batch_size=16,
        n_epochs=1,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [16], "features_extractor_kwargs": {"cnn_output_dim": 16}},
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default leaves a folder in /tmp
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=2 * 8 * N)
    assert model.num_timesteps >= 2 * 8 * N
    assert any(not np.allclose(b.numpy(), p.detach().numpy()) for b, p in zip(before, model.policy.parameters()))
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (N, env.action_size)


def test_gymnasium_vector_env_gives_a_dict_space(env):
    from simreal.sim.adapter_gymnasium import GymVectorEnv

    venv = GymVectorEnv(env, N, seed=0)
    obs, _ = venv.reset()
    assert set(obs) == {"state", "privileged_state", "pixels/front"}
    assert venv.observation_space.contains(obs)


def test_rsl_rl_groups_and_vectask_buffers_carry_the_images(env):
    """The torch adapters: rsl_rl gets a camera group channels-first in [0, 1] that its own
    CNNModel encodes; the VecTask keeps the uint8 frames in persistent buffers it refills."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("rsl_rl")
    from rsl_rl.models.cnn_model import CNNModel

    from simreal.sim.adapter_torch import RslRlVecEnv, VecTask

    venv = RslRlVecEnv(env, N)
    obs = venv.get_observations()
    assert set(obs.keys()) == {"policy", "critic", "front"}
    assert obs["policy"].shape == (N, 27) and obs["critic"].shape == (N, 30)
    img = obs["front"]
    assert img.shape == (N, 3, 64, 64) and img.dtype == torch.float32 and 0.0 <= img.min() <= img.max() <= 1.0
    raw = np.asarray(venv.batch.obs["pixels/front"])
    np.testing.assert_allclose(img.permute(0, 2, 3, 1).numpy() * 255.0, raw, atol=1e-3)
    model = CNNModel(
        obs,
        {"actor": ["policy", "front"]},
        "actor",
        output_dim=env.action_size,
        hidden_dims=[16],
        cnn_cfg={"output_channels": [4], "kernel_size": 8, "stride": 4, "global_pool": "avg"},
    )
    assert model(obs).shape == (N, env.action_size)
    obs, _, _, _ = venv.step(torch.zeros(N, env.action_size))
    assert obs["front"].shape == (N, 3, 64, 64)

    task = VecTask(env, N)
    buf = task.obs_dict["pixels/front"]
    assert task.num_obs == 27 and buf.shape == (N, 64, 64, 3) and buf.dtype == torch.uint8
    before = buf.clone()
    for _ in range(env.episode_steps):  # to the time limit: new episodes, the cubes elsewhere
        obs_dict, _, reset, _ = task.step(torch.ones(N, env.action_size))
    assert reset.all() and obs_dict["pixels/front"] is buf  # the same buffer, refilled
    np.testing.assert_array_equal(buf.numpy(), np.asarray(task.batch.obs["pixels/front"]))
    assert not torch.equal(before, buf)
