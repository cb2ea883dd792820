"""``simreal import`` (simreal/policies/foreign.py): small TorchScript and ONNX policies built here
with legged_gym's, Isaac Lab's and mjlab's observation conventions, imported, and run by the deploy
runner: its actions are the original network's on the observation built the framework's way, to
1e-5, over a rollout with the last action fed back and the gait clock running."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from simreal.bundle import load_bundle  # noqa: E402
from simreal.cli import main  # noqa: E402
from simreal.deploy.runner import PolicyRunner  # noqa: E402
from simreal.robot_spec import load_robot_spec  # noqa: E402
from simreal.rotations import quat_to_rotmat  # noqa: E402
from simreal.yaml_io import dump_yaml  # noqa: E402

G1_12 = load_robot_spec("g1_12dof")
LEGS = list(G1_12.actuator_names)
#: unitree_rl_gym's G1 (deploy/deploy_mujoco/configs/g1.yaml of its 12-DoF policy): other defaults
#: and gains than simreal's spec, so a bundle that ignored them would differ
LG_DEFAULT = [-0.1, 0.0, 0.0, 0.3, -0.2, 0.0] * 2
LG_KP = {"hip_yaw": 100, "hip_roll": 100, "hip_pitch": 100, "knee": 150, "ankle": 40}
LG_KD = {"hip_yaw": 2, "hip_roll": 2, "hip_pitch": 2, "knee": 4, "ankle": 2}
LG_SPEC = {
    "framework": "legged_gym",
    "control_rate_hz": 50,
    "physics_rate_hz": 200,
    "joints": LEGS,
    "observation": [
        {"term": "ang_vel", "scale": 0.25},
        {"term": "projected_gravity", "scale": 1.0},
        {"term": "commands", "scale": [2.0, 2.0, 0.25]},
        {"term": "dof_pos", "scale": 1.0},
        {"term": "dof_vel", "scale": 0.05},
        {"term": "actions", "scale": 1.0},
        {"term": "phase", "period_s": 0.8},
    ],
    "action_scale": 0.25,
    "clip_actions": 100.0,
    "default_angles": LG_DEFAULT,
    "kp": LG_KP,
    "kd": LG_KD,
}


def _mlp(n_in: int, n_out: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(n_in, 32), torch.nn.ELU(), torch.nn.Linear(32, n_out))
    with torch.no_grad():
        net[2].weight.mul_(8.0)  # actions of a few units: the clip and the scale matter
    return net.eval()


def _onnx(net: torch.nn.Module, n_in: int, path: Path, metadata: dict[str, str] | None = None) -> Path:
    import onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net,
            (torch.zeros(1, n_in),),
            str(path),
            dynamo=False,
            input_names=["obs"],
            output_names=["actions"],
            opset_version=17,
            dynamic_axes={"obs": {0: "N"}},
        )
    if metadata:
        model = onnx.load(str(path))
        for k, v in metadata.items():
            model.metadata_props.add(key=k, value=v)
        onnx.save(model, str(path))
    return path


def _gravity(q: np.ndarray) -> np.ndarray:
    """legged_gym's projected gravity, its own formula (deploy_mujoco.get_gravity_orientation)."""
    w, x, y, z = q
    return np.array([2 * (-z * x + w * y), -2 * (z * y + w * x), 1 - 2 * (w * w + z * z)])


