"""Deploy a policy bundle: a ROS 2 package, the DDS runtime, or a sim-in-the-loop rehearsal.

    # a colcon-ready ament_python package (node, launch file, parameters, bundle)
    simreal deploy ros2 runs/quadrotor-hover/20261121-120000/bundle --out ~/ros2_ws/src --name cf_hover

    # run the policy on the robot's ROS 2 topics over Cyclone DDS, no ROS install needed
    simreal deploy run bundle/ --transport dds --domain-id 0 --record session_bag

    # rehearse: a MuJoCo robot in another process, 10 ms actuation latency, 5 % message loss
    simreal deploy sim bundle/ --duration 10 --latency-ms 10 --drop 0.05 --json

Deploy settings (topics, limits, watchdog, start ramp) come from the bundle's robot spec
and can be overridden with ``--config my.yaml`` (see configs/deploy/default.yaml) and
``--deploy-set watchdog.timeout_s=0.05``. ``deploy sim`` exits 0 when the rehearsal passes (a
quadrotor holds its target within 10 cm from 2 s after hand-over), 1 when it fails, and 3 when
it failed on a host that missed its own deadlines (:func:`host_deadlines`): a real-time
rehearsal needs the CPU when its loops are due, so a failure there says nothing about the
policy (rerun it on a quieter machine, or with real-time priority). ``deploy run``
exits 0 when ``--duration`` ends with no safety fault, 1 after one (a watchdog trip, the
envelope left, non-finite actions: the safe command sent), and 130 / 143 / 129 when Ctrl-C, SIGTERM or
SIGHUP (the terminal or SSH session gone) stopped it; every way out sends the safe command.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simreal.config import domain_id_arg, outage_arg, positive_float_arg, seed_arg

if TYPE_CHECKING:
    from simreal.deploy.sim_loop import SimLoopConfig

HELP = "deploy a policy bundle: ROS 2 package (ros2), DDS runtime (run), sim-in-the-loop (sim)"


def _common(p: argparse.ArgumentParser, realtime: bool = False) -> None:
    p.add_argument("bundle", help="bundle folder (policy.onnx + bundle.yaml)")
    if realtime:
        p.add_argument(
            "--no-realtime",
            dest="realtime",
            action="store_false",
            help="do not request SCHED_FIFO priority for the control loop (requested by default, used when permitted)",
        )
    p.add_argument("--config", help="deploy YAML overriding the robot spec's topics, limits, watchdog, ...")
    p.add_argument(
        "--deploy-set",
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one deploy key, e.g. --deploy-set watchdog.timeout_s=0.05 (repeatable; --set: the old "
        "spelling, kept for one release)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="deploy_verb", required=True, metavar="{ros2,run,sim}")
    p = sub.add_parser("ros2", help="write a ROS 2 ament_python package for the bundle")
    _common(p)
    p.add_argument("--out", required=True, help="folder to create the package in (e.g. ~/ros2_ws/src)")
    p.add_argument("--name", help="package name (default: <robot>_<task>_policy)")
    p.add_argument("--force", action="store_true", help="replace an existing package folder")

    p = sub.add_parser("run", help="run the policy over DDS with ROS 2 wire-compatible messages")
    _common(p, realtime=True)
    p.add_argument(
        "--transport",
        choices=("dds",),
        default="dds",
        help="dds: Cyclone DDS speaking ROS 2 (for rclpy, build the `deploy ros2` package)",
    )
    p.add_argument(
        "--domain-id",
        type=domain_id_arg,
        default=None,
        help="DDS domain = ROS_DOMAIN_ID (default: $ROS_DOMAIN_ID or 0)",
    )
    p.add_argument(
        "--network", action="store_true", help="use Cyclone's configuration (CYCLONEDDS_URI) instead of loopback only"
    )
    p.add_argument(
        "--duration", type=positive_float_arg, default=None, help="stop after this many seconds (default: until Ctrl-C)"
    )
    p.add_argument("--record", help="record a rosbag2 (MCAP) folder of everything received and sent")
    p.add_argument("--json", action="store_true", help="print the final report as JSON")

    p = sub.add_parser(
        "sim",
        help="rehearse against a MuJoCo robot in another process, over DDS",
        epilog="Exit codes: 0 passed, 1 failed, 3 invalid (it failed while this host missed its own "
        "deadlines: a loop woke more than half the watchdog's staleness late, so the policy "
        "was not judged). The two loops need about a core each: run it with 2 free cores "
        "(load below 1 on a 2-core machine) and, where permitted, real-time priority "
        "(CAP_SYS_NICE or an rtprio limit; requested by default, --no-realtime).",
    )
    _common(p, realtime=True)
    p.add_argument("--duration", type=float, default=10.0, help="flight/drive time after hand-over [s]")
    p.add_argument("--latency-ms", type=float, default=0.0, help="actuation latency added to every command [ms]")
    p.add_argument("--state-latency-ms", type=float, default=0.0, help="latency added to every state message [ms]")
    p.add_argument("--drop", type=float, default=0.0, help="message loss probability, each direction")
    p.add_argument(
        "--state-rate-hz",
        type=float,
        default=0.0,
        help="state publishing rate (0: the control rate; a Unitree humanoid's rt/lowstate runs at 500)",
    )
    p.add_argument("--noise", type=float, default=1.0, help="sensor noise scale (0 = none)")
    p.add_argument(
        "--state-outage",
        type=outage_arg,
        default=(0.0, 0.0),
        metavar="AT:SECONDS",
        help="no state message at all for SECONDS from AT seconds after the hand-over (a "
        "motion-capture dropout), e.g. 3:0.3",
    )
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument(
        "--domain-id",
        type=domain_id_arg,
        default=None,
        help="DDS domain (default: a random one in 150..230 that no other simreal process on this "
        "machine holds; with --external $ROS_DOMAIN_ID or 0)",
    )
    p.add_argument(
        "--external",
        action="store_true",
        help="run only the simulated robot (state out, commands in, judged the same way) for a "
        "controller started separately: the generated ROS 2 node or your own",
    )
    p.add_argument(
        "--startup-timeout",
        type=float,
        default=None,
        help="give up when no command arrives within this many seconds (default 20; 60 with --external)",
    )
    p.add_argument(
        "--max-command-gap",
        type=float,
        default=0.5,
        help="after the hand-over, a rehearsal with a longer time without a command fails: the "
        "controller stopped or stalled [s] (default 0.5, PX4's offboard loss timeout)",
    )
    p.add_argument(
        "--task-param",
        dest="task_params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a task input in place of the bundle's, for the rehearsed episode: a walking policy's "
        "velocity command, --task-param command=[0.5,0.0,0.0] (repeatable)",
    )
    p.add_argument("--record", help="folder for two rosbag2 recordings: runner/ and robot/")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    from simreal.config import deep_merge, parse_overrides
    from simreal.yaml_io import load_yaml

    tree = load_yaml(args.config) if args.config else {}
    return deep_merge(tree, parse_overrides(args.overrides))


def _set_by(args: argparse.Namespace, key: str) -> str | None:
    """Where the user set the dotted deploy ``key``: ``--deploy-set`` (which wins), the ``--config`` file, or
    None (the bundle and its robot spec)."""
    from simreal.config import parse_overrides
    from simreal.yaml_io import load_yaml

    def sets(tree: Any) -> bool:
        for part in key.split("."):
            if not isinstance(tree, dict) or part not in tree:
                return False
            tree = tree[part]
        return True

    if sets(parse_overrides(args.overrides)):
        return "--deploy-set"
    return args.config if args.config and sets(load_yaml(args.config)) else None


def run(args: argparse.Namespace) -> int:
    from simreal.errors import ConfigError

    try:
        return {"ros2": _ros2, "run": _run, "sim": _sim}[args.deploy_verb](args)
    except ConfigError as e:
        # The resolver sees one merged tree: name the file (or --deploy-set) a bad key came from.
        where = None if e.source else _set_by(args, e.key)
        if where is None:
            raise
        raise ConfigError(e.key, str(e).removeprefix(f"config key '{e.key}': "), where) from None


def _ros2(args: argparse.Namespace) -> int:
    from simreal.bundle import load_bundle
    from simreal.deploy.ros2_package import generate_ros2_package
    from simreal.deploy.runner import PolicyRunner

    # what the node builds at its start, built here first: the graph loads and matches bundle.yaml,
    # and the bundle matches its robot spec and the config, before a file is written
    overrides = _overrides(args)
    PolicyRunner(load_bundle(args.bundle), overrides=overrides)
    root = generate_ros2_package(args.bundle, args.out, name=args.name, overrides=overrides, force=args.force)
    print(f"wrote ROS 2 package {root.name} to {root}")
    print(f"  colcon build --packages-select {root.name} && source install/setup.bash")
    print(f"  ros2 launch {root.name} {root.name}.launch.py")
    return 0


def _run(args: argparse.Namespace) -> int:
    from simreal.bundle import load_bundle
    from simreal.deploy.bag import BagRecorder
    from simreal.deploy.realtime import realtime_priority
    from simreal.deploy.runner import PolicyRunner
    from simreal.deploy.transport_dds import DdsPolicyNode, DdsTransport, default_domain_id
    from simreal.stop_signal import interrupt_exit_code

    runner = PolicyRunner(load_bundle(args.bundle), overrides=_overrides(args))
    domain = default_domain_id() if args.domain_id is None else args.domain_id
    recorder = BagRecorder(args.record) if args.record else None
    interrupted: KeyboardInterrupt | None = None  # Ctrl-C, or SIGTERM / SIGHUP (simreal.cli raises it for both)
    t0 = time.monotonic()
    with realtime_priority(args.realtime) as realtime, DdsTransport(domain, loopback=not args.network) as tr:
        node = DdsPolicyNode(runner, tr, recorder=recorder)
        cfg = runner.cfg
        assert cfg.command is not None  # a resolved config (resolve_deploy_config refuses one without)
        if not args.json:
            print(
                f"running {runner.bundle.path} at {cfg.control_rate_hz:g} Hz on DDS domain {domain}: "
                f"{[s.topic for s in cfg.state.values()]} -> {cfg.command.topic}; e-stop {cfg.estop_topic}",
                flush=True,
            )
        try:
            node.spin(args.duration)
        except KeyboardInterrupt as e:
            interrupted = e
        res = runner.shutdown(time.monotonic())  # publish the safe command once
        for topic, msg in runner.messages(res, time.time_ns()):
            tr.publishers[topic].publish(msg)
    if recorder is not None:
        recorder.close()
    if runner.stats.state_msgs == 0:
        print(
            f"simreal deploy run: warning: no state message arrived on {[s.topic for s in cfg.state.values()]} "
            f"(DDS domain {domain}); nothing was commanded",
            file=sys.stderr,
        )
    report = {
        "domain_id": domain,
        "realtime": realtime,
        "duration_s": round(time.monotonic() - t0, 3),
        "ticks": node.ticks,
        "modes": node.modes,
        "timer_overruns": node.timer_overruns,
        "runner": runner.snapshot(),
        "bag": args.record,
        "recorded": recorder.counts if recorder else None,
    }
    _print(report, args.json)
    if interrupted is not None:
        return interrupt_exit_code(interrupted)
    return 1 if runner.safety.stats.took_over else 0


#: ``deploy sim``'s flags -> the SimLoopConfig keys they set (a bad value names the flag typed).
SIM_FLAGS: dict[str, str] = {
    "duration_s": "--duration",
    "latency_ms": "--latency-ms",
    "state_latency_ms": "--state-latency-ms",
    "drop": "--drop",
    "state_rate_hz": "--state-rate-hz",
    "noise_scale": "--noise",
    "seed": "--seed",
    "startup_timeout_s": "--startup-timeout",
    "max_command_gap_s": "--max-command-gap",
    "outage_at_s": "--state-outage",
    "outage_s": "--state-outage",
    "task_params": "--task-param",
}


#: The rehearsal's robot process: ``python -m simreal.deploy.sim_loop`` without the working
#: directory on ``sys.path`` (``-m`` puts it first, so a folder named ``simreal`` there, another
#: checkout of it for one, was imported in place of the installed package: a traceback)
ROBOT_PROCESS = (
    sys.executable,
    "-c",
    "import runpy, sys; del sys.path[0]; "
    "runpy.run_module('simreal.deploy.sim_loop', run_name='__main__', alter_sys=True)",
)


def _sim_config(args: argparse.Namespace) -> SimLoopConfig:
    """The rehearsal settings from the flags, validated here before any robot process starts
    (SimLoopConfig's ranges); a bad one is a SimrealError naming the flag."""
    from simreal.config import build, task_params_arg
    from simreal.deploy.sim_loop import SimLoopConfig
    from simreal.errors import ConfigError, SimrealError

    timeout = args.startup_timeout if args.startup_timeout is not None else (60.0 if args.external else 20.0)
    sim_cfg = {
        "duration_s": args.duration,
        "latency_ms": args.latency_ms,
        "state_latency_ms": args.state_latency_ms,
        "drop": args.drop,
        "state_rate_hz": args.state_rate_hz,
        "noise_scale": args.noise,
        "seed": args.seed,
        "startup_timeout_s": timeout,
        "max_command_gap_s": args.max_command_gap,
        "outage_at_s": args.state_outage[0],
        "outage_s": args.state_outage[1],
        "task_params": task_params_arg(args.task_params),
    }
    try:
        return build(SimLoopConfig, sim_cfg, prefix="sim")
    except ConfigError as e:
        flag = SIM_FLAGS[e.key.removeprefix("sim.")]
        raise SimrealError(f"{flag}: {str(e).removeprefix(f'config key {e.key!r}: ')}") from None


def _new_bags(record: Path, sides: tuple[str, ...]) -> None:
    """DataFileError when a bag ``--record`` would write exists already (bags are never
    overwritten): said here, before a robot process starts and fails on it."""
    from simreal.errors import DataFileError

    for side in sides:
        if (record / side).exists():
            raise DataFileError(
                str(record / side),
                "bag folder exists already (rosbag2 bags are never overwritten); give --record a new folder",
            )


def _sim(args: argparse.Namespace) -> int:
    from simreal.bundle import load_bundle
    from simreal.dependencies import require
    from simreal.deploy.runner import PolicyRunner
    from simreal.deploy.sim_gate import check_task

    require("mujoco")  # the simulated robot needs it: say so here, not in a child process's traceback
    sim_cfg = _sim_config(args)
    if args.record:
        _new_bags(Path(args.record), ("robot",) if args.external else ("robot", "runner"))
    bundle = sim_cfg.rehearsed(load_bundle(args.bundle))
    overrides = _overrides(args)
    runner = PolicyRunner(bundle, overrides=overrides)  # validate before starting the robot
    check_task(bundle)
    if args.external:
        report = _sim_external(args, bundle, runner.cfg, overrides, sim_cfg)
    else:
        report = _sim_both(args, bundle, runner, overrides, sim_cfg)
        if "stopped" in report:
            stop = report["stopped"]
            print(
                f"simreal deploy sim: stopped by {stop.name} before the end of the rehearsal: the safe command "
                "was sent and the robot process ended; no verdict",
                file=sys.stderr,
            )
            return stop.exit_code
    _print(report, args.json)
    return 0 if report["passed"] else 1 if report["host"]["valid"] else INVALID_EXIT


#: ``deploy sim``'s exit code for a rehearsal whose host missed its deadlines (module docstring).
INVALID_EXIT = 3


def host_deadlines(robot: dict[str, Any], cfg: Any, node: Any | None, passed: bool) -> dict[str, Any]:
    """Whether this host kept the rehearsal's deadlines. Each loop's lateness [s]: the robot
    process's ``max_lag_s`` (simulated time behind the wall clock when it woke, after the
    hand-over) and, where the runner ran here (``node``, a DdsPolicyNode), its longest time
    between two ticks less one control period. Either above the budget, half the runner's
    watchdog staleness ``0.5 (timeout_s - period_s)``, can by itself starve the watchdog's input
    or the robot's commands; a rehearsal that failed with one above it is ``valid: False``: the
    host, not the policy, may have failed it (a pass stays a pass)."""
    budget = 0.5 * (cfg.watchdog.timeout_s - cfg.period_s)
    late = {"robot_late_s": float(robot.get("host", {}).get("max_lag_s", 0.0))}
    if node is not None:
        late["runner_late_s"] = round(max(0.0, node.max_tick_gap_s - cfg.period_s), 4)
    missed = [k for k, v in late.items() if v > budget]
    out: dict[str, Any] = {"budget_s": round(budget, 4), **late, "missed": missed, "valid": passed or not missed}
    if node is not None:
        out["runner_timer_overruns"] = node.timer_overruns
    return out


def _sim_external(
    args: argparse.Namespace, bundle, cfg: Any, overrides: dict[str, Any], sim_cfg: SimLoopConfig
) -> dict[str, Any]:
    """The robot side alone, in this process, for a controller started separately."""
    from simreal.deploy.realtime import realtime_priority
    from simreal.deploy.sim_loop import run_sim_robot
    from simreal.deploy.transport_dds import default_domain_id

    domain = default_domain_id() if args.domain_id is None else args.domain_id
    print(
        f"simulated robot '{bundle.robot}' on DDS domain {domain} (loopback); waiting up to "
        f"{sim_cfg.startup_timeout_s:g} s for the first command",
        file=sys.stderr,
        flush=True,
    )
    with realtime_priority(args.realtime) as realtime:
        robot = run_sim_robot(
            bundle,
            sim_cfg,
            domain_id=domain,
            overrides=overrides,
            record=Path(args.record) / "robot" if args.record else None,
        )
    passed = bool(robot["passed"] and robot["handover"])
    return {
        "bundle": str(bundle.path),
        "domain_id": domain,
        "realtime": realtime,
        "robot": robot,
        "passed": passed,
        "host": host_deadlines(robot, cfg, None, passed),
    }


def _sim_both(
    args: argparse.Namespace, bundle, runner, overrides: dict[str, Any], sim_cfg: SimLoopConfig
) -> dict[str, Any]:
    """The robot in a subprocess, the runner here, over DDS on a private domain. SIGINT or
    SIGTERM stops the rehearsal: the runner sends its safe command, the robot process is
    terminated, and the report is ``{"stopped": StopRequest}``."""
    from simreal.deploy.bag import BagRecorder
    from simreal.deploy.private_domain import claim_domain
    from simreal.deploy.realtime import realtime_priority
    from simreal.deploy.transport_dds import DdsPolicyNode, DdsTransport
    from simreal.errors import SimrealError
    from simreal.stop_signal import stop_on_signals
    from simreal.yaml_io import dump_yaml

    record = Path(args.record) if args.record else None
    claim = claim_domain(150, 230) if args.domain_id is None else contextlib.nullcontext(args.domain_id)
    with (
        claim as domain,
        tempfile.TemporaryDirectory(prefix="simreal_sim_") as tmp,
        stop_on_signals("stopping the rehearsal: the safe command, then the robot process ends") as stop,
    ):
        report_path, cfg_path = Path(tmp) / "robot.json", Path(tmp) / "deploy.yaml"
        dump_yaml(cfg_path, overrides)
        cmd = [
            *ROBOT_PROCESS,
            str(bundle.path),
            "--domain-id",
            str(domain),
            "--report",
            str(report_path),
            "--config",
            str(cfg_path),
            "--sim",
            json.dumps(dataclasses.asdict(sim_cfg)),
        ]
        if args.realtime:
            cmd.append("--rt")
        if record is not None:
            record.mkdir(parents=True, exist_ok=True)
            cmd += ["--record", str(record / "robot")]
        # its own session: a terminal's Ctrl-C reaches this process only, which stops the rehearsal
        # and then the robot (a KeyboardInterrupt in the robot process was a traceback)
        proc = subprocess.Popen(cmd, start_new_session=True)
        recorder = None
        try:
            recorder = BagRecorder(record / "runner") if record is not None else None
            with realtime_priority(args.realtime) as realtime, DdsTransport(domain) as tr:
                node = DdsPolicyNode(runner, tr, recorder=recorder)
                # the rehearsal ends duration_s after the robot's hand-over (the runner's, plus the
                # injected latency); then the runner stops as it would on the robot: the
                # commanded stop, not a watchdog fault when the robot's state stops coming
                # (the margin: less than the watchdog's staleness after the robot's last state)
                end_after = (
                    args.duration + args.latency_ms / 1e3 + 0.5 * (runner.cfg.watchdog.timeout_s - runner.cfg.period_s)
                )

                def over() -> bool:
                    since = runner.engaged_for(time.monotonic())
                    return stop.requested or proc.poll() is not None or (since is not None and since > end_after)

                node.spin(args.duration + sim_cfg.startup_timeout_s + 240.0, until=over)
                res = runner.shutdown(
                    time.monotonic(), reason=f"stopped by {stop.name}" if stop.requested else "end of the rehearsal"
                )
                for topic, msg in runner.messages(res, time.time_ns()):
                    tr.publishers[topic].publish(msg)
            if stop.requested:
                return {"stopped": stop}
            proc.wait(timeout=args.duration + 300.0)  # the robot process runs the sim-to-sim reference
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(timeout=30)
            if recorder is not None:
                recorder.close()
        if proc.returncode != 0 or not report_path.is_file():
            raise SimrealError(f"the simulated robot process failed (exit code {proc.returncode})")
        robot = json.loads(report_path.read_text())
    passed = bool(robot["passed"] and robot["handover"] and runner.stats.envelope_trip_s is None)
    return {
        "bundle": str(bundle.path),
        "domain_id": domain,
        "realtime": realtime,
        "robot": robot,
        "runner": {"ticks": node.ticks, "modes": node.modes, **runner.snapshot()},
        "passed": passed,
        "host": host_deadlines(robot, runner.cfg, node, passed),
    }


def _print(report: dict[str, Any], as_json: bool) -> None:
    """The report as JSON, or as a few readable lines (``deploy run``'s or ``deploy sim``'s)."""
    if as_json:
        print(json.dumps(report, indent=2, default=str))
        return
    robot = report.get("robot")
    print("\n".join(_run_lines(report) if robot is None else _sim_lines(report, robot)))


def _run_lines(report: dict[str, Any]) -> list[str]:
    """``deploy run``: where it ran, for how long, what the runner and the safety layer did."""
    from simreal.deploy.runner import runner_lines

    runner = {"ticks": report["ticks"], **report["runner"]}
    lines = [
        f"ran        {report['duration_s']:.1f} s on DDS domain {report['domain_id']}, real-time priority "
        f"{'yes' if report['realtime'] else 'no'}, timer overruns {report['timer_overruns']}",
        "modes      " + ", ".join(f"{k} {v}" for k, v in report["modes"].items()),
        *runner_lines(runner),
    ]
    if runner.get("last_error"):
        lines.append(f"last error {runner['last_error']}")
    if report.get("bag"):
        lines.append(f"recorded   {report['bag']}: {report['recorded']}")
    return lines


def _sim_lines(report: dict[str, Any], robot: dict[str, Any]) -> list[str]:
    """``deploy sim``: the robot's check, the sim-to-sim gate, messages, runner, verdict."""
    from simreal.deploy.runner import runner_lines, took_over

    hover, gate = robot.get("hover"), robot.get("gate")
    lines = [
        f"robot      {robot['robot']} ({robot.get('family', '?')}), DDS domain {report['domain_id']}, "
        f"hand-over {'yes' if robot.get('handover') else 'NO'}"
    ]
    if not robot.get("handover"):
        wait = robot.get("config", {}).get("startup_timeout_s")
        lines.append(
            f"commands   none arrived within {wait:g} s: is the controller running, on DDS domain "
            f"{report['domain_id']} (ROS_DOMAIN_ID) and on the same network?"
            if wait
            else "commands   none arrived"
        )
    ground_s = robot.get("on_ground_s")
    if ground_s is not None:  # the model has no contacts: the flight ends there (simreal/deploy/sim_loop.py)
        speed = (robot.get("geofence") or {}).get("ground_speed_m_s")
        lines.append(
            f"ground     on the ground at {ground_s:.2f} s after the hand-over"
            + (f", {speed:.2f} m/s" if speed is not None else "")
        )
    if robot.get("diverged_s") is not None:  # MuJoCo reset the state there (simreal/deploy/sim_robot.py)
        lines.append(
            f"physics    the simulation diverged at {robot['diverged_s']:.3f} s of simulated time; "
            f"the rehearsal stopped there -> FAIL"
        )
    label = "track " if hover and hover.get("tracks_reference") else "hover "
    if hover and "max_error_after_settle_m" in hover:
        lines.append(
            f"{label}     max error after {hover['settle_s']} s: {hover['max_error_after_settle_m']:.3f} m "
            f"(limit {hover['radius_m']} m), rmse {hover['rmse_after_settle_m']:.3f} m -> "
            f"{'PASS' if hover['passed'] else 'FAIL'}" + (f": {hover['reason']}" if hover.get("reason") else "")
        )
    elif hover:
        lines.append(f"{label}     -> FAIL: {hover.get('reason', '')}")
    task = robot.get("task")
    if task:
        figures = ", ".join(
            f"{k.removesuffix('_m').replace('_', ' ')} {v:.3f}" + (" m" if k.endswith("_m") else "")
            for k, v in task.items()
            if k not in ("passed", "at_s", "radius_m")
        )
        limit = f" (success below {task['radius_m']:g} m)" if "radius_m" in task else ""
        lines.append(
            f"task       where it ended, {task['at_s']:.2f} s after the hand-over: {figures}{limit} -> "
            f"{'PASS' if task['passed'] else 'FAIL: the task is not done'}"
        )
    if robot.get("fall_s") is not None:
        lines.append(
            f"fall       the robot fell {robot['fall_s']:.2f} s after the hand-over (base below half its start "
            f"height or tilted past 60 degrees) -> FAIL"
        )
    left = robot.get("envelope") or {}
    if left.get("left_s") is not None:  # the runner's line below reads the measured state
        lines.append(
            f"state      left the envelope {left['left_s']:.2f} s after the hand-over (true state): "
            f"{left['reason']} -> FAIL"
        )
    if gate:
        value = "-" if gate.get("value") is None else f"{gate['value']:.4f}"
        if gate.get("detail"):
            value += f" ({gate['detail']})"
        if gate.get("compared_s") is not None:  # the reference ends with the training env's episode
            value += f" over {gate['compared_s']:.1f} s"
        lines.append(
            f"sim gate   {gate['measure']} vs the training simulator: {value} (limit {gate['tolerance']}) "
            f"-> {'PASS' if gate['passed'] else 'FAIL'}" + (f": {gate['reason']}" if gate.get("reason") else "")
        )
    lines.append(
        "messages   "
        + ", ".join(
            f"{k.replace('_', ' ')} {robot[k]}"
            for k in (
                "states_published",
                "states_dropped",
                "states_lost_to_outage",
                "states_in_flight_at_end",
                "commands_received",
                "commands_dropped",
                "commands_applied",
            )
            if k in robot
        )
    )
    commands, most = robot.get("commands"), robot.get("config", {}).get("max_command_gap_s")
    if commands and most is not None and commands["max_gap_s"] > most:  # the controller went quiet
        lines.append(
            f"commands   none for {commands['max_gap_s']:.2f} s (limit {most:g} s), up to "
            f"{commands['gap_ends_s']:.2f} s after the hand-over: the controller stopped -> FAIL"
        )
    runner = report.get("runner")
    if runner:
        lines += runner_lines(runner)
        if runner.get("envelope_trip_s") is not None:
            lines[-1] += " -> FAIL"
        elif not took_over(runner["safety"]):
            lines[-1] += " -> PASS"  # after a takeover the runner no longer watched the state: no verdict
    host = report.get("host") or {}
    figures = ", ".join(
        f"{k.removesuffix('_late_s')} {host[k] * 1e3:.0f} ms" for k in ("robot_late_s", "runner_late_s") if k in host
    )
    if figures:
        lines.append(
            f"host       latest wake-up {figures} (budget {host['budget_s'] * 1e3:.0f} ms)"
            + (": this host missed its deadlines" if host["missed"] else "")
        )
    if host.get("valid", True):
        lines.append(f"result     {'PASS' if report['passed'] else 'FAIL'}")
    else:
        lines.append(
            "result     INVALID: it failed on a host that missed its own deadlines, so the policy was not "
            "judged; rerun it on a quieter machine (2 free cores) or with real-time priority"
        )
    return lines
