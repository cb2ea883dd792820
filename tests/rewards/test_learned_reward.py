"""A learned reward in training (``simreal.rewards.learned``): the jax ensemble equals the torch
one, the ``reward:`` section's errors, and the whole loop through the CLI on an arm task:
``simreal demos`` (camera frames with the goal drawn) -> ``simreal frames`` -> ``simreal label``
against the loopback oracle at 10% noise -> ``simreal fit-reward`` -> ``simreal train`` with
``reward.kind=learned`` alone, whose logged term is the model's score of the simulator's state."""

from __future__ import annotations

import csv

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from fixtures.oracle_server import OracleServer
from simreal.cli import main
from simreal.rewards.labelling import frame_digest
from simreal.rewards.learned import jax_reward
from simreal.rewards.reward_model import BTEnsemble, RewardModelConfig, load_reward_model, save_reward_model

TINY = [
    "train.num_envs=4",
    "train.num_timesteps=64",
    "train.unroll_length=8",
    "train.num_minibatches=2",
    "train.num_updates_per_batch=1",
    "train.num_eval_envs=2",
    "train.eval_every_steps=0",
    "train.policy_hidden=[16,16]",
    "train.value_hidden=[16,16]",
    "env.episode_length_s=1.0",
    "backend=native",
]


def test_jax_reward_is_the_torch_ensembles_mean():
    torch.manual_seed(0)
    model = BTEnsemble(
        RewardModelConfig(input_shape=(6,), members=3, hidden=16, obs_terms=("ee_pos_w", "target_pos_w"))
    )
    model.obs_mean.copy_(torch.linspace(-1, 1, 6))
    model.obs_std.copy_(torch.linspace(0.5, 2, 6))
    x = np.random.default_rng(0).normal(size=(32, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(jax_reward(model)(jnp.asarray(x))), model.reward(x), rtol=1e-5, atol=1e-5)
    assert np.ptp(model.reward(x)) > 0  # not a constant


def _state_model(path, obs_terms=("ee_pos_w", "target_pos_w"), size=6):
    save_reward_model(
        path, BTEnsemble(RewardModelConfig(input_shape=(size,), members=1, hidden=4, obs_terms=obs_terms))
    )
    return str(path)


@pytest.mark.parametrize(
    "reward, says",
    [
        (["reward.model=x"], "'reward.kind': expected one of learned, clip"),
        (["reward.kind=learned"], "'reward.model'"),
        (["reward.kind=learned", "reward.model={missing}"], "'reward.model': "),
        (["reward.kind=learned", "reward.model={untermed}"], "does not name the observation terms"),
        (
            ["reward.kind=learned", "reward.model={wrong_size}"],
            "takes 5 features, and its terms ee_pos_w, target_pos_w make 6",
        ),
        (["reward.kind=learned", "reward.model={no_key}"], "robot state of this task has no 'object_pos_w'"),
        (["reward.kind=learned", "reward.model={good}", "reward.task_weight=-1"], "'reward.task_weight'"),
        (["reward.kind=clip", "reward.model={missing}", "reward.prompts=[a robot]"], "(reward.model)"),
        (
            ["reward.kind=clip", "reward.model=m", "reward.prompts=[a robot]", "reward.camera=wrist"],
            "the task's model has no camera 'wrist'; its cameras: front",
        ),
        (["reward.kind=learned", "reward.model={uncamera}"], "does not name their camera"),
    ],
)
def test_bad_reward_sections_are_one_line(reward, says, tmp_path, capsys):
    files = {
        "missing": tmp_path / "missing.safetensors",
        "untermed": _state_model(tmp_path / "u.safetensors", obs_terms=()),
        "wrong_size": _state_model(tmp_path / "w.safetensors", size=5),
        "no_key": _state_model(tmp_path / "k.safetensors", obs_terms=("object_pos_w", "target_pos_w")),
        "good": _state_model(tmp_path / "g.safetensors"),
        "uncamera": tmp_path / "i.safetensors",
    }
    save_reward_model(files["uncamera"], BTEnsemble(RewardModelConfig(input_shape=(8, 8, 3), members=1, hidden=4)))
    args = [a.format(**files) for a in reward]
    assert main(["train", "arm-reach", *TINY, f"runs_root={tmp_path / 'runs'}", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("checkpoints/*"))


def test_the_whole_loop_demos_frames_label_fit_train(tmp_path, capsys):
    from simreal.errors import SimrealError
    from simreal.sim.headless_gl import use_headless_gl

    try:
        use_headless_gl()
    except SimrealError as e:
        pytest.skip(f"no headless OpenGL here: {e}")
    data, frames_file = tmp_path / "data", tmp_path / "frames.npz"
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
                "6",
                "--num-envs",
                "6",
                "--camera",
                "front",
                "--image-size",
                "32x32",
                "--out",
                str(data),
            ]
        )
        == 0
    )
    # each episode's instruction names its own goal, and the labels compare frames across episodes
    assert main(["frames", str(data), "--camera", "front", "--out", str(frames_file)]) == 2
    assert "--task: the episodes carry 6 different instructions" in capsys.readouterr().err
    assert (
        main(
            [
                "frames",
                str(data),
                "--camera",
                "front",
                "--every",
                "2",
                "--task",
                "to reach the green marker",
                "--out",
                str(frames_file),
            ]
        )
        == 0
    )
    z = np.load(frames_file, allow_pickle=False)
    assert z["frames"].shape == (150, 32, 32, 3) and z["state"].shape == (150, 9)
    assert list(z["state_terms"]) == ["ee_pos_w", "target_pos_w", "ee_to_target_w"]
    np.testing.assert_allclose(z["state"][:, 6:], z["state"][:, 3:6] - z["state"][:, :3], atol=1e-6)
    # the goal is drawn: each episode's first frame differs where its own goal marker stands
    assert np.abs(z["frames"][0].astype(int) - z["frames"][25]).sum() > 0

    # the oracle judges by the simulator's truth: the end effector's distance to the goal
    progress = -np.linalg.norm(z["state"][:, 6:], axis=1)
    oracle = {frame_digest(f): float(p) for f, p in zip(z["frames"], progress)}
    labels = tmp_path / "labels.npz"
    with OracleServer(oracle, noise=0.1, seed=1) as server:
        assert (
            main(
                [
                    "label",
                    str(frames_file),
                    "--endpoint",
                    server.url,
                    "--model",
                    "oracle",
                    "--pairs",
                    "800",
                    "--out",
                    str(labels),
                    "--cache",
                    str(tmp_path / "cache"),
                ]
            )
            == 0
        )
    err = capsys.readouterr().err
    assert "800/800 (100.0%)" in err and "pairs/s" in err and "cached" in err, err  # once silent for hours
    model_file = tmp_path / "reward.safetensors"
    assert (
        main(
            [
                "fit-reward",
                str(frames_file),
                str(labels),
                "--out",
                str(model_file),
                "--epochs",
                "100",
                "--holdout",
                "0.2",
            ]
        )
        == 0
    )
    import json

    out = capsys.readouterr()
    assert "100/100 (100.0%)" in out.err and "epochs/s" in out.err and "loss" in out.err, out.err
    report = json.loads(out.out.strip().splitlines()[-1])
    assert report["pairs_held_out"] == 160 and report["obs_terms"] == ["ee_pos_w", "target_pos_w", "ee_to_target_w"]
    assert report["held_out_agreement_with_labels"] >= 0.75, report
    model = load_reward_model(model_file)
    r = model.reward(z["state"].astype(np.float32))
    rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731  (preferences fix an order, not a scale)
    assert np.corrcoef(rank(r), rank(progress))[0, 1] > 0.75  # the model learned the distance from noisy labels

    # bad fits are one line, before anything is written: rows past the frames (a traceback after
    # --out was written; a negative row wrapped to the last frame), a holdout that leaves no pair,
    # an --out that is an input
    with np.load(labels, allow_pickle=False) as z:
        fields = {k: z[k] for k in z.files}
    for row in (5000, -1):
        bad = tmp_path / "bad_labels.npz"
        np.savez(bad, **{**fields, "index_a": np.concatenate([[row], fields["index_a"][1:]])})
        assert main(["fit-reward", str(frames_file), str(bad), "--out", str(tmp_path / "no.safetensors")]) == 2
        assert f"field 'index_a' holds row {row} (pair 0); {frames_file} has rows 0..149" in capsys.readouterr().err
    assert (
        main(
            [
                "fit-reward",
                str(frames_file),
                str(labels),
                "--out",
                str(tmp_path / "no.safetensors"),
                "--holdout",
                "0.999",
            ]
        )
        == 2
    )
    assert "--holdout 0.999 holds out 799 of the 800 pairs and leaves 1 to fit" in capsys.readouterr().err
    assert main(["fit-reward", str(frames_file), str(labels), "--out", str(frames_file)]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    assert not (tmp_path / "no.safetensors").exists()

    runs = tmp_path / "runs"
    assert (
        main(
            [
                "train",
                "arm-reach",
                *TINY,
                f"runs_root={runs}",
                "reward.kind=learned",
                f"reward.model={model_file}",
                "reward.task_weight=0",
            ]
        )
        == 0
    )
    (metrics,) = runs.glob("arm-reach/*/metrics.csv")
    rows = list(csv.DictReader(metrics.open()))
    learned = [float(row["reward/learned"]) for row in rows if row.get("reward/learned")]
    assert learned and all(np.isfinite(learned)), rows[-1].keys()

    # Using the policy needs no reward model: eval measures the task (a frame model would render
    # for nothing), so it never attaches one, even when the model file is gone.
    model_file.unlink()
    capsys.readouterr()
    assert main(["eval", str(metrics.parent), "--episodes", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["native"]["episodes"] == 2


def test_the_learned_term_scores_the_state_after_the_step(tmp_path):
    """In the env, reward/learned is the model's score of the environment state after the step,
    and with task_weight 0 it is the whole reward (times the control period)."""
    import jax

    from simreal.policies.run_config import make_env, resolve

    torch.manual_seed(1)
    model = BTEnsemble(RewardModelConfig(input_shape=(6,), members=2, hidden=8, obs_terms=("ee_pos_w", "target_pos_w")))
    save_reward_model(tmp_path / "r.safetensors", model)
    cfg = resolve(
        "arm-reach",
        [
            "backend=native",
            "reward.kind=learned",
            f"reward.model={tmp_path / 'r.safetensors'}",
            "reward.task_weight=0",
            "reward.weight=2",
        ],
    )
    env = make_env(cfg)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    state = jax.jit(env.step)(state, jnp.full(env.action_size, 0.3))
    s = np.asarray(env.environment_state(state.pipeline_state, state.info), np.float32)[None, :6]  # ee, target
    assert float(state.metrics["reward/learned"]) == pytest.approx(float(model.reward(s)[0]), abs=1e-5)
    assert float(state.reward) == pytest.approx(env.ctrl_dt * 2 * float(model.reward(s)[0]), abs=1e-5)
    assert float(state.metrics["reward/reach"]) > 0  # the task's terms are still logged, weighted 0


def _gl_or_skip():
    from simreal.errors import SimrealError
    from simreal.sim.headless_gl import use_headless_gl

    try:
        use_headless_gl()
    except SimrealError as e:
        pytest.skip(f"no headless OpenGL here: {e}")


def _frames_of(env, state, size):
    """The camera's frames of a batched state, the goal markers on each env's goal."""
    import jax

    from simreal.sim.render import sized_renderer

    with sized_renderer(env.mj_model, {"front": size}, nthread=1) as r:
        return r.render(np.asarray(state.pipeline_state.qpos), None, np.asarray(jax.vmap(env.mocap_pos)(state.info)))[
            "pixels/front"
        ]


def test_a_frame_model_scores_the_rendered_state_every_k_steps(tmp_path):
    """reward/learned of a frame model is its score of the camera's frame after the step (the
    goal drawn), asked at the first step and every K-th; the steps between keep the last score."""
    import jax

    from simreal.policies.run_config import make_env, resolve

    _gl_or_skip()
    torch.manual_seed(2)
    model = BTEnsemble(RewardModelConfig(input_shape=(16, 16, 3), members=2, hidden=8, camera="front"))
    save_reward_model(tmp_path / "f.safetensors", model)
    cfg = resolve(
        "arm-reach",
        [
            "backend=native",
            "reward.kind=learned",
            f"reward.model={tmp_path / 'f.safetensors'}",
            "reward.every_k_steps=2",
        ],
    )
    env = make_env(cfg)
    state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), 3))
    step = jax.jit(jax.vmap(env.step))
    a = jnp.full((3, env.action_size), 0.5)
    scores = []
    for _ in range(3):
        state = step(state, a)
        scores.append(np.asarray(state.metrics["reward/learned"]))
        if len(scores) in (1, 3):  # steps 1 and 3 are due
            np.testing.assert_allclose(scores[-1], model.reward(_frames_of(env, state, (16, 16))), atol=1e-5)
    np.testing.assert_array_equal(scores[1], scores[0])  # step 2 keeps step 1's score
    assert not np.allclose(scores[2], scores[0])  # the arm moved, the frames and scores changed


