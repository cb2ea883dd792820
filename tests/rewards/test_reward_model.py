"""The Bradley-Terry reward ensemble (``simreal.rewards.reward_model``): its loss on hand-computed
values, and the whole loop: frames -> ``simreal label`` against the oracle server at 10% label
noise -> fitted ensemble -> >= 90% agreement with ground truth on held-out pairs (issue 12's
target); safetensors round trip."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fixtures.oracle_server import OracleServer
from fixtures.preference_scene import TASK, progress_by_digest, scene, true_labels
from simreal.cli import main
from simreal.errors import DataFileError
from simreal.rewards.label_file import load_labels
from simreal.rewards.reward_model import (
    BTEnsemble,
    RewardModelConfig,
    bt_loss,
    bt_targets,
    fit,
    load_reward_model,
    preference_accuracy,
    save_reward_model,
)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny networks: one thread is several times faster than two on a loaded 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_bt_loss_is_the_cross_entropy_of_the_reward_difference():
    r_a = torch.tensor([[0.5, -1.0, 2.0]])
    r_b = torch.tensor([[0.0, 1.0, 2.0]])
    target = torch.tensor([1.0, 0.0, 0.5])
    p = [1 / (1 + math.exp(-d)) for d in (0.5, -2.0, 0.0)]  # sigmoid(r_a - r_b)
    by_hand = -(math.log(p[0]) + math.log(1 - p[1]) + 0.5 * math.log(p[2]) + 0.5 * math.log(1 - p[2])) / 3
    assert bt_loss(r_a, r_b, target).item() == pytest.approx(by_hand, rel=1e-6)
    two_members = bt_loss(torch.cat([r_a, r_a]), torch.cat([r_b, r_b]), target)
    assert two_members.item() == pytest.approx(2 * by_hand, rel=1e-6)  # members' losses add


def test_targets_skip_or_tie_the_unsure_labels():
    rows, target = bt_targets(np.array([0, 1, -1, 0]), "skip")
    assert rows.tolist() == [0, 1, 3] and target.tolist() == [1.0, 0.0, 1.0]
    rows, target = bt_targets(np.array([0, 1, -1, 0]), "tie")
    assert rows.tolist() == [0, 1, 2, 3] and target.tolist() == [1.0, 0.0, 0.5, 1.0]


def test_the_whole_loop_learns_the_reward_from_noisy_vlm_labels(tmp_path):
    """Label 200 pairs of 150 training frames through ``simreal label`` (10% of answers flipped),
    fit the 3-member ensemble on the frames' state, score 300 pairs of 100 unseen frames."""
    frames, states, progress = scene(250, seed=0)
    train = np.arange(150)
    np.savez(tmp_path / "frames.npz", frames=frames[train], task=np.str_(TASK))
    out = tmp_path / "labels.npz"
    with OracleServer(progress_by_digest(frames, progress), noise=0.1, seed=1) as server:
        rc = main(
            [
                "label",
                str(tmp_path / "frames.npz"),
                "--endpoint",
                server.url,
                "--model",
                "oracle",
                "--pairs",
                "200",
                "--seed",
                "1",
                "--out",
                str(out),
                "--cache",
                str(tmp_path / "cache"),
            ]
        )
        assert rc == 0 and server.requests == 400
    labels = load_labels(out)
    pairs = np.stack([labels.index_a, labels.index_b], 1)
    noisy = (labels.label != true_labels(progress[train], pairs)).mean()
    assert 0.04 < noisy < 0.17  # the noise was applied (10% of 200, give or take sampling)

    torch.manual_seed(0)  # the members' initialisation
    model = BTEnsemble(RewardModelConfig(input_shape=(2,), members=3, hidden=64))
    losses = fit(model, states[labels.index_a], states[labels.index_b], labels.label, epochs=50, batch_size=64)
    assert losses[-1] < losses[0]
    rng = np.random.default_rng(2)
    held_out = rng.choice(np.arange(150, 250), size=(300, 2))
    held_out = held_out[held_out[:, 0] != held_out[:, 1]]
    accuracy = preference_accuracy(
        model, states[held_out[:, 0]], states[held_out[:, 1]], true_labels(progress, held_out)
    )
    assert accuracy >= 0.9, accuracy
    members = model(torch.as_tensor(states[:20])).detach().numpy()
    assert members.shape == (3, 20) and np.ptp(members, axis=0).max() > 0  # members differ

    path = tmp_path / "reward.safetensors"
    save_reward_model(path, model)
    loaded = load_reward_model(path)
    np.testing.assert_array_equal(loaded.reward(states), model.reward(states))
    header = path.read_bytes()[8 : 8 + int.from_bytes(path.read_bytes()[:8], "little")]
    assert b'"format":"simreal-bt-reward-ensemble/1"' in header.replace(b" ", b"")