def _states(robot, steps: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Robot states the envelope accepts (joints inside their ranges, the base tilted a little),
    varied enough that every term of the observation moves."""
    rng = np.random.default_rng(seed)
    lo = np.array([a.range[0] for a in robot.actuators])
    hi = np.array([a.range[1] for a in robot.actuators])
    mid = np.clip([a.default for a in robot.actuators], lo + 0.05, hi - 0.05)
    out = []
    for _ in range(steps):
        q = np.array([1.0, *rng.normal(0.0, 0.05, 2), rng.normal(0.0, 0.3)])
        out.append(
            {
                "joint_pos": np.clip(mid + rng.normal(0.0, 0.05, mid.size), lo, hi),
                "joint_vel": rng.normal(0.0, 1.0, mid.size),
                "quat_wxyz": q / np.linalg.norm(q),
                "ang_vel_b": rng.normal(0.0, 0.5, 3),
            }
        )
    return out


def _run(bundle_dir: Path, states, command) -> list[np.ndarray]:
    """The runner's normalised actions, one tick per state at the bundle's rate."""
    runner = PolicyRunner(load_bundle(bundle_dir))
    dt, out = 1.0 / runner.bundle.control_rate_hz, []
    for k, s in enumerate(states):
        runner.on_robot_state(s, k * dt)
        runner.on_task_input({"command": np.asarray(command, float)}, k * dt)
        r = runner.tick(k * dt)
        assert r.action is not None, (runner.stats.envelope_trip, runner.safety.snapshot())
        out.append(np.asarray(r.action))
    return out


@pytest.fixture(scope="module")
def legged_gym(tmp_path_factory):
    d = tmp_path_factory.mktemp("lg")
    net = _mlp(47, 12, 0)
    torch.jit.script(net).save(str(d / "policy.pt"))
    dump_yaml(d / "spec.yaml", LG_SPEC)
    assert (
        main(
            [
                "import",
                str(d / "policy.pt"),
                "--spec",
                str(d / "spec.yaml"),
                "--robot",
                "g1_12dof",
                "--out",
                str(d / "bundle"),
            ]
        )
        == 0
    )
    return d, net


def test_a_legged_gym_torchscript_runs_as_legged_gym_runs_it(legged_gym):
    """unitree_rl_gym's G1 observation (its deploy script's formulas), the last raw action fed back,
    the 0.8 s gait clock from the hand-over: the runner's actions are the network's / clip_actions."""
    d, net = legged_gym
    states, cmd = _states(G1_12, 45), np.array([0.4, -0.1, 0.3])
    got = _run(d / "bundle", states, cmd)
    default = np.array(LG_DEFAULT)
    last = (states[0]["joint_pos"] - default) / 0.25  # the runner's first "last action": the start pose held
    for k, s in enumerate(states):
        phase = (k * 0.02) % 0.8 / 0.8
        obs = np.concatenate(
            [
                s["ang_vel_b"] * 0.25,
                _gravity(s["quat_wxyz"]),
                cmd * [2.0, 2.0, 0.25],
                s["joint_pos"] - default,
                s["joint_vel"] * 0.05,
                last,
                [np.sin(2 * np.pi * phase), np.cos(2 * np.pi * phase)],
            ]
        )
        raw = np.clip(net(torch.as_tensor(obs, dtype=torch.float32)[None]).detach().numpy()[0], -100, 100)
        np.testing.assert_allclose(got[k] * 100.0, raw, atol=1e-4, rtol=1e-5)  # actions ~10: 1e-5 relative
        last = raw
    assert max(np.abs(a).max() for a in got) * 100 > 2.0  # actions big enough that a wrong clip shows


def test_the_bundle_carries_the_policys_defaults_gains_and_rates(legged_gym):
    d, _ = legged_gym
    b = load_bundle(d / "bundle")
    acts = {a["name"]: a for a in b.robot_spec["actuators"]}
    assert [acts[j]["default"] for j in LEGS] == LG_DEFAULT
    assert acts["left_knee_joint"]["kp"] == 150 and acts["left_ankle_roll_joint"]["kd"] == 2
    assert b.robot_spec["physical"]["physics_dt_s"] == pytest.approx(0.005) and b.control_rate_hz == 50
    np.testing.assert_allclose(b.action.offset, LG_DEFAULT)
    np.testing.assert_allclose(
        b.action.to_physical(np.full(12, 0.01)), np.array(LG_DEFAULT) + 0.25
    )  # 0.25 x 100 x 0.01
    assert b.reference is not None and b.reference.duration_s == pytest.approx(0.8)


def test_an_isaac_lab_onnx_in_its_own_joint_order_with_term_history_is_mapped_by_name(tmp_path):
    """Isaac Lab orders the G1's 29 joints breadth-first (left and right interleaved, waist among
    the hips) and stacks each term's history oldest first: the bundle maps both, so the runner
    (driver order, frames newest first) gives the network what Isaac Lab gave it."""
    g1 = load_robot_spec("g1")
    driver = list(g1.actuator_names)
    rng = np.random.default_rng(1)
    order = [driver[i] for i in rng.permutation(len(driver))]  # another order than the driver's
    n, k = len(order), 2
    frame_terms = [
        ("base_ang_vel", 3),
        ("projected_gravity", 3),
        ("velocity_command", 3),
        ("joint_pos", n),
        ("joint_vel", n),
        ("actions", n),
    ]
    n_in = k * sum(s for _, s in frame_terms)
    net = _mlp(n_in, n, 2)
    _onnx(net, n_in, tmp_path / "policy.onnx")
    default = {j: float(v) for j, v in zip(order, rng.uniform(-0.3, 0.3, n))}
    spec = {
        "framework": "isaaclab",
        "control_rate_hz": 50,
        "physics_rate_hz": 200,
        "joints": order,
        "observation": [{"term": t, "scale": 1.0} for t, _ in frame_terms[:4]]
        + [{"term": "joint_vel", "scale": 0.1}, {"term": "actions", "scale": 1.0}],
        "history": {"length": k, "order": "oldest_first", "layout": "terms"},
        "action_scale": 0.5,
        "clip_actions": 10.0,
        "default_angles": default,
        "kp": 50.0,
        "kd": 1.0,
    }
    dump_yaml(tmp_path / "spec.yaml", spec)
    assert (
        main(
            [
                "import",
                str(tmp_path / "policy.onnx"),
                "--spec",
                str(tmp_path / "spec.yaml"),
                "--robot",
                "g1",
                "--out",
                str(tmp_path / "bundle"),
            ]
        )
        == 0
    )
    states, cmd = _states(g1, 12, seed=3), np.array([0.5, 0.2, -0.4])
    got = _run(tmp_path / "bundle", states, cmd)
    perm = [driver.index(j) for j in order]  # policy joint i is driver slot perm[i]
    d = np.array([default[j] for j in order])
    last = (states[0]["joint_pos"][perm] - d) / 0.5  # raw: the start pose over action_scale
    frames: list[dict[str, np.ndarray]] = []
    for t, s in enumerate(states):
        g = quat_to_rotmat(s["quat_wxyz"], np).T @ np.array([0.0, 0.0, -1.0])
        f = {
            "base_ang_vel": s["ang_vel_b"],
            "projected_gravity": g,
            "velocity_command": cmd,
            "joint_pos": s["joint_pos"][perm] - d,
            "joint_vel": 0.1 * s["joint_vel"][perm],
            "actions": last,
        }
        frames = (frames or [f] * k)[1:] + [f]  # oldest first; the first frame fills the history
        obs = np.concatenate([np.concatenate([fr[name] for fr in frames]) for name, _ in frame_terms])
        raw = np.clip(net(torch.as_tensor(obs, dtype=torch.float32)[None]).detach().numpy()[0], -10, 10)
        np.testing.assert_allclose(got[t][perm] * 10.0, raw, atol=1e-4, rtol=1e-5, err_msg=f"tick {t}")
        last = raw
    b = load_bundle(tmp_path / "bundle")
    assert b.obs_history == k and b.action.names == tuple(driver)


#: mjlab's defaults in its joint order (the right leg's first), within each joint's range
DEFAULTS = np.array([-0.2, 0.05, 0.1, 0.35, -0.25, 0.02] * 2)


def test_an_mjlab_onnx_gives_its_joints_gains_and_terms_from_its_metadata(tmp_path):
    """mjlab writes joint names, defaults, gains, action scale and observation names into the ONNX
    (CSV, 3 decimals): the spec needs only the rates. Its joint order is not the driver's."""
    names = LEGS[6:] + LEGS[:6]  # right leg first
    metadata = {
        "joint_names": ",".join(names),
        "default_joint_pos": ",".join(f"{v:.3f}" for v in DEFAULTS),
        "joint_stiffness": ",".join(["80.000"] * 12),
        "joint_damping": ",".join(["2.500"] * 12),
        "action_scale": "0.300",
        "observation_names": "base_ang_vel,projected_gravity,joint_pos,joint_vel,actions,command",
    }
    net = _mlp(3 + 3 + 36 + 3, 12, 4)
    _onnx(net, 45, tmp_path / "policy.onnx", metadata)
    dump_yaml(tmp_path / "spec.yaml", {"control_rate_hz": 50, "physics_rate_hz": 200})
    assert (
        main(
            [
                "import",
                str(tmp_path / "policy.onnx"),
                "--spec",
                str(tmp_path / "spec.yaml"),
                "--robot",
                "g1_12dof",
                "--out",
                str(tmp_path / "bundle"),
            ]
        )
        == 0
    )
    b = load_bundle(tmp_path / "bundle")
    acts = {a["name"]: a for a in b.robot_spec["actuators"]}
    assert acts["right_knee_joint"]["default"] == pytest.approx(0.35) and acts["left_knee_joint"]["kp"] == 80
    states, cmd = _states(G1_12, 5, seed=5), np.array([0.3, 0.0, 0.1])
    got = _run(tmp_path / "bundle", states, cmd)
    perm = [LEGS.index(j) for j in names]
    d = DEFAULTS
    last = (states[0]["joint_pos"][perm] - d) / 0.3  # raw: the start pose over action_scale
    for t, s in enumerate(states):
        g = quat_to_rotmat(s["quat_wxyz"], np).T @ np.array([0.0, 0.0, -1.0])
        obs = np.concatenate([s["ang_vel_b"], g, s["joint_pos"][perm] - d, s["joint_vel"][perm], last, cmd])
        raw = net(torch.as_tensor(obs, dtype=torch.float32)[None]).detach().numpy()[0]
        np.testing.assert_allclose(got[t][perm] * 100.0, raw, atol=1e-4, rtol=1e-5)
        last = raw


