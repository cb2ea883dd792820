"""SAC (simreal/policies/rl/sac.py): its state resumes bit for bit (replay buffer included), its config
is validated per algorithm, and a run trains, evaluates and exports through the CLI."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from simreal.errors import ConfigError
from simreal.policies import checkpoint as ckpt
from simreal.policies.rl.sac import SAC
from simreal.policies.run_config import SACConfig, from_mapping, make_env, resolve

TINY = [
    "algorithm=sac",
    "train.num_envs=4",
    "train.steps_per_iteration=4",
    "train.batch_size=16",
    "train.grad_updates_per_step=2",
    "train.min_replay_size=32",
    "train.max_replay_size=256",
    "train.policy_hidden=[16,16]",
    "train.q_hidden=[16,16]",
    "env.episode_length_s=0.3",
]


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(tree))]


@pytest.fixture(scope="module")
def sac():
    cfg = resolve("cartpole-balance", TINY)
    return SAC(make_env(cfg), cfg.train, cfg.seed)


def test_iterations_fill_the_buffer_and_learn(sac):
    s0 = sac.init()
    assert int(sac.buffer.size(s0.buffer_state)) == 32  # the prefill
    s, m = sac.iterate(s0)
    s, m = sac.iterate(s)
    assert int(sac.buffer.size(s.buffer_state)) == 32 + 2 * 4 * 4
    assert sac.iterate._cache_size() == 1  # the fresh state has the iteration's own types: one compile
    assert int(s.env_steps) == 32 + 2 * 16
    for k in ("critic_loss", "actor_loss", "alpha_loss", "alpha", "reward_per_step"):
        assert np.isfinite(float(m[k])), k
    # two iterations of 4 steps x 2 gradient steps moved the actor, the critic and the target
    fresh = SAC(sac.env, sac.cfg, sac.seed).init()
    for name in ("policy_params", "q_params", "target_q_params"):
        moved = [np.max(np.abs(a - b)) for a, b in zip(_leaves(getattr(s, name)), _leaves(getattr(fresh, name)))]
        assert max(moved) > 0, name


def test_checkpoint_resumes_bit_for_bit(sac, tmp_path):
    """The trainer's restore (a fresh SAC from the config, the checkpoint placed on its mesh)
    continues exactly, and compiles its iteration once."""
    from simreal.policies.trainers.brax import BRAX

    s, _ = sac.iterate(sac.init())
    ckpt.save_pytree(ckpt.checkpoint_path(tmp_path / "checkpoints", int(s.env_steps)), s)
    _, algo, restored = BRAX.restore(tmp_path, resolve("cartpole-balance", TINY))
    a, b = s, restored
    for _ in range(2):
        a, _ = sac.iterate(a)
        b, _ = algo.iterate(b)
    for x, y in zip(_leaves(a), _leaves(b)):
        np.testing.assert_array_equal(x, y)
    assert algo.iterate._cache_size() == 1


def test_config_is_the_algorithms_own():
    cfg = resolve("cartpole-balance", TINY)
    assert cfg.algorithm == "sac" and isinstance(cfg.train, SACConfig)
    with pytest.raises(ConfigError, match="train.unroll_length"):
        resolve("cartpole-balance", TINY + ["train.unroll_length=4"])
    with pytest.raises(ConfigError, match="algorithm.*rsl_rl runs ppo"):
        resolve("cartpole-balance", ["trainer=rsl_rl", "algorithm=sac"])
    with pytest.raises(ConfigError, match="algorithm"):
        resolve("cartpole-balance", ["algorithm=ddpg"])


def test_per_algorithm_defaults_under_algorithms():
    base = {
        "task": "cartpole-balance",
        "robot": "cartpole",
        "algorithm": "sac",
        "train": {"num_envs": 8},
        "algorithms": {"sac": {"num_envs": 16, "batch_size": 64}, "ppo": {"unroll_length": 8}},
    }
    sac = from_mapping(base)
    assert (sac.train.num_envs, sac.train.batch_size) == (8, 64)  # train: wins over algorithms.sac
    ppo = from_mapping({**base, "algorithm": "ppo"})
    assert ppo.train.unroll_length == 8 and ppo.train.num_envs == 8
    assert "algorithms" not in ppo.to_dict()  # a run's config holds the chosen algorithm's alone
    with pytest.raises(ConfigError, match="algorithms.sac.unroll_length"):
        from_mapping({**base, "algorithms": {"sac": {"unroll_length": 8}}})
    with pytest.raises(ConfigError, match="algorithms.td3"):
        from_mapping({**base, "algorithms": {"td3": {}}})


@pytest.mark.parametrize("trainer", ["brax", "sb3"])
def test_cli_trains_evaluates_exports_and_resumes(trainer, tmp_path):
    """``simreal train ... algorithm=sac`` through every verb that touches a run."""
    import contextlib
    import io
    import json

    from simreal.bundle import load_bundle
    from simreal.cli import main

    def cli(*argv: str) -> str:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(list(argv)) == 0, buf.getvalue()[-2000:]
        return buf.getvalue()

    if trainer == "sb3":
        pytest.importorskip("stable_baselines3")
    args = [
        *TINY,
        f"trainer={trainer}",
        "train.num_timesteps=96",
        "train.num_eval_envs=4",
        "eval.episodes=4",
        "train.eval_every_steps=0",
        f"runs_root={tmp_path}",
    ]
    out = json.loads(cli("train", "cartpole-balance", *args, "--json").strip().splitlines()[-1])
    run_dir = out["run_dir"]
    assert out["env_steps"] >= 96 and "eval_success" in out
    assert json.loads(cli("eval", run_dir, "--json"))["native"]["episodes"] == 4
    assert "max abs diff" in cli("export", run_dir, "--out", str(tmp_path / "bundle"))
    bundle = load_bundle(tmp_path / "bundle", robot="cartpole")
    assert bundle.provenance["trainer"] == trainer and bundle.obs_size > 0
    out2 = json.loads(cli("train", "--resume", run_dir, "train.num_timesteps=160", "--json").strip().splitlines()[-1])
    assert out2["env_steps"] >= 160 > out["env_steps"]


def test_a_budget_the_prefill_would_spend_is_one_clear_error_and_leaves_no_run(tmp_path, capsys):
    from simreal.cli import main

    # 32 transitions fill the buffer (min_replay_size) and count against the 32-step budget: nothing to train
    assert main(["train", "cartpole-balance", *TINY, "train.num_timesteps=32", f"runs_root={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "config key 'train.num_timesteps': 32 env steps would all go to filling" in err[0], err
    assert not any(tmp_path.iterdir())
