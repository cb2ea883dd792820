"""Training resumes bit-for-bit, export matches JAX to 1e-5, bad bundles name their field,
the CLI runs train -> eval -> export on a tiny budget, and every trainer (brax, sb3, rsl_rl)
trains, exports, evaluates and plays through the CLI, headless without MUJOCO_GL too."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml

from fixtures.tiny_training import TINY_PPO
from simreal.bundle import OnnxPolicy, load_bundle
from simreal.errors import BundleError
from simreal.policies import checkpoint as ckpt
from simreal.policies.export import check_export, export_bundle
from simreal.policies.rl.ppo import PPO
from simreal.policies.run_config import make_env, resolve

TINY = [
    *TINY_PPO,
    "eval.episodes=8",
    "env.episode_length_s=0.5",
    "train.num_timesteps=384",
    "train.target_success=0",
]


@pytest.fixture(scope="module")
def ppo():
    cfg = resolve("quadrotor-hover", [*TINY, "backend=native"])  # what a restore from cfg builds too
    return cfg, PPO(make_env(cfg), cfg.train, cfg.seed)


def test_resume_continues_exactly(ppo, tmp_path):
    _, algo = ppo
    ts = algo.iterate(algo.init())[0]
    ckpt.save_pytree(tmp_path / "step.npz", ts)
    for _ in range(2):
        ts = algo.iterate(ts)[0]
    resumed = ckpt.load_pytree(tmp_path / "step.npz", algo.init())
    for _ in range(2):
        resumed = algo.iterate(resumed)[0]
    same = jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), ts, resumed)
    assert all(jax.tree.leaves(same))
    assert int(resumed.env_steps) == 3 * algo.steps_per_iteration
    # the optimizer state (Adam moments) is part of what was restored
    mu = jax.tree.leaves(resumed.optimizer_state)
    assert any(np.abs(np.asarray(x)).sum() > 0 for x in mu if np.asarray(x).size > 1)


def test_the_first_evaluation_finds_its_program_compiled_while_training_went_on(ppo):
    """The loop calls prepare_evaluation after the first iteration: the evaluation compiles on a
    background thread while the next iterations run (and donate the training state the
    parameters came from), and the evaluation after them compiles nothing of its own."""
    from fixtures.jax_compiles import compiles_of
    from simreal.policies.trainers.brax import _BraxLearner

    cfg, algo = ppo
    learner = _BraxLearner(cfg, algo.env, algo, algo.iterate(algo.init())[0])
    with compiles_of("evaluation_episodes") as compiled_on:
        learner.prepare_evaluation()
        learner.iterate()
        learner.iterate()
        result = learner.evaluate()
    assert compiled_on == ["simreal-eval-compile"], compiled_on
    assert result["episodes"] == cfg.train.num_eval_envs


def test_checkpoint_from_other_config_is_refused(ppo, tmp_path):
    _, algo = ppo
    ckpt.save_pytree(tmp_path / "step.npz", algo.init())
    cfg2 = resolve("quadrotor-hover", TINY + ["train.policy_hidden=[8]"])
    other = PPO(make_env(cfg2, backend="native"), cfg2.train, 0)
    with pytest.raises(Exception, match="step.npz"):
        ckpt.load_pytree(tmp_path / "step.npz", other.init())


def test_a_checkpoint_without_a_newer_episode_statistic_still_evaluates_and_resumes(ppo, tmp_path):
    """A run from before its task gained an episode statistic: evaluation and export read only
    the policy from the checkpoint, and a resume all but the per-step metrics, which the next
    step writes; the resumed iteration is the one the whole checkpoint gives. A missing policy
    array is refused either way."""
    from simreal.errors import DataFileError
    from simreal.policies.trainers.brax import BRAX

    cfg, algo = ppo
    ts = algo.iterate(algo.init())[0]
    path = ckpt.checkpoint_path(tmp_path / "checkpoints", int(ts.env_steps))
    ckpt.save_pytree(path, ts)
    with np.load(path) as z:
        stored = {k: z[k] for k in z.files}
    stat = next(k for k in stored if k.startswith("env_state.metrics.episode/"))
    np.savez(path, **{k: v for k, v in stored.items() if k != stat})
    _, fresh, restored = BRAX.restore(tmp_path, cfg, policy_only=True)
    for a, b in zip(jax.tree.leaves(algo.policy_params(ts)), jax.tree.leaves(fresh.policy_params(restored))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    _, again, resumed = BRAX.restore(tmp_path, cfg)
    for a, b in zip(jax.tree.leaves(algo.iterate(ts)[0]), jax.tree.leaves(again.iterate(resumed)[0])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    value = next(k for k in stored if k.startswith("params.value."))
    np.savez(path, **{k: v for k, v in stored.items() if k != value})
    with pytest.raises(DataFileError, match=f"missing array '{value}'"):
        BRAX.restore(tmp_path, cfg)
    weight = next(k for k in stored if k.startswith("params.policy."))
    np.savez(path, **{k: v for k, v in stored.items() if k not in (stat, weight)})
    with pytest.raises(DataFileError, match=f"missing array '{weight}'"):
        BRAX.restore(tmp_path, cfg, policy_only=True)


def test_export_matches_jax(ppo, tmp_path):
    cfg, algo = ppo
    ts = algo.iterate(algo.init())[0]
    norm, pol = algo.policy_params(ts)
    out = export_bundle(tmp_path, cfg, algo.env, norm, pol)
    assert check_export(out, algo.make_policy, (norm, pol), n=512) < 1e-5
    b = load_bundle(out, robot="crazyflie2", obs_size=30, action_size=4)
    assert b.obs_names == ("pos_error_w", "rot_mat_wb", "lin_vel_w", "ang_vel_b", "last_action", "action_history")
    # the hover default commands the rate loop: collective thrust [N] (4 x 0.15 N full scale) and
    # body rates [rad/s] (max_body_rate_rad_s 10), clipped to those limits
    assert b.action.names == ("thrust", "roll_rate", "pitch_rate", "yaw_rate")
    assert b.action.mode == "ctbr"
    np.testing.assert_allclose(b.action.to_physical(np.array([-1, 0, 1, 2.0])), [0, 0, 10, 10])
    np.testing.assert_allclose(b.action.to_physical(np.array([1, -0.5, -1, -2.0])), [0.6, -5, -10, -10])
    assert b.task_params["target_pos_w"] == [0.0, 0.0, 1.0]
    assert OnnxPolicy(b)(np.zeros(30)).shape == (4,)


def test_a_policy_observing_frames_exports_them_to_the_bundle(tmp_path):
    """``env.obs_history_steps=3``: the bundle's terms are one frame, ``latency.obs_history`` says
    three, the graph takes the 3 x 30 inputs the env gives and matches JAX."""
    cfg = resolve("quadrotor-hover", TINY + ["env.obs_history_steps=3"])
    algo = PPO(make_env(cfg, backend="native"), cfg.train, cfg.seed)
    norm, pol = algo.policy_params(algo.init())
    out = export_bundle(tmp_path, cfg, algo.env, norm, pol)
    assert check_export(out, algo.make_policy, (norm, pol), n=64) < 1e-5
    b = load_bundle(out, robot="crazyflie2", obs_size=90, action_size=4)
    assert (b.obs_history, b.frame_size, b.latency["obs_history"]) == (3, 30, 3)
    assert OnnxPolicy(b)(np.zeros(90)).shape == (4,)


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d.update(format_version=99), "format_version"),
        (lambda d: d["observation"].update(size=21), "observation.size"),
        (lambda d: d["action"]["scale"].pop(), "action.scale"),
        (lambda d: d.pop("control_rate_hz"), "control_rate_hz"),
        (lambda d: d["onnx"].update(file="missing.onnx"), "onnx.file"),
        (
            lambda d: d["task_params"].update(target_pos_w="abc"),
            "task_params.target_pos_w",
        ),  # was a ValueError in deploy
    ],
)
def test_bad_bundle_names_field(ppo, tmp_path, edit, field):
    cfg, algo = ppo
    ts = algo.init()
    out = export_bundle(tmp_path, cfg, algo.env, *algo.policy_params(ts))
    data = yaml.safe_load((out / "bundle.yaml").read_text())
    edit(data)
    (out / "bundle.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(BundleError, match=f"'{field}'"):
        load_bundle(out)


def test_bundle_for_other_robot_refused(ppo, tmp_path):
    cfg, algo = ppo
    out = export_bundle(tmp_path, cfg, algo.env, *algo.policy_params(algo.init()))
    with pytest.raises(BundleError, match="'robot'"):
        load_bundle(out, robot="g1")
    with pytest.raises(BundleError, match="'observation.size'"):
        load_bundle(out, obs_size=23)


def test_cli_train_eval_export_smoke(tmp_path):
    root = tmp_path / "runs"
    cmd = [sys.executable, "-m", "simreal.cli"]
    r = subprocess.run(
        cmd + ["train", "quadrotor-hover", *TINY, f"runs_root={root}", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    run_dir = Path(result["run_dir"])
    assert result["env_steps"] >= 384
    for f in ("config.yaml", "metrics.csv", "plots/learning_curve.png"):
        assert (run_dir / f).is_file(), f
    assert ckpt.latest_checkpoint(run_dir / "checkpoints") is not None
    assert list(run_dir.glob("events.out.tfevents.*"))
    r = subprocess.run(
        cmd + ["eval", str(run_dir), "--episodes", "8", "--backend", "mjx", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(r.stdout)
    assert r.returncode == (0 if report["sim_to_sim_passed"] else 1), r.stderr
    assert set(report) >= {"rigid", "mjx", "gap"} and "success" in report["mjx"]
    r = subprocess.run(cmd + ["export", str(run_dir)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (run_dir / "bundle" / "policy.onnx").is_file()
    r = subprocess.run(
        cmd + ["train", "--resume", str(run_dir), "train.num_timesteps=768"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["train"]["num_timesteps"] == 768


# -- every trainer behind the one driver table, through the CLI ------------------------------------

CARTPOLE_TINY = [
    "backend=native",
    "train.num_envs=8",
    "train.unroll_length=8",
    "train.num_minibatches=2",
    "train.num_updates_per_batch=1",
    "train.policy_hidden=[16,16]",
    "train.value_hidden=[16]",
    "train.num_eval_envs=4",
    "train.eval_every_steps=0",
    "train.target_success=0",
    "eval.episodes=4",
    "env.episode_length_s=0.1",
    "train.num_timesteps=64",
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """trainer -> run directory, each trained once in this process through ``simreal.cli.main``."""
    runs: dict[str, Path] = {}

    def get(trainer: str) -> Path:
        if trainer not in runs:
            root = tmp_path_factory.mktemp(f"runs_{trainer}")
            out = _cli_json("train", "cartpole-balance", f"trainer={trainer}", *CARTPOLE_TINY, f"runs_root={root}")
            assert out["env_steps"] >= 64
            runs[trainer] = Path(out["run_dir"])
        return runs[trainer]

    return get


def _cli_json(*argv: str) -> dict:
    """Run ``simreal ARGV --json`` in this process; its JSON report (train prints it on the
    last line, after the run directory; eval prints only the report)."""
    import contextlib
    import io

    from simreal.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([*argv, "--json"])
    assert rc == 0, buf.getvalue()[-2000:]
    return json.loads(buf.getvalue().strip().splitlines()[-1]) if argv[0] == "train" else json.loads(buf.getvalue())


# brax and rsl_rl cover both driver classes (BraxTrainer, TorchTrainer) fast; sb3 differs from
# rsl_rl only in its checkpoint loader and adds ~25 s on 2 busy cores.
@pytest.mark.parametrize("trainer", ["brax", "rsl_rl", pytest.param("sb3", marks=pytest.mark.slow)])
def test_every_trainer_trains_exports_evaluates_and_plays(trainer, trained, tmp_path, capsys, monkeypatch):
    import imageio.v2 as imageio

    from simreal.cli import main
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers import get_trainer
    from simreal.sim.env import MjEnv

    if trainer != "brax":
        pytest.importorskip("torch")
    run_dir = trained(trainer)
    cfg = load_config(run_dir)
    assert cfg.trainer == trainer

    built = []  # the env is built once per command: export checks it, then the trainer exports on it
    init = MjEnv.__init__
    monkeypatch.setattr(MjEnv, "__init__", lambda self, *a, **k: (built.append(1), init(self, *a, **k))[1])
    assert main(["export", str(run_dir), "--out", str(tmp_path / "bundle")]) == 0
    assert len(built) == 1
    assert "max abs diff" in capsys.readouterr().out
    bundle = load_bundle(tmp_path / "bundle", robot="cartpole")
    assert bundle.provenance["trainer"] == trainer
    # the bundle's ONNX graph is the policy the trainer's driver loads, to 1e-5
    policy = get_trainer(trainer).load(run_dir, cfg)
    obs = np.random.default_rng(0).normal(size=(64, bundle.obs_size)).astype(np.float32)
    action = np.asarray(policy.act(obs))
    assert action.shape == (64, 1) and np.all(np.abs(action) <= 1.0)
    np.testing.assert_allclose(OnnxPolicy(bundle)(obs), action, atol=1e-5)

    built.clear()
    report = _cli_json("eval", str(run_dir))
    assert len(built) == 1, "eval builds the env once"
    assert report["trained_on"] == "native" and report["native"]["episodes"] == 4
    assert np.isfinite(report["native"]["return"])

    video = tmp_path / "play.mp4"
    built.clear()
    assert main(["play", str(run_dir), "--steps", "5", "--width", "64", "--height", "48", "--out", str(video)]) == 0
    assert len(built) == 1, "play builds the env once"
    monkeypatch.setattr(MjEnv, "__init__", init)
    with imageio.get_reader(video, "ffmpeg") as reader:
        frames = [f for f in reader]  # not list(): the reader's len() is inf
    assert len(frames) == 5 and frames[0].shape == (48, 64, 3)
    err = capsys.readouterr().err  # play said what it renders and how far it is (it was silent for 148 s)
    assert "rendering up to 1 x 5 frames at 64x48" in err and " frames/s | episode 1/1 | ETA " in err, err
    # 'follow' is offered whatever cameras the model has (the humanoids have none)
    assert (
        main(
            [
                "play",
                str(run_dir),
                "--steps",
                "2",
                "--width",
                "64",
                "--height",
                "48",
                "--out",
                str(video),
                "--camera",
                "follow",
            ]
        )
        == 0
    )
    assert main(["play", str(run_dir), "--camera", "chase_nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "unknown camera 'chase_nope'" in err and "follow" in err.split("valid cameras:")[1], err


def test_export_out_replaces_only_a_bundle(trained, tmp_path, monkeypatch, capsys):
    """``--out`` a folder of the user's files (or ``.``), or a file: refused in one line, nothing
    touched (the folder was deleted, ``.`` was a traceback, a file left a bundle beside it);
    an earlier bundle is replaced."""
    from simreal.cli import main

    run_dir = trained("brax")
    mine = tmp_path / "project"
    mine.mkdir()
    (mine / "mycode.py").write_text("x = 1\n")
    clip = tmp_path / "walk.npz"
    clip.write_bytes(b"data")
    monkeypatch.chdir(mine)
    for out in (str(mine), ".", str(clip)):
        assert main(["export", str(run_dir), "--out", out]) == 2
        err = capsys.readouterr().err
        assert "--out" in err and "Traceback" not in err, err
    assert (mine / "mycode.py").read_text() == "x = 1\n" and sorted(p.name for p in mine.iterdir()) == ["mycode.py"]
    assert clip.read_bytes() == b"data" and not list(tmp_path.glob("*.export"))
    bundle = tmp_path / "bundle"
    for _ in range(2):  # new, then an earlier bundle replaced
        assert main(["export", str(run_dir), "--out", str(bundle)]) == 0
        assert (bundle / "bundle.yaml").is_file()


def test_play_renders_headless_without_mujoco_gl(trained, tmp_path):
    """No MUJOCO_GL, no display, and MuJoCo imported before the CLI runs: ``play`` still finds
    a headless GL (EGL here) and writes the video."""
    run_dir = trained("brax")
    env = {
        k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")
    }
    video = tmp_path / "headless.mp4"
    code = (
        "import sys, mujoco; from simreal.cli import main; "
        f"sys.exit(main(['play', {str(run_dir)!r}, '--steps', '3', '--width', '64', '--height', '48', "
        f"'--out', {str(video)!r}]))"
    )
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert video.stat().st_size > 0


def test_unknown_trainer_lists_the_valid_ones():
    from simreal.errors import UnknownNameError
    from simreal.policies.trainers import get_trainer

    with pytest.raises(UnknownNameError, match="valid trainers: bc, brax, residual, rsl_rl, sb3"):
        get_trainer("cleanrl")


def test_torch_trainer_without_torch_names_the_extra(monkeypatch, tmp_path, capsys):
    """trainer=sb3 with torch not importable: one line naming the [torch] extra, exit 2, no run directory."""
    from simreal.cli import main

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ModuleNotFoundError
    for mod in (
        "simreal.policies.trainers.sb3",
        "simreal.policies.trainers.torch_loop",
        "simreal.policies.torch_policy",
    ):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    rc = main(["train", "cartpole-balance", "trainer=sb3", f"runs_root={tmp_path}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "trainer=sb3" in err and "simreal[torch]" in err
    assert not any(tmp_path.iterdir())


def test_the_adaptive_learning_rate_follows_rsl_rls_schedule():
    """``train.desired_kl``: the rate is divided by 1.5 above twice the desired KL, multiplied by
    1.5 below half of it (not at a KL of zero: the first minibatch of a batch), kept in between,
    clipped to [1e-5, 1e-2]; it cannot be combined with a linear decay."""
    from simreal.errors import ConfigError
    from simreal.policies.rl.ppo import adapt_learning_rate, make_optimizer

    cfg = resolve(
        "quadrotor-hover", TINY + ["train.desired_kl=0.01", "train.learning_rate=0.001", "train.learning_rate_end=null"]
    ).train
    state = make_optimizer(cfg).init({"w": np.zeros(3, np.float32)})

    def lr_after(kl: float, lr: float = 1e-3) -> float:
        s = (state[0], state[1]._replace(hyperparams={"learning_rate": np.float32(lr)}))
        return float(adapt_learning_rate(s, np.float32(kl), 0.01)[1].hyperparams["learning_rate"])

    assert lr_after(0.05) == pytest.approx(1e-3 / 1.5)
    assert lr_after(0.001) == pytest.approx(1.5e-3)
    assert lr_after(0.01) == pytest.approx(1e-3) and lr_after(0.0) == pytest.approx(1e-3)
    assert lr_after(0.05, 1.2e-5) == pytest.approx(1e-5) and lr_after(0.001, 9e-3) == pytest.approx(1e-2)
    with pytest.raises(ConfigError, match="train.desired_kl"):
        resolve("quadrotor-hover", TINY + ["train.desired_kl=0.01", "train.learning_rate_end=0.0001"])


def test_ppo_with_a_desired_kl_trains_and_moves_its_rate():
    cfg = resolve(
        "quadrotor-hover",
        TINY + ["train.desired_kl=0.001", "train.learning_rate=0.003", "train.learning_rate_end=null"],
    )
    algo = PPO(make_env(cfg, backend="native"), cfg.train, cfg.seed)
    ts, metrics = algo.iterate(algo.init())
    ts, metrics = algo.iterate(ts)
    lr = float(ts.optimizer_state[1].hyperparams["learning_rate"])
    assert lr != pytest.approx(0.003) and 1e-5 <= lr <= 1e-2
    assert np.isfinite(float(metrics["learning_rate"])) and algo.iterate._cache_size() == 1
