"""``simreal train-bc --policy act``: ACT's chunking transformer, its training targets and loss,
the temporal ensembling (against hand-computed weights), the chunked bundle (ONNX chunk equal
to torch's, ``action_chunk`` validated), the deploy runner ensembling exactly as ``simreal eval``
does, and the CLI path demos -> train-bc -> eval -> export. Tiny models; no training but the
last (slow) test's two epochs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

import torch  # noqa: E402

from fixtures.bc_data import export_random_actor, fake_env, fit_phase_demos  # noqa: E402
from simreal.action_chunk import ActionChunk, ChunkedPolicy, TemporalEnsembler  # noqa: E402
from simreal.cli import main  # noqa: E402
from simreal.policies.run_config import resolve  # noqa: E402

#: A tiny ACT on arm-reach (1 s episodes: 50 steps at 50 Hz).
TINY = [
    "backend=native",
    "env.episode_length_s=1.0",
    "trainer=bc",
    "algorithm=bc",
    "train.policy=act",
    "train.act.dim_model=16",
    "train.act.n_heads=2",
    "train.act.dim_feedforward=32",
    "train.act.n_encoder_layers=1",
    "train.act.chunk_size=5",
    "train.act.temporal_ensemble_coeff=0.2",
]


def act_config(*overrides: str):
    return resolve("arm-reach", [*TINY, *overrides]).train


# -- the network and its targets --------------------------------------------------------------


def test_act_maps_an_observation_batch_to_chunks_scaled_to_the_control_rate():
    from simreal.action_chunk import CHUNK_S
    from simreal.policies.bc.act import action_chunk
    from simreal.policies.bc.actor import make_actor

    tc = act_config("train.act.chunk_size=0")
    for rate in (50.0, 100.0):
        chunk = action_chunk(fake_env(rate_hz=rate), tc)
        assert chunk == ActionChunk(round(CHUNK_S * rate), 0.2)
    assert action_chunk(fake_env(), act_config()).size == 5  # given: taken as is

    torch.manual_seed(0)
    actor = make_actor(fake_env(), act_config()).eval()
    x = torch.randn(7, 5)
    y = actor(x)
    assert y.shape == (7, 5, 2) and torch.all(y.abs() <= 1.0)
    assert (y[:, 0] - y[:, -1]).abs().max() > 1e-4  # one action per step of the chunk, not one copied
    # every observation term is an input: changing only the goal term changes the chunk
    x2 = x.clone()
    x2[:, 3:] += 1.0
    assert (actor(x2) - y).abs().max() > 1e-4


def test_chunk_targets_pad_past_the_episode_end_and_the_loss_ignores_the_padding():
    from simreal.policies.bc.actor import masked_mean
    from simreal.policies.bc.cloning import targets

    a = np.arange(10, dtype=np.float32).reshape(5, 2)  # a_t = (2t, 2t + 1)
    y, valid = targets(a, 3)
    assert y.shape == (5, 3, 2) and valid.shape == (5, 3)
    np.testing.assert_array_equal(y[1, :, 0], [2, 4, 6])
    np.testing.assert_array_equal(y[4, :, 0], [8, 8, 8])  # padded with the last action
    np.testing.assert_array_equal(valid.sum(axis=1), [3, 3, 3, 2, 1])
    y1, v1 = targets(a, None)
    assert y1 is a and v1.all()

    err = torch.tensor([[[1.0, 3.0], [5.0, 100.0]]])  # (1, 2 steps, 2 dims); the second step is padding
    assert masked_mean(err, torch.tensor([[True, False]])).item() == pytest.approx(2.0)
    assert masked_mean(err, torch.tensor([[True, True]])).item() == pytest.approx(27.25)


def test_fitting_act_on_a_tiny_synthetic_dataset_lowers_the_l1_loss():
    """Actions a_t = sin(w t + phi), the observation (sin, cos) of the phase and a constant: the
    chunk a_{t..t+k-1} is a function of the observation, which ACT must learn."""
    from simreal.policies.bc.actor import make_actor

    tc = act_config(
        "train.epochs=15",
        "train.batch_size=64",
        "train.learning_rate=0.005",
        "train.val_fraction=0.2",
        "train.act.dropout=0.0",
    )
    torch.manual_seed(0)
    losses, result, pred, expected = fit_phase_demos(make_actor(fake_env(), tc), tc, episodes=6, chunk=5)
    assert losses[-1]["train"] < 0.3 * losses[0]["train"], losses
    assert result.val_loss < 0.5 * losses[0]["val"]
    assert np.abs(pred - expected).mean() < 0.15


# -- temporal ensembling ----------------------------------------------------------------------


@pytest.mark.parametrize("m", [0.01, 0.5, 0.0, -0.3])
def test_temporal_ensemble_is_the_weighted_mean_of_every_prediction_of_the_step(m):
    k, steps = 4, 9
    chunks = np.random.default_rng(1).normal(size=(steps, 2, k, 3))  # (step, batch, k, m)
    ens = TemporalEnsembler(ActionChunk(k, m))
    for t in range(steps):
        got = ens(chunks[t])
        # hand-computed: the chunks of steps s = t-n+1 .. t predicted step t at their index t - s;
        # the oldest has weight exp(-m * 0), the next exp(-m * 1) ...
        sources = [s for s in range(max(0, t - k + 1), t + 1)]
        w = np.array([np.exp(-m * i) for i in range(len(sources))])
        expected = sum(wi * chunks[s, :, t - s] for wi, s in zip(w, sources)) / w.sum()
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    ens.reset()
    np.testing.assert_array_equal(ens(chunks[5]), chunks[5, :, 0])  # a new episode: its own first action


def test_chunked_policy_takes_one_observation_or_a_batch_and_restarts_on_another_batch_size():
    calls = []

    def predict(x):  # chunk j = obs sum + j: shows which predictions were averaged
        calls.append(x.shape)
        return (x.sum(axis=1)[:, None, None] + np.arange(3)[None, :, None]) * np.ones((1, 1, 2), np.float32)

    policy = ChunkedPolicy(predict, ActionChunk(3, 0.0))
    a0 = policy(np.array([1.0, 0.0]))
    a1 = policy(np.array([2.0, 0.0]))
    assert a0.shape == (2,) and calls == [(1, 2), (1, 2)]
    np.testing.assert_allclose(a0, [1.0, 1.0])
    np.testing.assert_allclose(a1, [(1.0 + 1) / 2 + 2.0 / 2] * 2)  # mean of 1 + 1 (old, index 1) and 2 + 0
    b = policy(np.zeros((4, 2)))  # another batch: another set of envs, started over
    np.testing.assert_allclose(b, 0.0)
    with pytest.raises(ValueError, match=r"\(B, 3, m\)"):
        TemporalEnsembler(ActionChunk(3, 0.0))(np.zeros((1, 4, 2)))


# -- the chunked bundle and the robot side ----------------------------------------------------


@pytest.fixture(scope="module")
def tiny_bundle(tmp_path_factory):
    """A randomly initialised tiny ACT for arm-reach, exported as ``simreal export`` does."""
    out, actor, chunk, _ = export_random_actor(resolve("arm-reach", TINY), tmp_path_factory.mktemp("act"))
    return out, actor, chunk


def test_bundle_carries_the_chunk_and_its_onnx_chunk_equals_torch(tiny_bundle):
    from simreal.bundle import OnnxPolicy, load_bundle
    from simreal.policies.bc.actor import deployed_policy

    out, actor, chunk = tiny_bundle
    bundle = load_bundle(out)
    assert bundle.action_chunk == chunk == ActionChunk(5, 0.2) and bundle.action_shape == (5, 8)
    obs = np.random.default_rng(3).normal(size=(12, bundle.obs_size)).astype(np.float32)
    onnx = OnnxPolicy(bundle)
    np.testing.assert_allclose(onnx.graph(obs), actor.act(obs), atol=1e-5)
    # step by step, the bundle's policy ensembles as the eval side's
    eval_side = deployed_policy(actor, chunk)
    robot = [onnx(o) for o in obs]
    sim = [eval_side(o) for o in obs]
    np.testing.assert_allclose(robot, sim, atol=1e-5)
    assert np.abs(np.array(robot) - actor.act(obs)[:, 0]).max() > 1e-3  # ensembled, not the chunk's first


@pytest.mark.parametrize(
    "section, field",
    [
        ({"size": 0, "temporal_ensemble_coeff": 0.01}, "action_chunk.size"),
        ({"temporal_ensemble_coeff": 0.01}, "action_chunk.size"),
        ({"size": 5, "temporal_ensemble_coeff": "fast"}, "action_chunk.temporal_ensemble_coeff"),
        ({"size": 5, "temporal_ensemble_coeff": float("nan")}, "action_chunk.temporal_ensemble_coeff"),
        ([5, 0.01], "action_chunk"),
    ],
)
def test_a_bad_action_chunk_section_names_its_field(tiny_bundle, section, field):
    from simreal.bundle import parse_bundle
    from simreal.errors import BundleError
    from simreal.yaml_io import load_yaml

    out = tiny_bundle[0]
    raw = load_yaml(out / "bundle.yaml")
    with pytest.raises(BundleError, match=field.replace(".", r"\.")):
        parse_bundle({**raw, "action_chunk": section}, out)


def test_a_graph_whose_chunk_differs_from_the_bundle_is_refused_and_an_unchunked_bundle_reads_as_before(
    tiny_bundle, tmp_path
):
    import shutil

    from simreal.bundle import OnnxPolicy, load_bundle, write_bundle_yaml
    from simreal.errors import BundleError
    from simreal.yaml_io import load_yaml

    out = tiny_bundle[0]
    raw = load_yaml(out / "bundle.yaml")
    for name, data, message in [
        ("other", {**raw, "action_chunk": {"size": 7, "temporal_ensemble_coeff": 0.01}}, "action_chunk.size"),
        ("none", {k: v for k, v in raw.items() if k != "action_chunk"}, "action.size"),  # a 3-d output, no section
    ]:
        d = tmp_path / name
        shutil.copytree(out, d)
        write_bundle_yaml(d, data)
        with pytest.raises(BundleError, match=f"{message}.*expected the policy graph"):
            OnnxPolicy(load_bundle(d))
    assert load_bundle(tmp_path / "none").action_chunk is None


def test_runner_ensembles_as_eval_does_and_starts_over_after_a_gap(tiny_bundle):
    from simreal.bundle import OnnxPolicy, load_bundle
    from simreal.deploy.adapters import encode_state
    from simreal.deploy.ros_types import msg_class
    from simreal.deploy.runner import PolicyRunner
    from simreal.policies.bc.actor import deployed_policy

    out, actor, chunk = tiny_bundle
    bundle = load_bundle(out)

    class Recording(OnnxPolicy):
        """The runner's own policy, recording what it was asked and answered."""

        def __init__(self, bundle):
            super().__init__(bundle)
            self.seen = []

        def __call__(self, obs):
            a = super().__call__(obs)
            self.seen.append((np.array(obs), np.array(a)))
            return a

    policy = Recording(bundle)
    runner = PolicyRunner(
        bundle, msg_class=msg_class, policy=policy, overrides={"start": {"ramp_s": 0.0}, "watchdog": {"latch": False}}
    )
    dt = runner.cfg.period_s
    goal = encode_state(
        "geometry_msgs/msg/PoseStamped",
        {"pos_w": np.array([0.5, 0.1, 0.4]), "quat_wxyz": np.array([1.0, 0, 0, 0])},
        0,
        msg_class,
    )
    runner.on_state("goal", goal, 0.0)
    rng = np.random.default_rng(0)
    q0 = np.array([a.default for a in runner.spec.actuators])
    actions, k = [], 0
    for k in range(12):  # 12 fresh ticks, the arm moving
        runner.on_robot_state({"joint_pos": q0 + 0.05 * rng.normal(size=8), "joint_vel": rng.normal(size=8)}, k * dt)
        actions.append(runner.tick(k * dt).action)
    assert all(a is not None for a in actions) and len(policy.seen) == 12
    # the eval side (simreal eval's policy) on the observations the runner built: the same actions
    eval_side = deployed_policy(actor, chunk)
    expected = [eval_side(o) for o, _ in policy.seen]
    np.testing.assert_allclose(actions, expected, atol=1e-5)
    np.testing.assert_allclose([a for _, a in policy.seen], actions, atol=1e-12)

    # the state goes stale: ticks without a policy run; once fresh again the ensemble starts over
    t = 12 * dt + runner.cfg.watchdog.timeout_s + 5 * dt
    assert runner.tick(t).action is None
    runner.on_robot_state({"joint_pos": q0, "joint_vel": np.zeros(8)}, t + dt)
    first = runner.tick(t + dt).action
    obs = policy.seen[-1][0]
    np.testing.assert_allclose(first, np.clip(actor.act(obs[None])[0, 0], -1, 1), atol=1e-5)


