"""Every registered task through every stage: train -> export -> rehearse -> ROS 2 package.

Each task trains on a tiny budget through the real CLI, is exported to a bundle, rehearsed
against its family's simulated robot through the deploy runner (observations from ROS 2
messages, ONNX Runtime, the safety layer, CDR both ways) and compared with the same policy
in the training simulator (the deploy-side sim-to-sim gate), and gets its ROS 2 package.
A task that cannot be exported or rehearsed fails here; the tasks that deploy cannot serve
yet must say so in one line naming the bundle field (``EXPECTED_REFUSALS``). A task whose policy
sees camera images (``IMAGE_TASKS``) trains with its YAML's trainer (sb3), and export and
trainer=brax refuse it in one line each: a bundle has no image inputs yet.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest

from fixtures.task_data import data_overrides
from simreal.cli import main
from simreal.sim.tasks import TASKS

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
]
#: Tasks whose deployment is refused, and the bundle field the one-line error names.
EXPECTED_REFUSALS = {
    "cartpole-balance": "ros2.command",  # a benchmark model with no robot behind it
}
#: Tasks with camera images in their observation: no bundle yet (export names this bundle field).
IMAGE_TASKS = {"arm-push-pixels": "observation"}
#: Tasks whose bundle carries a time-varying reference the robot side plays back.
WITH_REFERENCE = ("arm-demo-track", "g1-tracking", "g1-velocity", "quadrotor-track")  # g1-velocity: its gait clock


_EXPORTED: dict[str, Path] = {}


def _exported(task: str, tmp_path_factory) -> Path:
    """Train ``task`` on the tiny budget through the CLI and export it (once per module)."""
    if task not in _EXPORTED:
        tmp = tmp_path_factory.mktemp(task)
        extra = data_overrides(task, tmp)
        assert main(["train", task, f"runs_root={tmp / 'runs'}", *TINY, *extra]) == 0
        run_dir = next((tmp / "runs" / task).iterdir())
        assert main(["export", str(run_dir)]) == 0
        _EXPORTED[task] = run_dir / "bundle"
    return _EXPORTED[task]


@pytest.mark.parametrize("task", sorted(set(TASKS) - set(IMAGE_TASKS)))
def test_task_trains_exports_rehearses_and_packages(task, tmp_path, tmp_path_factory, capsys):
    from simreal.bundle import load_bundle
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    bundle_dir = _exported(task, tmp_path_factory)
    bundle = load_bundle(bundle_dir)
    layout = bundle.action
    assert np.all(layout.low <= layout.high) and layout.size == len(layout.names)

    capsys.readouterr()
    if task in EXPECTED_REFUSALS:
        assert main(["deploy", "ros2", str(bundle_dir), "--out", str(tmp_path / "ws")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and EXPECTED_REFUSALS[task] in err[0], err
        return

    # the ideal link: no noise, latency or drops, no start ramp; the deploy pipeline must
    # then reproduce the training simulator within the family's tolerance
    report = run_offline(
        bundle, SimLoopConfig(duration_s=1.0, noise_scale=0.0, settle_s=0.0), overrides={"start": {"ramp_s": 0.0}}
    )
    gate = report["gate"]
    assert gate["passed"], gate
    assert gate["value"] is not None and gate["value"] <= gate["tolerance"]
    assert report["runner"]["policy_runs"] >= 40
    if "hover" in report:  # a quadrotor's flight check: the task's own radius (0.15 m for a figure-8), settle as set
        assert (
            report["hover"]["radius_m"] == bundle.task_config["success_radius_m"] and report["hover"]["settle_s"] == 0
        )
        assert report["hover"]["tracks_reference"] == (task == "quadrotor-track")

    assert main(["deploy", "ros2", str(bundle_dir), "--out", str(tmp_path / "ws")]) == 0
    pkg = next((tmp_path / "ws").iterdir())
    assert (pkg / "bundle" / "policy.onnx").is_file() and (pkg / "package.xml").is_file()
    assert (bundle.reference is not None) == (task in WITH_REFERENCE)
    if bundle.reference is not None:
        assert load_bundle(pkg / "bundle").reference.num_rows == bundle.reference.num_rows
    # the package's bundle is the bundle, folders and all (a clip in inputs/), and colcon installs it so
    files = {f.relative_to(bundle_dir).as_posix() for f in bundle.files}
    assert {f.relative_to(pkg / "bundle").as_posix() for f in load_bundle(pkg / "bundle").files} == files
    with pytest.MonkeyPatch.context() as mp:
        assert {f"share/{pkg.name}/bundle/{f}" for f in files} <= _installed(pkg, mp)


def _installed(pkg: Path, mp: pytest.MonkeyPatch) -> set[str]:
    """The files the package's setup.py installs (colcon's ament_python build), as share/... paths."""
    import os
    import runpy

    import setuptools

    captured: dict = {}
    mp.setattr(setuptools, "setup", lambda **kw: captured.update(kw))
    mp.chdir(pkg)
    runpy.run_path("setup.py")
    return {f"{d}/{os.path.basename(f)}" for d, fs in captured["data_files"] for f in fs}


@pytest.mark.parametrize("task", sorted(IMAGE_TASKS))
def test_image_task_trains_and_export_and_brax_refuse_it(task, tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["train", task, f"runs_root={runs}", *TINY, "env.render_threads=1"]) == 0
    run_dir = next((runs / task).iterdir())
    assert list((run_dir / "checkpoints").glob("step_*.zip"))  # the task's YAML picks trainer sb3

    capsys.readouterr()
    assert main(["export", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"bundle field '{IMAGE_TASKS[task]}'" in err[0] and "pixels/" in err[0], err
    assert not (run_dir / "bundle").exists()

    for flat_only in ("brax", "rsl_rl"):
        assert main(["train", task, f"trainer={flat_only}", f"runs_root={tmp_path / flat_only}", *TINY]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "'trainer'" in err[0] and "use trainer=sb3" in err[0], err
        assert not any((tmp_path / flat_only).rglob("config.yaml"))  # refused: no run directory left


@pytest.mark.parametrize("task", ["arm-demo-track", "g1-tracking"])
def test_the_rehearsal_starts_where_the_reference_starts(task, tmp_path_factory):
    """The rehearsal's robot once started where a training episode starts, at a random clip frame
    (reference state init) or a random object pose, while the bundle's reference plays from the
    clip's first frame and the demonstration's own place: every real g1-tracking rehearsal failed
    its gate ("too little overlap"). The deployed start is the reference's, for every seed."""
    from simreal.bundle import load_bundle
    from simreal.deploy.config import spec_of_bundle
    from simreal.deploy.sim_gate import env_start, training_env

    bundle = load_bundle(_exported(task, tmp_path_factory))
    env = training_env(bundle, spec_of_bundle(bundle))
    for seed in range(3):
        qpos = env_start(env, env.deployment(), bundle, seed).qpos
        if task == "g1-tracking":
            np.testing.assert_allclose(qpos[0:3], env.ref["root_pos"][0], atol=1e-6)
            np.testing.assert_allclose(qpos[np.asarray(env.act_qadr)], env.ref["dof_pos"][0], atol=1e-6)
        else:
            np.testing.assert_allclose(qpos[env.obj_qpos][:3], bundle.task_params["demo_origin"], atol=1e-6)
    sampled = [np.asarray(env.sample_initial(jax.random.PRNGKey(s))[0]) for s in range(3)]
    assert np.ptp(np.stack(sampled), axis=0).max() > 1e-3  # training's episodes do start elsewhere


