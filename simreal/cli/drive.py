"""Run a policy bundle on a robot through its driver (no ROS): the deploy runner at the control rate.

    # the SO-100 on its Feetech bus
    simreal drive BUNDLE --driver so100 --driver-set port=/dev/ttyACM0 --duration 30

    # the same against the driver's twin (the bus on a pseudo-terminal), a report as JSON
    simreal drive BUNDLE --twin --duration 5 --json

The runner and its safety layer are ``simreal deploy run``'s (clamping, rate limits, start
ramp, watchdog, envelope; settings from ``--config``/``--deploy-set``), fed by the driver's
``observation()`` instead of ROS topics; the robot's hand-over (arming a flight controller)
happens once, before the first tick. Ctrl-C, SIGTERM, SIGHUP or the end of ``--duration``
sends the safe command before the driver disconnects. ``--teleop DEVICE`` steers a walking
policy: the device's axes set the velocity command it observes (forward, sideways, yaw), within
the range it was trained on; no deflection stands still. Exit 0 when the run ended without the
safety layer taking over, 1 after a fault or a watchdog trip, 130 / 143 / 129 when Ctrl-C,
SIGTERM or SIGHUP stopped it.

On stderr: a banner (what runs, how it stops, a keyboard's keys), then a status line every 2 s
(time, tick rate, the safety layer's mode, the teleoperated command: ``simreal/hardware/drive_status.py``).
The report, text or ``--json``, comes from one dict (:func:`drive_report`): the drive loop's
counters and ``last_error`` (the robot link's), and the runner's under ``runner`` with its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

HELP = "run a bundle on a robot through its hardware driver (or the driver's twin), no ROS"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", help="bundle folder (policy.onnx + bundle.yaml)")
    from simreal.config import positive_float_arg
    from simreal.hardware.drivers import add_driver_arguments

    add_driver_arguments(p, "drive the driver's twin (same wire, simulated robot)")
    p.add_argument("--config", help="deploy YAML (limits, watchdog, start ramp, envelope)")
    p.add_argument(
        "--deploy-set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one deploy key, e.g. --deploy-set watchdog.timeout_s=0.05",
    )
    p.add_argument(
        "--duration", type=positive_float_arg, default=None, help="stop after this many seconds (default: Ctrl-C)"
    )
    p.add_argument(
        "--teleop",
        choices=("keyboard", "gamepad", "spacemouse"),
        help="steer a walking policy: the device's axes set its velocity command (bundles that "
        "observe `command`), within the range it was trained on",
    )
    p.add_argument(
        "--task-param",
        dest="task_params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a task input the policy observes that no robot state carries, e.g. the goal of an arm "
        "task: --task-param target_pos_w=[0.4,0.0,0.3] (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")


#: A velocity command's (low, high) per component where the bundle's task config does not say (the
#: ranges g1-velocity trained on before it recorded them).
DEFAULT_COMMAND_RANGES = ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0))


def velocity_teleop(device: Any, bundle: Any) -> Any:
    """A :class:`~simreal.hardware.teleop.teleoperator.VelocityCommand` on ``device`` within the bundle's
    trained command ranges; a ConfigError for a bundle that observes no velocity command."""
    from simreal.errors import ConfigError
    from simreal.hardware.teleop.teleoperator import VelocityCommand

    if "command" not in bundle.obs_names:
        raise ConfigError(
            "--teleop",
            f"bundle '{bundle.task}' observes no velocity command (its observation: "
            f"{', '.join(bundle.obs_names)}); --teleop steers walking policies",
        )
    trained = bundle.command_ranges()
    ranges = DEFAULT_COMMAND_RANGES if trained is None else [tuple(r) for r in trained]
    return VelocityCommand(device, ranges)


def run(args: argparse.Namespace) -> int:
    from simreal.bundle import load_bundle
    from simreal.config import deep_merge, parse_overrides, task_params_arg
    from simreal.deploy.runner import PolicyRunner
    from simreal.errors import ConfigError
    from simreal.hardware.drive import action_index, drive
    from simreal.hardware.drive_status import DriveStatus, banner
    from simreal.hardware.drivers import default_driver, open_robot
    from simreal.stop_signal import interrupt_exit_code, interrupt_signal, stop_on_signals
    from simreal.yaml_io import load_yaml

    bundle = load_bundle(args.bundle)
    given = task_params_arg(args.task_params)
    bundle = bundle.with_task_params(given)
    name = default_driver(bundle.robot, args.driver)
    overrides = deep_merge(load_yaml(args.config) if args.config else {}, parse_overrides(args.overrides))
    runner = PolicyRunner(bundle, overrides=overrides)
    unfed = runner.inputs_only_topics_give()
    if unfed:  # the runner would wait for them forever, sending nothing (and drive reported success)
        raise ConfigError(
            "--task-param",
            f"the policy observes {', '.join(unfed)}, which drive reads from no "
            f"topic; give it, e.g. --task-param {unfed[0]}=[x,y,z] (world frame, m)",
        )
    settings = {"action_mode": bundle.action.mode, **parse_overrides(args.settings)}
    status = DriveStatus(sys.stderr)
    try:
        with contextlib.ExitStack() as stack:
            steer = None
            if args.teleop:
                from simreal.hardware.teleop.devices import DEVICES

                steer = stack.enter_context(velocity_teleop(DEVICES[args.teleop](), bundle))
            robot = stack.enter_context(open_robot(name, bundle.robot, settings, twin=args.twin, bag=args.bag))
            action_index(runner, robot)  # a bundle for another mode or robot: one line, before the banner
            print(
                banner(bundle.task, name, args.twin, 1.0 / runner.cfg.period_s, args.duration, args.teleop),
                file=sys.stderr,
                flush=True,
            )
            try:
                with stop_on_signals("sending the safe command, then the report") as stopped:
                    report = drive(
                        robot,
                        runner,
                        duration_s=args.duration,
                        on_tick=status.on_tick,
                        task_input=status.watch(steer),
                        stop=lambda: stopped.requested,
                    )
            finally:
                status.close()
    except KeyboardInterrupt as e:  # a signal before the loop: the robot disconnected with its safe command
        print(f"simreal drive: stopped by {interrupt_signal(e)}; the safe command was sent", file=sys.stderr)
        return interrupt_exit_code(e)
    out = drive_report(report, runner)
    print(json.dumps(out, default=str) if args.json else "\n".join(report_lines(out)))
    if stopped.requested:  # Ctrl-C, SIGTERM: the report as at any end, then the signal's exit code
        print(f"simreal drive: stopped by {stopped.name}; the safe command was sent", file=sys.stderr)
        return stopped.exit_code
    if robot.disconnect_error:  # the link is gone: say the robot may not have its safe command
        print(
            f"simreal drive: warning: the safe command on disconnect was not sent: {robot.disconnect_error}",
            file=sys.stderr,
        )
    if out["runner"]["policy_runs"] == 0:  # nothing commanded the robot: not a successful run
        print(
            f"simreal drive: the policy never ran in {report.ticks} ticks (no complete, fresh robot state: "
            f"{report.read_errors} read errors{'; last: ' + report.last_error if report.last_error else ''})",
            file=sys.stderr,
        )
        return 1
    return 1 if runner.safety.stats.took_over else 0


def drive_report(report: Any, runner: Any) -> dict[str, Any]:
    """The run's report, the one source of both ``--json`` and the text (:func:`report_lines`):
    the drive loop's counters and ``last_error`` (its last failed read or send: the robot's
    link), and under ``runner`` the deploy runner's (``snapshot()``, with its own
    ``last_error``: a state or action it refused), as ``deploy run --json`` has them."""
    return {
        "ticks": report.ticks,
        "sent": report.sent,
        "read_errors": report.read_errors,
        "send_errors": report.send_errors,
        "overruns": report.overruns,
        "tick_p99_ms": report.tick_p99_s() * 1e3,
        "final_mode": report.final_mode,
        "last_error": report.last_error,
        **(
            {"task_input_last": report.task_input_last, "task_input_peak": report.task_input_peak}
            if report.task_input_last
            else {}
        ),
        "runner": {"ticks": report.ticks, **runner.snapshot()},
    }


def report_lines(out: dict[str, Any]) -> list[str]:
    """:func:`drive_report` as text: the loop's line, the runner's lines (why it faulted: an
    envelope trip is not overwritten by the stop), then each last error there is."""
    from simreal.deploy.runner import runner_lines

    r = out["runner"]
    lines = [
        f"{out['ticks']} ticks, {out['read_errors']} read errors, {out['send_errors']} send errors, "
        f"{out['overruns']} overruns, tick p99 {out['tick_p99_ms']:.2f} ms; {r['safety']['faults']} safety faults",
        *runner_lines(r),
    ]
    if out["last_error"]:
        lines.append(f"last error (robot link): {out['last_error']}")
    if r.get("last_error"):
        lines.append(f"last error (runner): {r['last_error']}")
    return lines