# -- configuration and the CLI ----------------------------------------------------------------


def test_policy_names_agree_and_heads_must_divide_the_width():
    from simreal.cli.train_bc import POLICIES
    from simreal.errors import ConfigError
    from simreal.policies.bc.actor import NETWORKS
    from simreal.policies.run_config import BCConfig

    choices = next(f for f in dataclasses.fields(BCConfig) if f.name == "policy").metadata["choices"]
    # the VLA reads images and words, not a state vector: its own fit (simreal/policies/vla/bc.py), no NETWORKS row
    assert set(NETWORKS) | {"vla"} == set(POLICIES) == set(choices)
    with pytest.raises(ConfigError, match=r"train\.act\.n_heads.*must divide train\.act\.dim_model \(16\)"):
        act_config("train.act.n_heads=3")


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    out = tmp_path_factory.mktemp("demos") / "reach"
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
                str(out),
            ]
        )
        == 0
    )
    return out


@pytest.mark.slow
def test_train_bc_act_evaluates_and_exports_like_any_run(demos, tmp_path, capsys):
    from simreal.bundle import OnnxPolicy, load_bundle
    from simreal.dataset.reader import Dataset
    from simreal.policies.bc.actor import CHECKPOINT, load_actor
    from simreal.policies.run_dir import load_config

    run_dir = tmp_path / "act"
    small = [a for a in TINY if a.startswith("train.act.")]
    assert (
        main(
            [
                "train-bc",
                str(demos),
                "train.num_eval_envs=2",
                *small,
                "--policy",
                "act",
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
    assert (cfg.trainer, cfg.train.policy, cfg.train.act.chunk_size) == ("bc", "act", 5)
    assert (run_dir / CHECKPOINT).is_file() and (run_dir / "metrics.csv").read_text().count("\n") == 3

    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    assert "episodes 2: success" in capsys.readouterr().out
    assert main(["export", str(run_dir)]) == 0
    assert "max abs diff" in capsys.readouterr().out

    bundle = load_bundle(run_dir / "bundle")
    assert bundle.action_chunk == ActionChunk(5, 0.2)
    ds = Dataset(demos)
    np.testing.assert_allclose(bundle.obs_mean, ds.stats["observation.state"]["mean"], rtol=1e-6)
    _, actor = load_actor(run_dir, cfg)
    np.testing.assert_allclose(actor.body[1].shift.numpy(), ds.stats["action"]["mean"], rtol=1e-6)
    obs = ds.episode(0)["observation.state"]
    np.testing.assert_allclose(OnnxPolicy(bundle).graph(obs), actor.act(obs), atol=1e-5)

    # the loaded policy (play's, a --teacher run's) starts its ensemble over at each episode
    from simreal.policies.trainers import get_trainer

    loaded = get_trainer("bc").load(run_dir, cfg)
    first = loaded.act(obs[0])
    for o in obs[1:4]:
        loaded.act(o)
    assert not np.allclose(loaded.act(obs[0]), first)  # the old chunks still weigh in
    loaded.reset()
    np.testing.assert_allclose(loaded.act(obs[0]), first, atol=1e-6)
    assert main(["play", str(run_dir), "--episodes", "2", "--out", str(tmp_path / "play.mp4")]) == 0
    capsys.readouterr()  # play's progress lines (stderr) are not the next command's message

    # a checkpoint of another shape is one line naming the settings that shape it
    (run_dir / "config.yaml").write_text(
        (run_dir / "config.yaml").read_text().replace("dim_model: 16", "dim_model: 32")
    )
    assert main(["eval", str(run_dir), "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "train.policy act, train.act {" in err and "'dim_model': 32" in err
