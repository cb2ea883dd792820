"""Hardware benchmarks (``simreal benchmark``): the simulated twin behind the robot interface, every
family's suites on it, the harness's statistics, the real-robot path on a fake driver, the
report and the command line's one-line errors."""

from __future__ import annotations

import json
import math
import types

import numpy as np
import pytest

from fixtures import bundles
from fixtures.fake_robot import FakeJointRobot
from simreal.bundle import load_bundle, write_bundle_yaml
from simreal.cli import main
from simreal.deploy.config import spec_of_bundle
from simreal.deploy.runner import PolicyRunner
from simreal.deploy.sim_robot import SimRobot
from simreal.errors import BundleError
from simreal.hardware.benchmark.harness import (
    BenchmarkConfig,
    RealBench,
    TwinBench,
    mean_interval,
    run_benchmark,
    wilson_interval,
)
from simreal.hardware.benchmark.suites import suite_for
from simreal.hardware.drive import drive
from simreal.hardware.robot import RobotConfig
from simreal.hardware.sim_twin import SimTwin, TwinConfig, end_effector_w
from simreal.reference import Reference, write_reference
from simreal.robot_spec import load_robot_spec
from simreal.stop_signal import interrupt_signal
from simreal.yaml_io import load_yaml


def _bench(bundle_dir, suite: str, trials: int, duration_s: float, twin: TwinConfig = TwinConfig(), **cfg):
    bundle = load_bundle(bundle_dir)
    spec = spec_of_bundle(bundle)
    return run_benchmark(
        suite_for(suite, bundle, spec),
        bundle,
        spec,
        TwinBench(bundle, twin),
        BenchmarkConfig(trials=trials, duration_s=duration_s, **cfg),
    )


def _with_reference(bundle_dir, values: dict[str, np.ndarray], rate_hz: float, loop: bool):
    """Add a reference table (simreal.reference) to a hand-made bundle."""
    write_reference(bundle_dir / "reference.npz", Reference(rate_hz, values, loop))
    raw = load_yaml(bundle_dir / "bundle.yaml")
    raw["reference"] = {"file": "reference.npz", "rate_hz": rate_hz, "loop": loop}
    write_bundle_yaml(bundle_dir, raw)
    return bundle_dir


