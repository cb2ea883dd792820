"""``simreal demos`` and ``simreal train-bc``: the scripted teachers, the IK under them, the
dataset a recording writes (read back with the dataset reader), and a BC run that ``simreal
eval`` and ``simreal export`` take like any other, its ONNX equal to the torch actor on raw
observations. Tiny: 1 s arm-reach episodes, a few epochs."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from simreal.cli import main  # noqa: E402
from simreal.policies.run_config import make_env, resolve  # noqa: E402

SHORT = "env.episode_length_s=1.0"  # 50 control steps: the scripted reach settles in ~0.5 s


def test_ik_reaches_points_in_the_action_box_and_stays_in_it():
    from simreal.policies.demos.arm_ik import ArmIK

    env = make_env(resolve("arm-reach", ["backend=native"]))
    ik = ArmIK(env)
    home = np.asarray(env.home_qpos, np.float64)
    rng = np.random.default_rng(0)
    for _ in range(5):
        # a point some joint targets inside the box reach: solvable by construction
        u_true = rng.uniform(ik.lo, ik.hi)
        q = home.copy()
        q[ik.qpos_adr] = u_true
        p_goal, _ = ik.site_pose(q)
        u = ik.solve(home, p_goal)
        q[ik.qpos_adr] = u
        assert np.all(u >= ik.lo - 1e-12) and np.all(u <= ik.hi + 1e-12)
        assert np.linalg.norm(ik.site_pose(q)[0] - p_goal) < 0.01
        a = ik.action(u)
        assert np.all(np.abs(a) <= 1.0) and a[-1] == 0.0  # the gripper (a tendon) is not an IK variable
        np.testing.assert_allclose(np.asarray(env.targets(a))[ik.joints], u, atol=1e-5)


def test_scripted_reach_teacher_succeeds_on_most_episodes():
    from simreal.policies.demos.record import Tally, record
    from simreal.policies.demos.teachers import load_teacher

    cfg, env, teacher = load_teacher("scripted", "arm-reach", ["backend=native", SHORT])
    tally = Tally()
    episodes = list(record(env, teacher, cfg.task, episodes=4, num_envs=4, tally=tally))
    assert len(episodes) == 4 and tally.ran == 4
    assert tally.succeeded >= 3, [e.frames["next.success"][-1] for e in episodes]
    for ep in episodes:
        assert ep.length == env.episode_steps
        assert np.all(np.abs(ep.frames["action"]) <= 1.0)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("demos") / "reach"
    assert (
        main(
            [
                "demos",
                "arm-reach",
                "backend=native",
                SHORT,
                "--teacher",
                "scripted",
                "--episodes",
                "3",
                "--num-envs",
                "3",
                "--seed",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    return out


def test_demos_dataset_reads_back_with_the_tasks_sizes_and_one_instruction_per_episode(dataset):
    from simreal.dataset.reader import Dataset

    env = make_env(resolve("arm-reach", ["backend=native", SHORT]))
    ds = Dataset(dataset)
    assert ds.num_episodes == 3 and ds.num_frames == 3 * env.episode_steps
    assert ds.fps == round(env.robot.control_rate_hz) and ds.robot_type == "franka"
    assert tuple(ds.features["observation.state"]["shape"]) == (env.observation_size,)
    assert tuple(ds.features["action"]["shape"]) == (env.action_size,)
    assert list(ds.features["action"]["names"]) == list(env.robot.actuator_names)
    goal = slice(16, 19)  # target_pos_w in arm-reach's observation (joint_pos_rel 8, joint_vel 8, goal 3)
    assert [t["name"] for t in env.obs_layout][2] == "target_pos_w"
    instructions = set()
    for i in range(3):
        ep = ds.episode(i)
        assert len(ds.episode_tasks(i)) == 1
        text = ds.episode_task(i)
        instructions.add(text)
        # the sentence names this episode's own goal, the one in its observations (noise-free term)
        xyz = [float(v) for v in re.findall(r"[xyz]=(-?\d+\.\d+)", text)]
        np.testing.assert_allclose(xyz, ep["observation.state"][0, goal], atol=6e-4)
        assert np.all(ep["observation.state"][:, goal] == ep["observation.state"][0, goal])
        done = ep["next.done"].reshape(-1)
        assert done[-1] and not done[:-1].any()
        assert np.all(np.abs(ep["action"]) <= 1.0)
    assert len(instructions) == 3  # three goals, three sentences
    mean = np.concatenate([ds.episode(i)["observation.state"] for i in range(3)]).mean(axis=0)
    np.testing.assert_allclose(ds.stats["observation.state"]["mean"], mean, rtol=1e-4, atol=1e-5)


def test_train_bc_with_iql_weights_frames_by_a_learned_reward(dataset, tmp_path, capsys):
    """Offline RL end to end: the dataset's scene states scored by a learned reward model, IQL's
    critics, the weighted fit, a run that evaluates; a model of the wrong width is one line."""
    from simreal.rewards.reward_model import BTEnsemble, RewardModelConfig, save_reward_model

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = tmp_path / "reward.safetensors"
    save_reward_model(model, BTEnsemble(RewardModelConfig(input_shape=(9,), members=2, hidden=8)))
    run_dir = tmp_path / "iql"
    assert (
        main(
            [
                "train-bc",
                str(dataset),
                "train.num_eval_envs=2",
                "train.policy_hidden=[16]",
                "train.iql.critic_steps=30",
                "train.iql.critic_hidden=[16]",
                "--epochs",
                "2",
                "--iql",
                str(model),
                "--out",
                str(run_dir),
            ]
        )
        == 0
    )
    cap = capsys.readouterr()
    assert "eval (2 episodes) success" in cap.out
    assert "stage critics 1/2" in cap.err and "stage actor 2/2" in cap.err  # each line's ETA is its stage's
    report = json.loads((run_dir / "iql.json").read_text())
    assert (
        len(report["episode_mean_weights"]) == 3
        and 0.0 <= report["weights"]["min"] <= report["weights"]["max"] <= 100.0
    )
    assert np.isfinite(report["critic_losses"]["q"])
    wrong = tmp_path / "wrong.safetensors"
    save_reward_model(wrong, BTEnsemble(RewardModelConfig(input_shape=(4,), members=1, hidden=4)))
    assert main(["train-bc", str(dataset), "--iql", str(wrong), "--epochs", "1", "--out", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert re.search(
        r"error: \S+wrong.safetensors: reward model reads \(4,\); the dataset's "
        r"observation.environment_state has \(9,\)\n$",
        err,
    ), err
    assert not (tmp_path / "no").exists()  # nothing trained: no run left behind
    # a model of the right width for another task's scene state (arm-push's: hand, object, goal)
    # once trained on meaningless rewards without a word
    other = tmp_path / "push.safetensors"
    save_reward_model(
        other,
        BTEnsemble(
            RewardModelConfig(
                input_shape=(9,), members=1, hidden=4, obs_terms=("ee_pos_w", "object_pos_w", "target_pos_w")
            )
        ),
    )
    assert main(["train-bc", str(dataset), "--iql", str(other), "--epochs", "1", "--out", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert (
        "reward model reads the terms ee_pos_w, object_pos_w, target_pos_w; the dataset's "
        "observation.environment_state holds ee_pos_w, target_pos_w, ee_to_target_w" in err
    ), err
    assert not (tmp_path / "no").exists()


def test_train_bc_run_evaluates_and_exports_like_any_run(dataset, tmp_path, capsys, monkeypatch):
    import torch

    from simreal.bundle import OnnxPolicy, load_bundle
    from simreal.dataset.reader import Dataset
    from simreal.policies.bc.actor import CHECKPOINT, STD_FLOOR, load_actor
    from simreal.policies.run_dir import load_config
    from simreal.sim.env import MjEnv

    built = []  # train-bc builds the task's env once: the dataset's check, the fit and its evaluation
    init = MjEnv.__init__
    monkeypatch.setattr(MjEnv, "__init__", lambda self, *a, **k: (built.append(1), init(self, *a, **k))[1])
    run_dir = tmp_path / "bc"
    assert (
        main(
            [
                "train-bc",
                str(dataset),
                "train.num_eval_envs=2",
                "train.policy_hidden=[32,32]",
                "--epochs",
                "3",
                "--out",
                str(run_dir),
            ]
        )
        == 0
    )
    assert "eval (2 episodes) success" in capsys.readouterr().out
    assert len(built) == 1
    monkeypatch.setattr(MjEnv, "__init__", init)
    cfg = load_config(run_dir)
    assert (cfg.trainer, cfg.algorithm, cfg.task, cfg.env.episode_length_s) == ("bc", "bc", "arm-reach", 1.0)
    assert (run_dir / CHECKPOINT).is_file() and (run_dir / "metrics.csv").read_text().count("\n") == 4

    assert main(["eval", str(run_dir), "--episodes", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result[result["trained_on"]]["episodes"] == 2 and "success" in result[result["trained_on"]]
    assert main(["export", str(run_dir)]) == 0
    assert "max abs diff" in capsys.readouterr().out

    # one source of truth: the dataset's statistics are the actor's and the bundle's normalisation
    ds = Dataset(dataset)
    _, actor = load_actor(run_dir, cfg)
    bundle = load_bundle(run_dir / "bundle")
    np.testing.assert_allclose(bundle.obs_mean, ds.stats["observation.state"]["mean"], rtol=1e-6)
    np.testing.assert_allclose(bundle.obs_std, np.maximum(ds.stats["observation.state"]["std"], STD_FLOOR), rtol=1e-6)
    np.testing.assert_allclose(actor.body[1].shift.numpy(), ds.stats["action"]["mean"], rtol=1e-6)
    # the ONNX graph takes raw observations (normalisation inside) and gives the torch actor's action
    obs = np.concatenate([ds.episode(i)["observation.state"] for i in range(ds.num_episodes)])
    with torch.no_grad():
        expected = actor(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(OnnxPolicy(bundle)(obs), expected, atol=1e-5)
    assert np.abs(expected).max() <= 1.0

    # the run is a teacher too: its recorded actions are its own on the recorded observations
    relay = tmp_path / "relay"
    assert (
        main(
            ["demos", "arm-reach", "--teacher", str(run_dir), "--episodes", "2", "--num-envs", "2", "--out", str(relay)]
        )
        == 0
    )
    capsys.readouterr()
    ep = Dataset(relay).episode(1)
    np.testing.assert_allclose(ep["action"], actor.act(ep["observation.state"]), atol=1e-6)

    (run_dir / CHECKPOINT).write_bytes(b"not a checkpoint")
    assert main(["eval", str(run_dir), "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "policy.safetensors: not a safetensors file" in err


@pytest.mark.parametrize(
    "change, says",
    [
        ("fps", "meta/info.json: field 'fps' is 30; the task's env acts at 50 Hz"),
        ("action_scale", "config key 'env.action_scale': "),
        ("truncated", "file-000.parquet: not a readable parquet file"),
    ],
)
def test_train_bc_refuses_demonstrations_of_another_rate_or_action_scale(dataset, tmp_path, capsys, change, says):
    """A dataset recorded at another frame rate than the task's control rate, trained at another
    action scale than it was recorded with, or with a data file cut short: one line before any run
    directory, nothing trained."""
    import json
    import shutil

    data, extra = dataset, []
    if change == "action_scale":
        extra = ["env.action_scale=0.6"]
    else:
        data = tmp_path / "changed"
        shutil.copytree(dataset, data)
        if change == "fps":
            info = json.loads((data / "meta" / "info.json").read_text())
            (data / "meta" / "info.json").write_text(json.dumps({**info, "fps": 30}))
        else:
            part = data / "data" / "chunk-000" / "file-000.parquet"
            part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    capsys.readouterr()
    assert main(["train-bc", str(data), *extra, "--epochs", "1", "--out", str(tmp_path / "run")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and says in out.err, out
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["cartpole-balance", "--teacher", "scripted"],
            "no scripted teacher for task cartpole-balance; tasks with one: arm-reach, arm-reach-choice, arm-push",
        ),
        (
            ["arm-reach", "--teacher", "scriptd"],
            "expected 'scripted', 'random' or a run directory; 'scriptd' is none of these",
        ),
        (
            ["arm-reech", "--teacher", "scripted"],
            "unknown task 'arm-reech'; valid tasks: ",
        ),  # not "no scripted teacher"
        (
            ["arm-reach", "backend=native", "--teacher", "scripted", "--camera", "wrist"],
            "arm-reach's model has no camera 'wrist'; its cameras: front",
        ),
        # an action box of home +- 0.3 rad keeps the Franka's fingers 0.26 m above the table
        (
            ["arm-push", "backend=native", "env.action_scale=0.3", "--teacher", "scripted"],
            "config key 'env.action_scale': the scripted push needs the fingers on the table",
        ),
        # once a 24 GB process killed by the kernel with no word
        (
            [
                "arm-reach",
                "backend=native",
                "--teacher",
                "scripted",
                "--camera",
                "front",
                "--image-size",
                "20000x20000",
            ],
            "config key '--image-size': a batch of 200 frames per camera at 20000x20000 takes",
        ),
    ],
)
def test_demos_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    assert main(["demos", *args, "--episodes", "1", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "d").exists()


def test_demos_record_camera_videos(tmp_path):
    from simreal.dataset.reader import Dataset
    from simreal.errors import SimrealError
    from simreal.sim.headless_gl import use_headless_gl

    try:
        use_headless_gl()
    except SimrealError as e:
        pytest.skip(f"no headless OpenGL here: {e}")
    out = tmp_path / "px"
    assert (
        main(
            [
                "demos",
                "arm-push-pixels",
                "backend=native",
                "env.action_scale=1.5",
                "env.episode_length_s=0.1",
                "env.render_threads=1",
                "--teacher",
                "scripted",
                "--episodes",
                "2",
                "--num-envs",
                "2",
                "--camera",
                "front",
                "--image-size",
                "32x48",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    ds = Dataset(out)
    assert tuple(ds.features["observation.images.front"]["shape"]) == (32, 48, 3)
    assert tuple(ds.features["observation.state"]["shape"]) == (27,)  # the pixel policy's state, without the cube
    frames = [ds.episode(i)["observation.images.front"] for i in range(2)]
    assert frames[0].shape == (5, 32, 48, 3) and frames[0].std() > 5
    assert np.abs(frames[0][0].astype(int) - frames[1][0]).mean() > 1  # two episodes, two cube positions


def test_scripted_push_teacher_succeeds_where_the_arm_reaches_the_table():
    from simreal.policies.demos.record import Tally, record
    from simreal.policies.demos.teachers import load_teacher

    cfg, env, teacher = load_teacher("scripted", "arm-push", ["backend=native", "env.action_scale=1.5"])
    tally = Tally()
    for _ in record(env, teacher, cfg.task, episodes=8, num_envs=8, tally=tally):
        pass
    assert tally.ran == 8 and tally.succeeded >= 6


def test_scripted_pick_teacher_lifts_the_cube_to_the_goal():
    from simreal.policies.demos.record import Tally, record
    from simreal.policies.demos.teachers import load_teacher

    cfg, env, teacher = load_teacher("scripted", "arm-pick", ["backend=native"])
    tally = Tally()
    for _ in record(env, teacher, cfg.task, episodes=8, num_envs=8, tally=tally):
        pass
    assert tally.ran == 8 and tally.succeeded >= 6


def test_scripted_pick_needs_a_parallel_gripper():
    from simreal.errors import ConfigError
    from simreal.policies.demos.teachers import load_teacher

    with pytest.raises(ConfigError, match="robot.*two finger slide joints; the so100 has 0"):
        load_teacher("scripted", "arm-pick", ["backend=native", "robot=so100"])


def test_a_driver_acts_while_the_teacher_labels():
    """DAgger's recording: with a driver that commands the home pose (action 0), the arm stays
    where it starts, and the recorded actions are the teacher's, which reach for the goal."""
    from types import SimpleNamespace

    from simreal.policies.demos.record import record
    from simreal.policies.demos.teachers import load_teacher

    cfg, env, teacher = load_teacher("scripted", "arm-reach", ["backend=native", SHORT])
    still = SimpleNamespace(act=lambda s: np.zeros((np.asarray(s.done).shape[0], env.action_size)), reset=lambda: None)
    alone = next(record(env, teacher, cfg.task, episodes=1, num_envs=1, seed=3))
    driven = next(record(env, teacher, cfg.task, episodes=1, num_envs=1, seed=3, driver=still))
    np.testing.assert_allclose(driven.frames["action"][0], alone.frames["action"][0], atol=1e-6)  # same first state
    joints = slice(0, 7)  # the observation starts with the arm's joint positions (relative to home)
    moved = np.abs(alone.frames["observation.state"][-1, joints] - alone.frames["observation.state"][0, joints]).max()
    stayed = np.abs(driven.frames["observation.state"][:, joints]).max()
    assert moved > 0.2 and stayed < 0.1 and np.abs(driven.frames["action"]).mean() > 0.1