def test_clip_scores_the_rendered_state_in_training(tmp_path):
    import jax

    from simreal.policies.run_config import make_env, resolve
    from simreal.rewards.vlm import ClipReward

    pytest.importorskip("transformers")
    from fixtures import vlm_models

    _gl_or_skip()
    directory = vlm_models.make_tiny_clip(tmp_path / "clip")
    section = [
        f"reward.model={directory}",
        "reward.prompts=[the gripper on the green ball]",
        "reward.baselines=[a robot arm]",
        "reward.task_weight=0",
    ]
    cfg = resolve("arm-reach", ["backend=native", "reward.kind=clip", *section])
    env = make_env(cfg)
    state = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), 2))
    state = jax.jit(jax.vmap(env.step))(state, jnp.full((2, env.action_size), 0.5))
    want = ClipReward(cfg.reward)(_frames_of(env, state, (64, 64)))
    np.testing.assert_allclose(np.asarray(state.metrics["reward/clip"]), want, atol=1e-5)
    np.testing.assert_allclose(np.asarray(state.reward), env.ctrl_dt * want, atol=1e-6)


def test_the_random_teacher_holds_each_action_for_a_while():
    from types import SimpleNamespace

    from simreal.policies.demos.teachers import RandomTeacher

    teacher = RandomTeacher(SimpleNamespace(action_size=3), seed=0, switch=0.1)
    state = SimpleNamespace(done=np.zeros(64))
    actions = np.stack([teacher.act(state) for _ in range(200)])  # (T, B, m)
    assert actions.min() >= -1 and actions.max() <= 1 and actions.std() > 0.5  # the whole range
    changed = (np.diff(actions, axis=0) != 0).any(-1).mean()
    assert 0.05 < changed < 0.15  # a new action on about 10% of the steps, held in between
    teacher.reset()
    assert not np.array_equal(teacher.act(state), actions[-1])


def test_frames_refuses_a_state_of_joint_names_saying_which_datasets_it_takes():
    """A `simreal record` dataset names its state by joint: one line pointing at `simreal demos`."""
    from simreal.cli.frames import term_names
    from simreal.errors import DataFileError

    assert term_names(["joint_vel.0", "joint_vel.1", "last_action.0"], "observation.state", "x") == (
        "joint_vel",
        "last_action",
    )
    with pytest.raises(DataFileError, match="'shoulder_pan' is not <observation term>.*simreal demos"):
        term_names(["shoulder_pan", "shoulder_lift"], "observation.state", "ds/meta/info.json")