def _import(tmp_path: Path, policy: Path, spec: dict, robot: str = "g1_12dof") -> int:
    dump_yaml(tmp_path / "spec.yaml", spec)
    return main(
        ["import", str(policy), "--spec", str(tmp_path / "spec.yaml"), "--robot", robot, "--out", str(tmp_path / "out")]
    )


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s.update(joints=[*LEGS[:11], "left_wrist_yaw_joint"]), "joints[11]: 'left_wrist_yaw_joint' is held"),
        (lambda s: s.update(joints=[*LEGS[:11], "tail_joint"]), "joints[11]: 'tail_joint' is no actuator"),
        (lambda s: s.update(joints=[*LEGS[:11], LEGS[0]]), "joints: a joint is listed twice"),
        (lambda s: s.update(gains=1), "gains: no such key"),
        (lambda s: s["observation"][4].pop("scale"), "observation[4].scale: missing"),
        (lambda s: s["observation"].append({"term": "height_scan", "scale": 1}), "no height map"),
        (lambda s: s["observation"].pop(5), "observation: the terms and history give 35 inputs, the policy takes 47"),
        (lambda s: s.update(control_rate_hz=2000, physics_rate_hz=4000), "control_rate_hz: 2000 Hz"),
        (lambda s: s.update(physics_rate_hz=175), "physics_rate_hz: 175 Hz is no whole multiple"),
        (lambda s: s.update(kp={"hip": 100, "knee": 150}), "kp: joint 'left_ankle_pitch_joint' has no entry"),
        (
            lambda s: s.update(kp={"hip": 100, "hip_pitch": 90, "knee": 150, "ankle": 40}),
            "kp: joint 'left_hip_pitch_joint' has 2",
        ),
        (
            lambda s: s.update(default_angles=[0.5] * 12),
            "default_angles: left_ankle_roll_joint: 0.5 is outside its range [-0.2618, 0.2618]",
        ),
        (lambda s: s.update(history={"length": 0}), "history.length: expected an integer >= 1"),
    ],
)
def test_what_cannot_match_is_one_line_exit_2_and_nothing_written(legged_gym, tmp_path, capsys, edit, message):
    import copy
    import re

    d, _ = legged_gym
    spec = copy.deepcopy(LG_SPEC)
    edit(spec)
    assert _import(tmp_path, d / "policy.pt", spec) == 2
    err = capsys.readouterr().err.strip()
    said = re.sub(r"config key '([^']*)': ", r"\1: ", err)  # the key as the spec writes it
    assert message in said and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.tmp").exists()


