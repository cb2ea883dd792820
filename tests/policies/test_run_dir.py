"""The run-directory object (simreal/policies/run_dir.py): what every verb does with a run's folder."""

from __future__ import annotations

import numpy as np
import pytest

from simreal.errors import ConfigError
from simreal.policies import checkpoint as ckpt
from simreal.policies.run_config import resolve
from simreal.policies.run_dir import RunDir, load_config


def test_a_new_run_keeps_its_config_and_is_removed_when_nothing_finished(tmp_path):
    cfg = resolve("cartpole-balance", [f"runs_root={tmp_path}", "seed=7"])
    run = RunDir.create(cfg)
    assert run.path.parent == tmp_path / "cartpole-balance" and run.new
    assert load_config(run.path).seed == 7 and RunDir.open(run.path).config().to_dict() == cfg.to_dict()
    assert run.discard_if_empty() and not (tmp_path / "cartpole-balance").exists()
    kept = RunDir.create(cfg)
    ckpt.save_pytree(ckpt.checkpoint_path(kept.path / "checkpoints", 64), {"w": np.zeros(2, np.float32)})
    assert not kept.discard_if_empty() and kept.checkpoints()  # a run with a checkpoint stays
    assert not RunDir.open(kept.path).discard_if_empty()  # an opened run is never removed


def test_a_resume_that_saved_nothing_puts_the_config_back(tmp_path):
    run = RunDir.create(resolve("cartpole-balance", [f"runs_root={tmp_path}"]))
    before = (run.path / "config.yaml").read_bytes()
    resumed = RunDir.open(run.path)
    resumed.save_config(resolve("cartpole-balance", [f"runs_root={tmp_path}", "train.num_timesteps=999"]))
    assert resumed.config().train.num_timesteps == 999
    assert resumed.restore_config() and (run.path / "config.yaml").read_bytes() == before
    resumed.save_config(resolve("cartpole-balance", [f"runs_root={tmp_path}", "seed=3"]))
    ckpt.save_pytree(ckpt.checkpoint_path(run.path / "checkpoints", 64), {"w": np.zeros(2, np.float32)})
    assert not resumed.restore_config() and resumed.config().seed == 3  # a checkpoint of the new config


def test_out_must_be_new_or_empty_and_open_names_what_is_missing(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    with pytest.raises(ConfigError, match="--out.*exists and is not empty"):
        RunDir.create(resolve("cartpole-balance", []), tmp_path / "full")
    with pytest.raises(ConfigError, match="not a simreal run directory"):
        RunDir.open(tmp_path / "full")