class _Recorder:
    """A policy that records every observation it is given and answers zero."""

    def __init__(self, size: int):
        self.obs: list[np.ndarray] = []
        self.size = size

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.obs.append(np.array(obs))
        return np.zeros(self.size)


@pytest.mark.parametrize("task", WITH_REFERENCE)
def test_the_robot_side_plays_the_reference_the_training_env_observed(task, tmp_path_factory):
    """The played-back input the policy sees at control step k (the ``command``; g1-velocity's
    ``gait_phase`` clock) is the same in the training env (the exported episode, replayed with
    ``reset_from``) and on the robot side (the runner playing the bundle's table back), and it
    changes over time."""
    import jax
    import jax.numpy as jnp

    from simreal.bundle import load_bundle
    from simreal.deploy.config import spec_of_bundle
    from simreal.deploy.ros_types import msg_class
    from simreal.deploy.runner import PolicyRunner
    from simreal.deploy.sim_gate import env_start, training_env
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    bundle = load_bundle(_exported(task, tmp_path_factory))
    names, sizes = bundle.obs_names, [t.size for t in bundle.obs_terms]
    played = next(k for k in ("command", "gait_phase") if k in bundle.reference.values and k in names)
    lo = sum(sizes[: names.index(played)])
    cmd = slice(lo, lo + sizes[names.index(played)])
    steps = 30

    env = training_env(bundle, spec_of_bundle(bundle))
    start = env_start(env, env.deployment(), bundle, seed=0)
    state = env.reset_from(jax.random.PRNGKey(0), start.qpos, start.qvel, start.act, start.task)
    step = jax.jit(env.step)
    sim_cmd = []
    for _ in range(steps):
        sim_cmd.append(np.asarray(state.obs)[cmd])
        state = step(state, jnp.zeros(env.action_size))

    rec = _Recorder(bundle.action.size)
    runner = PolicyRunner(bundle, overrides={"start": {"ramp_s": 0.0}}, msg_class=msg_class, policy=rec)
    run_offline(bundle, SimLoopConfig(duration_s=steps / bundle.control_rate_hz, noise_scale=0.0), runner=runner)
    robot_cmd = [o[cmd] for o in rec.obs[:steps]]

    assert len(robot_cmd) == steps
    np.testing.assert_allclose(robot_cmd, sim_cmd, atol=1e-5)
    assert np.ptp(np.array(sim_cmd), axis=0).max() > 1e-3  # a reference that moves