def test_only_unsure_labels_cannot_be_fitted_but_can_tie():
    states = np.random.default_rng(0).uniform(size=(8, 2))
    model = BTEnsemble(RewardModelConfig(input_shape=(2,), members=2, hidden=8))
    with pytest.raises(ValueError, match="no usable labels"):
        fit(model, states[:4], states[4:], np.full(4, -1), epochs=1)
    losses = fit(model, states[:4], states[4:], np.full(4, -1), epochs=30, unsure="tie")
    assert losses[-1] <= losses[0]
    assert losses[-1] == pytest.approx(math.log(2), abs=0.02)  # ties: every member drives r(a) - r(b) to 0


def test_image_members_and_segment_returns():
    config = RewardModelConfig(input_shape=(16, 16, 3), members=3, hidden=16)
    model = BTEnsemble(config)
    frames = scene(6, seed=1)[0]
    r = model(torch.as_tensor(frames))
    assert r.shape == (3, 6)
    segments = torch.as_tensor(frames.reshape(2, 3, 16, 16, 3))
    np.testing.assert_allclose(
        model(segments).detach().numpy(), r.reshape(3, 2, 3).sum(-1).detach().numpy(), rtol=1e-5, atol=1e-6
    )  # a segment scores the sum of its frames
    np.testing.assert_allclose(model(segments, member=1).detach().numpy(), model(segments)[1].detach().numpy())
    losses = fit(model, frames[:3], frames[3:], np.array([0, 1, 0]), epochs=5, batch_size=3)
    assert np.isfinite(losses).all()
    with pytest.raises(ValueError, match="expected observations"):
        model(torch.zeros(2, 8, 8, 3))


def test_a_damaged_or_foreign_file_is_a_data_file_error(tmp_path):
    from safetensors.torch import save_file

    model = BTEnsemble(RewardModelConfig(input_shape=(2,), members=1, hidden=4))
    good = tmp_path / "good.safetensors"
    save_reward_model(good, model)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:40])
    with pytest.raises(DataFileError, match="not a safetensors file"):
        load_reward_model(cut)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, foreign)
    with pytest.raises(DataFileError, match="metadata 'format'"):
        load_reward_model(foreign)
    with pytest.raises(DataFileError, match="file not found"):
        load_reward_model(tmp_path / "missing.safetensors")


@pytest.mark.parametrize(
    "field, value, says",
    [("obs_std", 0.0, "'obs_std' holds a value <= 0"), ("obs_mean", float("nan"), "'obs_mean' holds NaN or inf")],
)
def test_a_reward_model_that_would_give_nan_is_refused(tmp_path, field, value, says):
    """An obs_std of 0 (an edited file) trained silently on a NaN reward read as 0."""
    model = BTEnsemble(RewardModelConfig(input_shape=(2,), members=1, hidden=4))
    getattr(model, field)[0] = value
    path = tmp_path / "bad.safetensors"
    save_reward_model(path, model)
    with pytest.raises(DataFileError, match=says):
        load_reward_model(path)
