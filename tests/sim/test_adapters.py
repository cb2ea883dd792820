"""Trainer adapters (SB3, Gymnasium, rsl_rl, Isaac Gym style VecTask) over quadrotor-hover.

One env with short episodes (10 control steps) shared by the module, so the jitted
reset/step compile once per batch size; adapters cache them on the env.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")
pytest.importorskip("rsl_rl")

import torch  # noqa: E402

from simreal.policies.run_config import make_env, resolve  # noqa: E402

N = 8


@pytest.fixture(scope="module")
def env():
    cfg = resolve("quadrotor-hover", ["backend=native", "env.episode_length_s=0.2"])
    return make_env(cfg)


def test_sb3_vecenv_auto_reset_semantics(env):
    from simreal.sim.adapter_sb3 import SB3VecEnv

    venv = SB3VecEnv(env, N, seed=0)
    obs = venv.reset()
    assert obs.shape == (N, env.observation_size) and obs.dtype == np.float32
    ended = []
    for _ in range(env.episode_steps + 1):
        obs, rew, done, infos = venv.step(np.zeros((N, env.action_size), np.float32))
        assert rew.shape == (N,) and np.all(np.isfinite(rew)) and np.all(np.isfinite(obs))
        for i in np.flatnonzero(done):
            ended.append(infos[i])
    assert ended, "10-step episodes must end within 11 steps"
    for info in ended:
        assert info["terminal_observation"].shape == (env.observation_size,)
        assert isinstance(info["TimeLimit.truncated"], bool)
        assert {"r", "l"} <= set(info["episode"])


def test_sb3_ppo_learns_saves_and_loads(env, tmp_path):
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import Logger

    from simreal.sim.adapter_sb3 import SB3VecEnv

    venv = SB3VecEnv(env, N, seed=1)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=32,
        batch_size=64,
        n_epochs=1,
        seed=0,
        policy_kwargs={"net_arch": [32, 32]},
        device="cpu",
    )
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default leaves a folder in /tmp
    model.learn(total_timesteps=2 * 32 * N)
    assert model.num_timesteps >= 2 * 32 * N
    model.save(tmp_path / "ppo")
    loaded = PPO.load(tmp_path / "ppo", env=venv, device="cpu")
    obs = venv.reset()
    a0, _ = model.predict(obs, deterministic=True)
    a1, _ = loaded.predict(obs, deterministic=True)
    np.testing.assert_allclose(a0, a1)


def test_gymnasium_env_passes_checker(env):
    from gymnasium.utils.env_checker import check_env

    from simreal.sim.adapter_gymnasium import GymEnv

    genv = GymEnv(env)
    check_env(genv, skip_render_check=True)
    obs, _ = genv.reset(seed=3)
    for _ in range(env.episode_steps):
        obs, r, term, trunc, info = genv.step(genv.action_space.sample())
        if term or trunc:
            break
    assert term or trunc and "episode/return" in info
    with pytest.raises(RuntimeError, match="reset"):
        genv.step(genv.action_space.sample())
    assert genv.observation_space.contains(genv.reset()[0])


def test_gymnasium_vector_env_same_step_autoreset(env):
    from simreal.sim.adapter_gymnasium import GymVectorEnv

    venv = GymVectorEnv(env, N)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (N, env.observation_size)
    ended = np.zeros(N, bool)
    for _ in range(env.episode_steps):
        obs, r, term, trunc, infos = venv.step(venv.action_space.sample())
        done = term | trunc
        if done.any():
            assert infos["final_obs"].shape == obs.shape
            np.testing.assert_array_equal(infos["_final_obs"], done)
        ended |= done
    assert ended.all()  # every episode ends by its 10-step limit


def test_sb3_and_rsl_rl_adapters_report_each_reward_term(env):
    """Each step carries every reward term's mean over the batch (the sb3 and rsl_rl trainers log
    them in metrics.csv as 'reward/<name>', as the brax trainer does)."""
    from simreal.sim.adapter_core import REWARD_TERMS
    from simreal.sim.adapter_sb3 import SB3VecEnv
    from simreal.sim.adapter_torch import RslRlVecEnv

    names = {f"reward/{k}" for k in env.scales}
    actions = np.random.default_rng(0).uniform(-1, 1, (N, env.action_size)).astype(np.float32)
    venv = SB3VecEnv(env, N, seed=0)
    venv.reset()
    _, _, _, infos = venv.step(actions)
    rsl = RslRlVecEnv(env, N)
    _, _, _, extras = rsl.step(torch.as_tensor(actions))
    for got, batch in ((infos[0][REWARD_TERMS], venv.batch), (extras[REWARD_TERMS], rsl.batch)):
        assert set(got) == names
        for k in names:
            assert got[k] == pytest.approx(float(np.mean(batch.state.metrics[k])), rel=1e-6, abs=1e-9)
        assert any(v != 0.0 for v in got.values())


def test_rsl_rl_get_observations_does_not_step_or_reset(env):
    from simreal.sim.adapter_torch import RslRlVecEnv

    venv = RslRlVecEnv(env, N)
    venv.step(torch.zeros(N, env.action_size))
    venv.step(torch.zeros(N, env.action_size))
    steps = venv.episode_length_buf.clone()
    a, b = venv.get_observations(), venv.get_observations()
    assert torch.equal(a["policy"], b["policy"]) and torch.equal(a["critic"], b["critic"])
    assert torch.equal(venv.episode_length_buf, steps) and int(steps[0]) == 2
    obs, _, _, _ = venv.step(torch.zeros(N, env.action_size))
    assert torch.equal(venv.get_observations()["policy"], obs["policy"])
    assert not torch.equal(obs["policy"], a["policy"])


def test_rsl_rl_on_policy_runner_two_iterations_and_checkpoint(env, tmp_path):
    from rsl_rl.runners import OnPolicyRunner

    from simreal.sim.adapter_torch import RslRlVecEnv

    train_cfg = {
        "num_steps_per_env": 8,
        "save_interval": 1,
        "logger": "tensorboard",
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2},
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [32, 32],
            "activation": "elu",
            "obs_normalization": True,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 0.5},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [32, 32], "activation": "elu", "obs_normalization": True},
    }
    venv = RslRlVecEnv(env, N)
    runner = OnPolicyRunner(venv, train_cfg, log_dir=str(tmp_path), device="cpu")
    runner.learn(2, init_at_random_ep_len=True)
    ckpts = sorted(tmp_path.glob("model_*.pt"))
    assert ckpts
    runner2 = OnPolicyRunner(venv, train_cfg, log_dir=None, device="cpu")
    runner2.load(str(ckpts[-1]))
    obs = venv.get_observations()
    p1, p2 = runner.get_inference_policy(), runner2.get_inference_policy()
    torch.testing.assert_close(p1(obs), p2(obs))


def test_vectask_buffers(env):
    from simreal.sim.adapter_torch import VecTask

    task = VecTask(env, N)
    obs_buf = task.obs_buf
    task.reset()
    for _ in range(env.episode_steps):
        obs_dict, rew, reset, extras = task.step(torch.zeros(N, env.action_size))
    assert obs_dict["obs"] is obs_buf  # persistent buffers, filled in place
    assert rew.shape == (N,) and reset.dtype == torch.long and bool(reset.all())
    assert extras["time_outs"].shape == (N,) and task.states_buf.shape == (N, task.num_states)
    assert torch.all(task.progress_buf == 0)  # every env just reset