def test_gate_fails_when_the_deploy_side_changes_what_the_policy_does(tmp_path_factory):
    """The arm starts 0.3 rad from home; the policy pulls it back. A deploy config whose slew
    limit (0.01 rad/s) freezes the arm must fail the gate; the same start without it passes."""
    from simreal.bundle import load_bundle
    from simreal.deploy.config import spec_of_bundle
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    bundle = load_bundle(_exported("arm-reach", tmp_path_factory))
    spec = spec_of_bundle(bundle)
    start = tuple(float(np.clip(a.default + 0.3, a.range[0] + 0.01, a.range[1] - 0.01)) for a in spec.actuators)
    cfg = SimLoopConfig(duration_s=1.0, noise_scale=0.0, start_joint_pos=start)
    good = run_offline(bundle, cfg, overrides={"start": {"ramp_s": 0.0}})
    frozen = run_offline(bundle, cfg, overrides={"start": {"ramp_s": 0.0}, "limits": {"max_rate": [0.01] * 8}})
    assert good["gate"]["passed"], good["gate"]
    assert not frozen["gate"]["passed"] and frozen["gate"]["value"] > frozen["gate"]["tolerance"], frozen["gate"]


@pytest.mark.parametrize("task, key", [("arm-demo-track", "demo_file"), ("g1-tracking", "motion_file")])
def test_the_run_and_its_bundle_carry_the_file_their_env_reads(task, key, tmp_path, tmp_path_factory):
    """Both kept only the clip's path: the clip moved, eval, export and the rehearsal failed (the
    last with a traceback from the robot process); another clip in its place, export shipped a
    reference the policy never trained on. Each now reads its own copy in inputs/."""
    import shutil

    from simreal.bundle import load_bundle
    from simreal.deploy.config import spec_of_bundle
    from simreal.deploy.sim_gate import training_env
    from simreal.policies.run_config import make_env
    from simreal.policies.run_dir import load_config
    from simreal.yaml_io import load_yaml

    bundle_dir = _exported(task, tmp_path_factory)
    run_dir = bundle_dir.parent
    original = Path(data_overrides(task, run_dir.parents[2])[0].split("=", 1)[1])
    assert load_yaml(run_dir / "config.yaml")["env"][key] == f"inputs/{key}.npz"
    assert load_bundle(bundle_dir).task_config[key] == f"inputs/{key}.npz"
    moved = Path(shutil.copytree(bundle_dir, tmp_path / "on_another_machine"))
    original.rename(tmp_path / "gone.npz")
    try:
        assert make_env(load_config(run_dir)).cfg.__getattribute__(key) == str(run_dir / "inputs" / f"{key}.npz")
        bundle = load_bundle(moved)
        assert training_env(bundle, spec_of_bundle(bundle)) is not None
        assert moved / "inputs" / f"{key}.npz" in bundle.files  # a ROS 2 package's copy carries it too
    finally:
        (tmp_path / "gone.npz").rename(original)