def test_dagger_appends_the_drivers_episodes_labelled_by_the_teacher(dataset, tmp_path, capsys):
    import shutil

    from simreal.dataset.reader import Dataset

    data = tmp_path / "reach"
    shutil.copytree(dataset, data)
    run_dir = tmp_path / "bc"
    assert (
        main(
            [
                "train-bc",
                str(data),
                "train.num_eval_envs=1",
                "train.policy_hidden=[16]",
                "--epochs",
                "1",
                "--out",
                str(run_dir),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(
            [
                "demos",
                "arm-reach",
                "backend=native",
                SHORT,
                "--teacher",
                "scripted",
                "--drive",
                str(run_dir),
                "--episodes",
                "2",
                "--num-envs",
                "2",
                "--seed",
                "5",
                "--append",
                "--out",
                str(data),
            ]
        )
        == 0
    )
    assert "driver success: " in capsys.readouterr().out
    ds = Dataset(data)
    assert ds.num_episodes == 5 and ds.episode(4)["action"].shape == (50, 8)
    assert main(["demos", "arm-push", "--teacher", "scripted", "--episodes", "1", "--append", "--out", str(data)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "was recorded in arm-reach, not arm-push" in err, err


def test_append_takes_a_fresh_seed_and_refuses_a_dataset_with_a_file_missing(dataset, tmp_path, capsys):
    import shutil

    from simreal.dataset.reader import Dataset
    from simreal.policies.demos.record import read_source

    data = tmp_path / "reach"
    shutil.copytree(dataset, data)
    assert (
        main(
            [
                "demos",
                "arm-reach",
                "backend=native",
                SHORT,
                "--teacher",
                "scripted",
                "--episodes",
                "1",
                "--num-envs",
                "1",
                "--append",
                "--out",
                str(data),
            ]
        )
        == 0
    )
    assert read_source(data)["appended"] == [{"teacher": "scripted", "drive": None, "seed": 2, "episodes": 1}]
    ds = Dataset(data)
    new = ds.episode(3)["observation.state"][0]
    assert all(not np.allclose(new, ds.episode(i)["observation.state"][0]) for i in range(3))  # not seed 1's again
    capsys.readouterr()

    (data / "data" / "chunk-000" / "file-000.parquet").unlink()
    assert (
        main(
            [
                "demos",
                "arm-reach",
                "backend=native",
                SHORT,
                "--teacher",
                "scripted",
                "--episodes",
                "1",
                "--append",
                "--out",
                str(data),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "file-000.parquet" in err and "not found" in err, err
    assert Dataset(data).num_episodes == 4  # untouched


@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_train_bc_stopped_keeps_its_best_epoch_and_metrics(dataset, tmp_path, monkeypatch, capsys, sig, code):
    import os
    import signal

    import simreal.policies.bc.cloning as bc
    from simreal.rundir import MetricsCsv

    saved = bc.save_actor

    def save_then_stop(*a, **k):  # Ctrl-C (or a scheduler's SIGTERM) just after the first kept epoch
        saved(*a, **k)
        os.kill(os.getpid(), getattr(signal, sig))

    monkeypatch.setattr(bc, "save_actor", save_then_stop)
    # Ctrl-C as in a terminal: a run started in the background (CI) inherits SIGINT ignored
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    before = signal.getsignal(signal.SIGTERM)
    run_dir = tmp_path / "bc"
    try:
        rc = main(["train-bc", str(dataset), "train.policy_hidden=[16]", "--epochs", "50", "--out", str(run_dir)])
    finally:
        signal.signal(signal.SIGINT, previous_int)
    err = capsys.readouterr().err
    assert rc == code and f"stopped by {sig}: {run_dir} keeps the checkpoint of its best epoch so far" in err, err
    assert (run_dir / "checkpoints" / "policy.safetensors").is_file()
    assert [r["epoch"] for r in MetricsCsv(run_dir / "metrics.csv").rows] == [1]
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_bad_drive_run_is_blamed_on_drive_not_teacher(tmp_path, capsys):
    assert (
        main(
            [
                "demos",
                "arm-reach",
                "backend=native",
                SHORT,
                "--teacher",
                "scripted",
                "--drive",
                str(tmp_path / "nonexistent"),
                "--episodes",
                "1",
                "--out",
                str(tmp_path / "d"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "config key '--drive'" in err and "is none of these" in err, err


def test_demos_stopped_before_its_first_episode_leaves_no_folder_behind(tmp_path, monkeypatch, capfd):
    """It left --out holding metadata only, which refused the same command again without --append."""
    import os
    import signal

    import simreal.policies.demos.record as demos

    def record(*a, stop, **k):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during the first batch
        assert stop()
        return iter(())

    monkeypatch.setattr(demos, "record", record)
    out = tmp_path / "reach"
    assert (
        main(
            [
                "demos",
                "arm-reach",
                "backend=native",
                SHORT,
                "--teacher",
                "scripted",
                "--episodes",
                "2",
                "--out",
                str(out),
            ]
        )
        == 130
    )
    assert not out.exists() and f"before the first episode finished; {out} removed" in capfd.readouterr().err


def test_a_full_disk_leaves_no_folder_that_blocks_a_rerun(tmp_path):
    """A file-size limit (a full disk says ENOSPC the same way) during the first episode's write:
    one line, and no folder holding metadata only, which a rerun and --append both refused."""
    import resource
    import subprocess
    import sys

    out = tmp_path / "d"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000))  # the metadata fits, the first data file not

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "simreal.cli",
            "demos",
            "arm-reach",
            "backend=native",
            SHORT,
            "--teacher",
            "scripted",
            "--episodes",
            "2",
            "--num-envs",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=limit,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .endswith("saving an episode failed: [Errno 27] Error writing bytes to file. Detail: [errno 27] File too large")
    ), r.stderr
    assert not out.exists()