def _hold_bundle(out_dir, robot: str):
    """A joint-position bundle whose action is always 0: every joint to the spec's default pose."""
    from onnx import TensorProto, helper, numpy_helper

    spec = load_robot_spec(robot)
    n = len(spec.actuators)
    terms = (("joint_pos_rel", n), ("joint_vel", n), ("last_action", n))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "zero"], ["action"])],
        "hold",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 3 * n])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", n])],
        [numpy_helper.from_array(np.zeros((3 * n, n), np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", bundles.OPSET)])
    model.ir_version = 8
    return bundles.write_bundle(
        out_dir,
        spec=spec,
        model=model,
        task="hold",
        obs_terms=terms,
        mode="joint_position",
        names=spec.actuator_names,
        units=["rad"] * n,
        scale=[0.5] * n,
        offset=[a.default for a in spec.actuators],
        low=[a.range[0] for a in spec.actuators],
        high=[a.range[1] for a in spec.actuators],
        control_rate_hz=spec.control_rate_hz,
    )


# -- statistics ---------------------------------------------------------------------------------
def test_wilson_and_t_intervals_match_known_values():
    # Wilson 95 %: 8/10 -> (0.4902, 0.9433) (Newcombe 1998, table I); 0/10 -> upper z^2/(n + z^2)
    np.testing.assert_allclose(wilson_interval(8, 10), (0.4902, 0.9433), atol=1e-4)
    z2 = 1.959964**2
    np.testing.assert_allclose(wilson_interval(0, 10), (0.0, z2 / (10 + z2)), atol=1e-6)
    np.testing.assert_allclose(wilson_interval(10, 10), (10 / (10 + z2), 1.0), atol=1e-6)
    lo, hi = wilson_interval(75, 75)
    assert 0.95 < lo < 0.96 and hi == pytest.approx(1.0)  # 75 of 75: the rate is above 0.95
    # t 95 %: mean 2.5, s = 1.29099, t_{0.975, 3} = 3.18245 -> 2.5 -+ 2.05426
    np.testing.assert_allclose(mean_interval([1.0, 2.0, 3.0, 4.0]), (0.44574, 4.55426), atol=1e-5)
    assert mean_interval([0.3]) is None and mean_interval([0.2, 0.2, 0.2]) == (0.2, 0.2)


# -- the twin -----------------------------------------------------------------------------------
def test_twin_clock_hand_over_latency_and_determinism(tmp_path):
    bundle = load_bundle(bundles.make_pd_hover_bundle(tmp_path / "pd"))
    twin = SimTwin(bundle, TwinConfig(latency_ms=10.0, noise_scale=0.0, start_jitter_m=0.0))
    start = twin.true_state()["pos_w"]
    with twin:
        twin.sleep(0.0101)  # whole physics steps that fit: 5 of 2 ms
        assert twin.clock() == pytest.approx(0.010)
        np.testing.assert_allclose(twin.true_state()["pos_w"], start)  # held until the first command
        twin.observation()
        twin.send_action(np.zeros(4))  # cut thrust, applied 10 ms (5 steps) later
        twin.sleep(0.010)
        np.testing.assert_allclose(twin.true_state()["pos_w"], start)
        twin.sleep(0.1)
        assert twin.true_state()["pos_w"][2] < start[2] - 0.02  # falling since the command took effect

    def final(seed: int) -> np.ndarray:
        twin = SimTwin(bundle, TwinConfig())
        twin.reset(seed)
        with twin:
            drive(twin, PolicyRunner(bundle), duration_s=1.0, clock=twin.clock, sleep=twin.sleep)
        return twin.true_state()["pos_w"]

    np.testing.assert_array_equal(final(3), final(3))
    assert np.abs(final(3) - final(4)).max() > 1e-6  # another seed: another start jitter and noise


def test_a_twin_whose_simulation_diverged_stops_reporting_and_its_clock_goes_on(tmp_path, monkeypatch):
    """MuJoCo resets a diverged state to the model's start and time to 0. The twin's clock once
    went back with it (a driving loop pacing on it stalls) and its robot reappeared at the start.
    Now the clock goes on, reads fail as a dead state stream does, and the runner's watchdog
    takes over: a report, not a teleport."""
    bundle = load_bundle(bundles.make_pd_hover_bundle(tmp_path / "pd"))
    twin = SimTwin(bundle, TwinConfig(noise_scale=0.0, start_jitter_m=0.0))
    monkeypatch.chdir(tmp_path)  # MuJoCo's warning writes MUJOCO_LOG.TXT where it runs
    runner = PolicyRunner(bundle)
    times: list[float] = []

    def on_tick(result, sent):
        times.append(twin.clock())
        if len(times) == 50:
            twin.sim.d.qvel[:] = np.nan

    with twin:
        report = drive(twin, runner, duration_s=1.5, clock=twin.clock, sleep=twin.sleep, on_tick=on_tick)
    assert twin.sim.diverged_s == pytest.approx(times[49], abs=0.011)
    assert np.all(np.diff(times) > 0) and times[-1] > 1.4  # the clock never went back
    assert report.read_errors > 0 and "the simulation diverged at" in report.last_error, report.last_error
    assert runner.safety.stats.took_over

    # a benchmark trial on it fails for that, not for where MuJoCo's reset left the vehicle
    step = SimRobot.step

    def blow_up_at_one_second(robot):
        if 1.0 <= robot.d.time < 1.0 + robot.m.opt.timestep:
            robot.d.qvel[:] = np.nan
        step(robot)

    monkeypatch.setattr(SimRobot, "step", blow_up_at_one_second)
    (c,) = _bench(tmp_path / "pd", "quadrotor-hover", trials=1, duration_s=3.0)["conditions"]
    assert [(t["success"], t["reason"]) for t in c["trials"]] == [
        (False, "the simulation diverged at 1.000 s (MuJoCo reset it)")
    ]


def test_end_effector_kinematics_match_the_twin(tmp_path):
    """The real-robot path measures the end effector by forward kinematics of the joints."""
    bundle = load_bundle(bundles.make_joint_mlp_bundle(tmp_path / "so100", "so100"))
    twin = SimTwin(bundle, TwinConfig(start_jitter_rad=0.3))
    s = twin.true_state()
    np.testing.assert_allclose(end_effector_w(twin.spec, s["joint_pos"][None])[0], s["ee_pos_w"], atol=1e-9)


# -- every family's suites on the twin ----------------------------------------------------------
def test_quadrotor_hover_pd_passes_and_random_mlp_fails(tmp_path):
    pd = _bench(bundles.make_pd_hover_bundle(tmp_path / "pd"), "quadrotor-hover", trials=8, duration_s=4.0)
    (c,) = pd["conditions"]
    assert c["success"]["k"] >= 7 and c["success"]["ci"][0] > 0.45, c["success"]
    assert c["metrics"]["rmse_m"]["n"] >= 7 and c["metrics"]["rmse_m"]["mean"] < 0.05
    assert c["metrics"]["rmse_m"]["ci"][1] - c["metrics"]["rmse_m"]["ci"][0] < 0.02  # a tight interval
    assert all(t["overruns"] == 0 and t["read_errors"] == 0 and t["ticks"] >= 399 for t in c["trials"])

    mlp = _bench(
        bundles.make_mlp_bundle(tmp_path / "mlp", hidden=(32, 32), control_rate_hz=100.0),
        "quadrotor-hover",
        trials=4,
        duration_s=3.0,
    )
    (c,) = mlp["conditions"]
    assert c["success"]["k"] == 0 and c["success"]["ci"][1] < 0.5
    assert all(not t["success"] and t["reason"] for t in c["trials"])


def test_quadrotor_figure8_tracks_the_bundles_reference(tmp_path):
    t = np.arange(2000) / 100.0  # one 20 s period at 100 Hz
    w = 2 * math.pi / 20.0
    fig8 = np.stack([0.3 * np.sin(w * t), 0.15 * np.sin(2 * w * t), np.ones_like(t)], axis=1)
    b = _with_reference(bundles.make_pd_hover_bundle(tmp_path / "pd"), {"target_pos_w": fig8}, 100.0, loop=True)
    # the hover suite would judge the figure-8 against a fixed point: refused, as the reverse is
    with pytest.raises(BundleError, match="quadrotor-hover judges a fixed target.*use the quadrotor-figure8 suite"):
        _bench(b, "quadrotor-hover", trials=1, duration_s=5.0)
    (c,) = _bench(b, "quadrotor-figure8", trials=2, duration_s=5.0)["conditions"]
    for trial in c["trials"]:
        rmse = trial["metrics"]["rmse_m"]
        assert rmse is not None and 0.0 < rmse <= trial["metrics"]["max_error_m"]
        assert trial["success"] == (rmse < 0.15)


def test_humanoid_walk_and_track_detect_falls(tmp_path):
    b = bundles.make_joint_mlp_bundle(tmp_path / "g1", "g1")
    walk = _bench(b, "humanoid-walk", trials=1, duration_s=2.0, values=(0.0, 1.0))
    assert [c["name"] for c in walk["conditions"]] == ["vx=0 m/s", "vx=1 m/s"]
    assert [c["task"]["command"] for c in walk["conditions"]] == [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    for c in walk["conditions"]:
        (trial,) = c["trials"]
        assert trial["success"] == (trial["metrics"]["fall_s"] is None)
        assert trial["metrics"]["vel_rmse_m_s"] >= 0.0
    # a random policy does not stand for two seconds
    assert not any(c["trials"][0]["success"] for c in walk["conditions"])

    n = len(load_robot_spec("g1").actuators)
    motion = np.zeros((50, 2 * n + 3))
    motion[:, -1] = -1.0  # the default pose, upright
    track = _bench(
        _with_reference(b, {"command": motion}, 50.0, loop=False), "humanoid-track", trials=1, duration_s=0.5
    )
    (trial,) = track["conditions"][0]["trials"]
    assert trial["success"] == (trial["metrics"]["fall_s"] is None and trial["metrics"]["joint_rmse_rad"] < 0.3)
    assert trial["metrics"]["root_tilt_rmse_rad"] < 0.5 and trial["metrics"]["joint_rmse_rad"] > 0.0


def test_arm_reach_reports_distance_and_cycle_time(tmp_path):
    hold = load_bundle(_hold_bundle(tmp_path / "hold", "so100"))
    spec = spec_of_bundle(hold)
    home_ee = end_effector_w(spec, np.array([[a.default for a in spec.actuators]]))[0]
    twin = TwinConfig(start_jitter_rad=0.3)  # starts about 10 cm away, then holds the default pose
    (c,) = _bench(hold.path, "arm-reach", trials=2, duration_s=2.0, twin=twin, task={"target_pos_w": home_ee.tolist()})[
        "conditions"
    ]
    assert c["success"]["k"] == 2, c["trials"]
    for trial in c["trials"]:
        m = trial["metrics"]
        assert m["final_distance_m"] < 0.01 and 0.0 < m["cycle_time_s"] < 2.0

    far = (home_ee + [0.0, 0.3, 0.0]).tolist()
    (c,) = _bench(
        bundles.make_joint_mlp_bundle(tmp_path / "mlp", "so100"),
        "arm-reach",
        trials=2,
        duration_s=1.0,
        task={"target_pos_w": far},
    )["conditions"]
    assert c["success"]["k"] == 0
    assert all(t["metrics"]["final_distance_m"] > 0.05 and t["metrics"]["cycle_time_s"] is None for t in c["trials"])


@pytest.mark.parametrize("task", ["arm-push", "arm-pick"])
def test_arm_object_suites_judge_the_cube_of_the_tasks_scene(task, tmp_path):
    """A bundle that records its task: the twin is the task's scene with its cube, and the goal
    is the task's first episode's (on the table for a push, in the air for a pick)."""
    spec = load_robot_spec("so100")
    n = len(spec.actuators)
    terms = [("joint_pos_rel", n), ("joint_vel", n), ("object_pos_w", 3), ("target_pos_w", 3), ("last_action", n)]
    d = bundles.write_bundle(
        tmp_path / "push",
        spec=spec,
        model=bundles.mlp_onnx(sum(k for _, k in terms), n, (16,)),
        task=task,
        obs_terms=terms,
        mode="joint_position",
        names=spec.actuator_names,
        units=["rad"] * n,
        scale=[0.25] * n,
        offset=[0.0] * n,
        low=[a.range[0] for a in spec.actuators],
        high=[a.range[1] for a in spec.actuators],
        control_rate_hz=spec.control_rate_hz,
    )
    raw = load_yaml(d / "bundle.yaml")
    raw["task_config"] = {"episode_length_s": 6.0}
    raw["task_topics"] = {
        r: {
            "topic": f"/simreal/{r}_pose",
            "type": "geometry_msgs/msg/PoseStamped",
            "role": "target" if r == "goal" else r,
        }
        for r in ("goal", "object")
    }
    write_bundle_yaml(d, raw)
    (c,) = _bench(d, task, trials=1, duration_s=1.0)["conditions"]
    (trial,) = c["trials"]
    goal_z = c["task"]["target_pos_w"][2]
    assert goal_z == pytest.approx(0.025) if task == "arm-push" else goal_z > 0.1  # the cube's half size: on the table
    assert trial["metrics"]["final_distance_m"] > 0.05 and not trial["success"]  # a random policy: the cube stays


# -- the real-robot path --------------------------------------------------------------------------
class FakeSo100(FakeJointRobot):
    """A driver as the drivers table holds them: built from its config alone."""

    families = ("arm",)

    def __init__(self, config: RobotConfig):
        super().__init__(load_robot_spec(config.robot))


def test_real_robot_path_asks_the_operator_and_measures_by_kinematics(tmp_path):
    bundle = load_bundle(_hold_bundle(tmp_path / "hold", "so100"))
    spec = spec_of_bundle(bundle)
    robot = FakeSo100(RobotConfig("so100"))
    robot.q[:] = 0.2  # put down away from home; the policy brings it back
    answers = iter(["", "", "q"])
    asked = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return next(answers)

    home, away = end_effector_w(spec, np.array([[a.default for a in spec.actuators], robot.q]))
    assert np.linalg.norm(away - home) > 0.05
    res = run_benchmark(
        suite_for("arm-reach", bundle, spec),
        bundle,
        spec,
        RealBench(robot, "fake", ask),
        BenchmarkConfig(trials=5, duration_s=0.4, task={"target_pos_w": home.tolist()}),
        overrides={"start": {"ramp_s": 0.0}},
    )
    assert len(asked) == 3 and "trial 3/5" in asked[-1] and not res["complete"]
    (c,) = res["conditions"]
    assert c["success"]["n"] == 2 and res["robot"] == "real" and res["driver"] == "fake"
    first = c["trials"][0]
    # the end effector, from the measured joints by forward kinematics, came within the radius;
    # its cycle time is 0 where the fake arm (it moves at once) was there by the first sample
    assert first["success"] and first["metrics"]["final_distance_m"] < 0.01 and first["metrics"]["cycle_time_s"] >= 0
    assert robot.closed == 1  # disconnected after the run


def test_cli_real_robot_from_the_drivers_table(tmp_path, monkeypatch, capsys):
    from simreal.hardware import drivers

    b = _hold_bundle(tmp_path / "hold", "so100")
    monkeypatch.setitem(
        drivers.DRIVERS, "fake", types.SimpleNamespace(robot_class=lambda: FakeSo100, robots=("so100",))
    )
    code = main(
        [
            "benchmark",
            "arm-reach",
            "--policy",
            str(b),
            "--robot",
            "real",
            "--driver",
            "fake",
            "--yes",
            "--trials",
            "1",
            "--duration",
            "0.3",
            "--task-param",
            "target_pos_w=[0.3,0.0,0.2]",
            "--json",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    res = json.loads(out.out)
    assert res["robot"] == "real" and res["conditions"][0]["success"]["n"] == 1
    assert "trial 1/1: " in out.err and "trials/s" in out.err  # the progress line


# -- report and command line ----------------------------------------------------------------------
def test_cli_runs_the_twin_and_reports_twin_against_twin(tmp_path, capsys):
    pd, mlp = (
        bundles.make_pd_hover_bundle(tmp_path / "pd"),
        bundles.make_mlp_bundle(tmp_path / "mlp", hidden=(16,), control_rate_hz=100.0),
    )
    for name, b in (("pd", pd), ("mlp", mlp)):
        assert (
            main(
                [
                    "benchmark",
                    "quadrotor-hover",
                    "--policy",
                    str(b),
                    "--robot",
                    "twin",
                    "--trials",
                    "2",
                    "--duration",
                    "3",
                    "--out",
                    str(tmp_path / name),
                ]
            )
            == 0
        )
        out = capsys.readouterr()
        assert "default: " in out.out and "trial 2/2" in out.err and "ETA" in out.err
        assert (tmp_path / name / "report.md").is_file()
    a, b = tmp_path / "pd" / "quadrotor-hover_twin.json", tmp_path / "mlp" / "quadrotor-hover_twin.json"
    assert json.loads(a.read_text())["conditions"][0]["success"]["k"] == 2
    assert main(["benchmark", "report", str(a), str(b), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| default | twin 1 | 2/2 |" in text and "| default | twin 2 | 0/2 |" in text and f"(`{b}`)" in text
    assert "success rate = -1.000" in text
    for png in ("success.png", "metric_rmse_m.png"):
        assert (tmp_path / "report" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in text
    # --out films the first trial of each condition; the side-by-side report links both films
    import imageio.v2 as imageio

    for name, outcome in (("pd", "pass"), ("mlp", "FAIL")):
        video = json.loads((tmp_path / name / "quadrotor-hover_twin.json").read_text())["conditions"][0]["trials"][0][
            "video"
        ]
        mp4 = tmp_path / name / "videos" / video["video"]
        with imageio.get_reader(mp4) as r:
            frames = [f for f in r]
        assert len(frames) == video["frames"] and frames[0].shape == (240, 320, 3)
        assert (tmp_path / name / "videos" / video["sheet"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"default, trial 1: {outcome}" in text and f"(../{name}/videos/{video['video']})" in text
    pd_frames = json.loads(a.read_text())["conditions"][0]["trials"][0]["video"]["frames"]
    assert abs(pd_frames - 90) <= 1  # 3 s of trial time at 30 frames/s (the twin runs faster than real time)


@pytest.fixture(scope="module")
def hover_dir(tmp_path_factory):
    return str(bundles.make_pd_hover_bundle(tmp_path_factory.mktemp("b") / "pd"))


@pytest.mark.parametrize(
    "args, says",
    [
        (["no-such-suite"], "unknown suite 'no-such-suite'; valid suites: arm-pick, arm-push"),
        (["arm-reach"], "suite arm-reach serves arm robots; the bundle's robot 'crazyflie2' is a quadrotor"),
        (["quadrotor-figure8"], "bundle field 'reference': quadrotor-figure8 needs"),
        (["quadrotor-hover", "--trials", "0"], "--trials: must be >= 1, got 0"),
        (["quadrotor-hover", "--conditions", "0,1"], "--conditions: suite quadrotor-hover has one condition"),
        (["quadrotor-hover", "--task-param", "target_pos_w=up"], "--task-param target_pos_w: expected a number"),
        (["quadrotor-hover", "--task-param", "speed=1"], "'--task-param speed': not a task input"),
        (["quadrotor-hover", "--noise", "-1"], "--noise: must be >= 0.0"),
        (["quadrotor-hover", "--robot", "real"], "--robot real needs --driver NAME"),
        (["quadrotor-hover", "--robot", "real", "--driver", "nope"], "unknown driver 'nope'; valid drivers:"),
        (
            ["quadrotor-hover", "--robot", "real", "--driver", "so100", "--noise", "0"],
            "--noise and --latency-ms are for",
        ),
        (["quadrotor-hover", "--driver", "so100"], "--driver, --driver-set, --camera and --locate-object are for"),
        (["quadrotor-hover", "--videos", "2"], "--videos: needs --out DIR"),
        (["quadrotor-hover", "--duration", "2"], "--duration: suite quadrotor-hover judges from 2 s on"),
        (["quadrotor-hover", "--set", "watchdog.timeout_s=-1"], "watchdog.timeout_s"),
    ],
)
def test_cli_bad_input_is_one_line(args, says, hover_dir, capsys):
    guard = [] if "--trials" in args else ["--trials", "1"]  # should it not fail: a short run
    assert main(["benchmark", *args, "--policy", hover_dir, *guard]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


@pytest.mark.parametrize(
    "args, says",
    [
        (["quadrotor-hover"], "--policy BUNDLE is required"),
        (["quadrotor-hover", "--policy", "/nonexistent"], "/nonexistent does not exist (a bundle is a folder"),
        (["report", "x.json"], "give the result JSON files and --out DIR"),
        (["report", "{bad}", "--out", "{tmp}/r"], "not JSON"),
    ],
)
def test_cli_bad_files_are_one_line(args, says, tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{")
    args = [a.format(bad=tmp_path / "bad.json", tmp=tmp_path) for a in args]
    assert main(["benchmark", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_a_filmed_humanoid_trial_keeps_the_robot_in_view(tmp_path):
    """The twin's camera follows a free base: a G1 moved 5 m away still covers a good part of
    the image (MuJoCo's segmentation rendering: pixels showing the robot's own geoms), and a
    filmed trial has a frame per 1/30 s of trial time."""
    import imageio.v2 as imageio
    import mujoco

    b = bundles.make_joint_mlp_bundle(tmp_path / "g1", "g1")
    bundle = load_bundle(b)
    spec = spec_of_bundle(bundle)
    bench = TwinBench(bundle)
    res = run_benchmark(
        suite_for("humanoid-walk", bundle, spec),
        bundle,
        spec,
        bench,
        BenchmarkConfig(trials=1, duration_s=1.5, videos=1),
        video_dir=tmp_path / "out",
    )
    video = res["conditions"][0]["trials"][0]["video"]
    with imageio.get_reader(tmp_path / "out" / "videos" / video["video"]) as r:
        assert abs(sum(1 for _ in r) - 45) <= 1
    camera, sim = bench.frames(), bench.robot.sim
    camera.renderer.enable_segmentation_rendering()
    for shift in (0.0, 5.0):
        sim.d.qpos[0] += shift
        mujoco.mj_kinematics(sim.m, sim.d)
        ids, kinds = camera()[..., 0], camera()[..., 1]
        geoms = ids[kinds == mujoco.mjtObj.mjOBJ_GEOM]
        robot = np.isin(geoms, np.flatnonzero(sim.m.geom_bodyid > 0)).sum() / ids.size
        assert robot > 0.03, (shift, robot)


@pytest.mark.parametrize(
    "stop, code, where",
    [
        (KeyboardInterrupt(), 130, "run_trial"),
        (KeyboardInterrupt("SIGTERM"), 143, "run_trial"),
        (KeyboardInterrupt(), 130, "begin"),
    ],
)
def test_ctrl_c_keeps_the_finished_trials_and_writes_them(tmp_path, monkeypatch, capsys, stop, code, where):
    """Ctrl-C (SIGTERM, as the CLI raises it) during trial 3, or while its reset runs: trials 1-2
    are kept in the results file and report, exit 128 + the signal. (A Ctrl-C during a reset once
    lost every trial: only the trial itself was guarded.)"""
    import simreal.hardware.benchmark.harness as B

    owner = B if where == "run_trial" else B.TwinBench
    real, calls = getattr(owner, where), [0]

    def interrupted_third(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:
            raise stop
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, where, interrupted_third)
    b = bundles.make_pd_hover_bundle(tmp_path / "pd")
    out = tmp_path / "out"
    assert (
        main(
            [
                "benchmark",
                "quadrotor-hover",
                "--policy",
                str(b),
                "--trials",
                "5",
                "--duration",
                "3",
                "--videos",
                "0",
                "--out",
                str(out),
            ]
        )
        == code
    )
    assert "interrupted; kept the 2 finished trials" in capsys.readouterr().err
    res = json.loads((out / "quadrotor-hover_twin.json").read_text())
    assert res["interrupted"] and not res["complete"] and res["stopped_by"] == interrupt_signal(stop)
    (c,) = res["conditions"]
    assert [t["trial"] for t in c["trials"]] == [0, 1] and c["success"]["n"] == 2
    assert "stopped by the operator" in (out / "report.md").read_text()