def test_videos_show_the_goal_where_the_episode_puts_it(tmp_path, tmp_path_factory, monkeypatch):
    """`simreal play` and a filmed benchmark trial draw arm-reach's goal sphere on the episode's
    goal, not where the model file leaves it."""
    import mujoco

    from simreal.bundle import load_bundle
    from simreal.deploy.config import spec_of_bundle
    from simreal.hardware.benchmark.harness import BenchmarkConfig, TwinBench, run_benchmark
    from simreal.hardware.benchmark.suites import suite_for
    from simreal.sim.render import mocap_home

    bundle_dir = _exported("arm-reach", tmp_path_factory)
    seen: list[np.ndarray] = []
    real = mujoco.Renderer.update_scene
    monkeypatch.setattr(
        mujoco.Renderer,
        "update_scene",
        lambda self, d, *a, **k: (seen.append(d.mocap_pos.copy()), real(self, d, *a, **k))[1],
    )
    assert (
        main(
            [
                "play",
                str(bundle_dir.parent),
                "--episodes",
                "2",
                "--steps",
                "2",
                "--width",
                "64",
                "--height",
                "48",
                "--out",
                str(tmp_path / "play.mp4"),
            ]
        )
        == 0
    )
    assert len(seen) == 4
    assert not np.allclose(seen[0], seen[2])  # each episode its own goal
    np.testing.assert_allclose(seen[0], seen[1])

    bundle = load_bundle(bundle_dir)
    spec = spec_of_bundle(bundle)
    bench = TwinBench(bundle)
    default = mocap_home(bench.robot.sim.m)
    goal = (default[0] + [0.05, -0.04, 0.03]).tolist()
    seen.clear()
    run_benchmark(
        suite_for("arm-reach", bundle, spec),
        bundle,
        spec,
        bench,
        BenchmarkConfig(trials=1, duration_s=0.3, videos=1, task={"target_pos_w": goal}),
        video_dir=tmp_path / "bench",
    )
    assert seen, "no frame was filmed"
    np.testing.assert_allclose(seen[-1][0], goal, atol=1e-6)


def test_a_rehearsal_takes_the_walking_command_it_is_given(tmp_path_factory):
    """``deploy sim --task-param command=[0.5,0,0]``: the policy observes that command from the
    hand-over (the bundle says stand still), the gate's reference episode too; a key the task
    does not take is refused naming it."""
    from simreal.bundle import load_bundle
    from simreal.deploy.ros_types import msg_class
    from simreal.deploy.runner import PolicyRunner
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline
    from simreal.errors import BundleError

    bundle = load_bundle(_exported("g1-velocity", tmp_path_factory))
    assert bundle.task_params["command"] == [0.0, 0.0, 0.0]
    cfg = SimLoopConfig(duration_s=0.2, noise_scale=0.0, task_params={"command": [0.5, 0.0, 0.1]})
    rec = _Recorder(bundle.action.size)
    runner = PolicyRunner(cfg.rehearsed(bundle), overrides={"start": {"ramp_s": 0.0}}, msg_class=msg_class, policy=rec)
    report = run_offline(bundle, cfg, runner=runner)
    names, sizes = bundle.obs_names, [t.size for t in bundle.obs_terms]
    lo = sum(sizes[: names.index("command")])
    np.testing.assert_allclose(rec.obs[0][lo : lo + 3], [0.5, 0.0, 0.1])
    assert report["gate"]["value"] is not None
    with pytest.raises(BundleError, match="task_params.target_pos_w"):
        SimLoopConfig(task_params={"target_pos_w": [0.0, 0.0, 1.0]}).rehearsed(bundle)
