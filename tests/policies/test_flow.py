"""``simreal train-bc --policy flow``: the flow-matching chunk head. Its loss is the
flow-matching error of the straight path (checked against its formula), the sampler is S Euler
steps from the noise's mean, a fit on a function of the observation recovers the chunks, the
bundle's ONNX graph equals torch's, and the CLI trains, evaluates and exports it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

import torch  # noqa: E402

from fixtures.bc_data import export_random_actor, fake_env, fit_phase_demos  # noqa: E402
from simreal.action_chunk import ActionChunk  # noqa: E402
from simreal.cli import main  # noqa: E402
from simreal.policies.run_config import resolve  # noqa: E402

TINY = [
    "backend=native",
    "env.episode_length_s=1.0",
    "trainer=bc",
    "algorithm=bc",
    "train.policy=flow",
    "train.flow.hidden=[32,32]",
    "train.flow.chunk_size=4",
    "train.flow.steps=5",
    "train.flow.temporal_ensemble_coeff=0.2",
]


def flow_config(*overrides: str):
    return resolve("arm-reach", [*TINY, *overrides]).train


def test_sampling_is_euler_steps_of_the_velocity_from_zero():
    from simreal.policies.bc import flow

    torch.manual_seed(0)
    net = flow.build(fake_env(), flow_config())
    assert (net.chunk_size, net.action_size, net.steps) == (4, 2, 5)
    x = torch.randn(3, 5)
    a = torch.zeros(3, 4, 2)
    for i in range(5):
        a = a + net.velocity(x, a, torch.full((3,), i / 5)) / 5
    torch.testing.assert_close(net(x), a)
    assert flow.action_chunk(fake_env(rate_hz=50.0), flow_config("train.flow.chunk_size=0")) == ActionChunk(20, 0.2)


def test_the_loss_is_the_flow_matching_error_of_the_straight_path():
    from simreal.policies.bc import flow

    torch.manual_seed(1)
    net = flow.build(fake_env(), flow_config())
    x, y = torch.randn(6, 5), torch.randn(6, 4, 2)
    err = flow.flow_matching_error(net, x, y, torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)
    eps, tau = torch.randn(y.shape, generator=g), torch.rand(6, generator=g)
    a_tau = (1 - tau[:, None, None]) * eps + tau[:, None, None] * y
    torch.testing.assert_close(err, (net.velocity(x, a_tau, tau) - (y - eps)) ** 2)


def test_fitting_recovers_chunks_that_are_a_function_of_the_observation():
    """Actions a_t = (sin, 0.5 cos) of a phase the observation carries: the sampled chunk from the
    noise's mean must land on a_{t..t+3}."""
    from simreal.policies.bc.actor import make_actor

    tc = flow_config(
        "train.epochs=60",
        "train.batch_size=64",
        "train.learning_rate=0.003",
        "train.val_fraction=0.2",
        "train.flow.hidden=[64,64]",
    )
    torch.manual_seed(0)
    losses, result, pred, expected = fit_phase_demos(make_actor(fake_env(), tc), tc, episodes=8, chunk=4)
    assert losses[-1]["train"] < 0.5 * losses[0]["train"], losses
    assert result.val_loss < 0.02, result  # the validation error is of the sampled chunks
    assert np.abs(pred - expected).mean() < 0.1


def test_the_bundle_unrolls_the_steps_and_equals_torch(tmp_path):
    from simreal.bundle import OnnxPolicy, load_bundle

    out, actor, chunk, env = export_random_actor(resolve("arm-reach", TINY), tmp_path)
    n, m = env.observation_size, env.action_size
    rng = np.random.default_rng(0)
    bundle = load_bundle(out)
    assert bundle.action_chunk == chunk == ActionChunk(4, 0.2) and bundle.action_shape == (4, m)
    obs = rng.normal(size=(7, n)).astype(np.float32)
    np.testing.assert_allclose(OnnxPolicy(bundle).graph(obs), actor.act(obs), atol=1e-5)


@pytest.mark.slow
def test_train_bc_flow_evaluates_and_exports_like_any_run(tmp_path, capsys):
    from simreal.policies.run_dir import load_config

    demos = tmp_path / "reach"
    assert (
        main(
            [
                "demos",
                "arm-reach",
                "backend=native",
                "env.episode_length_s=1.0",
                "--teacher",
                "scripted",
                "--episodes",
                "4",
                "--num-envs",
                "4",
                "--seed",
                "1",
                "--out",
                str(demos),
            ]
        )
        == 0
    )
    run_dir = tmp_path / "flow"
    small = [a for a in TINY if a.startswith("train.flow.")]
    assert (
        main(
            [
                "train-bc",
                str(demos),
                "train.num_eval_envs=2",
                *small,
                "--policy",
                "flow",
                "--epochs",
                "2",
                "--out",
                str(run_dir),
            ]
        )
        == 0
    )
    assert "eval (2 episodes) success" in capsys.readouterr().out
    cfg = load_config(run_dir)
    assert (cfg.train.policy, cfg.train.flow.chunk_size, cfg.train.flow.steps) == ("flow", 4, 5)
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    assert main(["export", str(run_dir)]) == 0
    assert "max abs diff" in capsys.readouterr().out
