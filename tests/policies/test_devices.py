"""Data-parallel training (simreal/policies/devices.py): two CPU devices compute what one does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from simreal.errors import ConfigError
from simreal.policies import devices

#: Two PPO iterations of the same config on one device and split over two (forced host
#: devices), printing the parameters and where the env states live.
SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    from simreal.policies.run_config import resolve, make_env
    from simreal.policies.rl.ppo import PPO
    tiny = ["train.num_envs=8", "train.unroll_length=4", "train.num_minibatches=2",
            "train.num_updates_per_batch=1", "train.policy_hidden=[8]", "train.value_hidden=[8]",
            "env.episode_length_s=0.5"]
    out = {"n_devices": len(jax.devices())}
    for d in (1, 2):
        cfg = resolve("cartpole-balance", tiny + [f"train.devices={d}"])
        ppo = PPO(make_env(cfg), cfg.train, cfg.seed)
        s = ppo.init()
        for _ in range(2):
            s, _ = ppo.iterate(s)
        out[f"shards_{d}"] = len(s.env_state.obs.sharding.device_set)
        out[f"params_{d}"] = np.concatenate([np.ravel(x) for x in jax.tree.leaves(jax.device_get(s.params))]).tolist()
    from simreal.errors import ConfigError
    from simreal.policies.devices import data_mesh
    try:
        data_mesh(2, 3)
    except ConfigError as e:
        out["uneven"] = str(e)
    print(json.dumps(out))
""")


def test_two_devices_train_like_one():
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"  # conftest's kept
    env = {**os.environ, "XLA_FLAGS": flags.strip(), "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["n_devices"] == 2
    assert (out["shards_1"], out["shards_2"]) == (1, 2)
    one, two = np.array(out["params_1"]), np.array(out["params_2"])
    assert np.max(np.abs(one - two)) < 1e-4 * max(1.0, np.max(np.abs(one)))
    assert np.max(np.abs(one)) > 0  # parameters, not an empty tree
    assert "train.num_envs" in out["uneven"] and "2 devices" in out["uneven"]


def test_more_devices_than_present_names_the_key():
    with pytest.raises(ConfigError, match="train.devices"):
        devices.data_mesh(64, 64)
    assert devices.data_mesh(1, 3).devices.size == 1


def test_distributed_join_from_the_environment(monkeypatch):
    for k in ("SLURM_NTASKS", "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(k, raising=False)
    assert devices.initialize_distributed() is False  # a plain run joins nothing
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "127.0.0.1:1")
    with pytest.raises(ConfigError, match="JAX_NUM_PROCESSES"):
        devices.initialize_distributed()
    # a one-process "cluster" through the real coordinator service, in a fresh interpreter
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
        "JAX_NUM_PROCESSES": "1",
        "JAX_PROCESS_ID": "0",
        "JAX_PLATFORMS": "cpu",
    }
    code = (
        "import jax; from simreal.policies.devices import initialize_distributed as i; "
        "print(i(), jax.process_count(), jax.process_index())"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-3:] == ["True", "1", "0"]