def test_a_file_that_is_no_policy_is_refused_without_loading(tmp_path, capsys):
    (tmp_path / "junk.pt").write_bytes(b"\x00not a policy" * 10)
    assert _import(tmp_path, tmp_path / "junk.pt", LG_SPEC) == 2
    assert "neither TorchScript nor ONNX" in capsys.readouterr().err
    torch.save(_mlp(47, 12, 0).state_dict(), tmp_path / "ckpt.pt")  # a pickle: never unpickled
    assert _import(tmp_path, tmp_path / "ckpt.pt", LG_SPEC) == 2
    assert "is a torch.save checkpoint (a pickle), not TorchScript" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_imported_bundle_drives_the_unitree_twin_and_becomes_a_ros2_package(legged_gym, tmp_path, capsys):
    """The verbs a trained bundle goes through, on an imported one: Unitree's twin over its DDS
    wire (LowCmd with the policy's gains) and the generated ROS 2 package."""
    pytest.importorskip("cyclonedds")
    from fixtures.bundles import random_domain_id

    d, _ = legged_gym
    bundle = str(d / "bundle")
    import json

    rc = main(
        ["drive", bundle, "--driver", "unitree", "--twin", "--duration", "1.0", "--json"]
        + ["--driver-set", f"domain_id={random_domain_id()}"]
    )
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # exit 1 is the safety layer taking over (a watchdog trip when a loaded 2-core machine starves
    # the loop; this random policy may tip the robot): the policy must have run, LowCmds gone out
    assert rc in (0, 1) and report["runner"]["policy_runs"] >= 20 and report["sent"] >= 20, report
    assert main(["deploy", "ros2", bundle, "--out", str(tmp_path / "ws")]) == 0
    assert any((tmp_path / "ws").rglob("*.launch.py"))


def test_a_policy_with_fewer_actions_than_joints_is_refused_naming_joints(tmp_path, capsys):
    _onnx(_mlp(47, 10, 0), 47, tmp_path / "ten.onnx")
    assert _import(tmp_path, tmp_path / "ten.onnx", LG_SPEC) == 2
    assert "'joints': the spec names 12 joints, the policy gives 10 actions" in capsys.readouterr().err


def test_a_torchscript_that_is_no_plain_observation_to_action_net_is_one_line(tmp_path, capsys):
    class ThreeD(torch.nn.Module):  # wants (N, T, 47): a sequence model, not a (N, 47) policy
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(47, 12)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.l(x[:, -1, :])

    torch.jit.script(ThreeD()).save(str(tmp_path / "seq.pt"))
    assert _import(tmp_path, tmp_path / "seq.pt", LG_SPEC) == 2
    err = capsys.readouterr().err.strip()
    assert "exporting it to ONNX with an input of width 47" in err and len(err.splitlines()) == 1, err
