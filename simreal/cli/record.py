"""Record teleoperated episodes from a robot (or its twin) into a LeRobot v3 dataset.

    # an SO-100 follower driven by its leader arm, two cameras, 10 episodes of 20 s
    simreal record so100 --driver-set port=/dev/ttyACM0 --teleop leader --leader-set port=/dev/ttyACM1 \\
        --camera front=0 --camera wrist=2 --task "put the cube in the bowl" --episodes 10 --out data/cube

    # the same against the twin (the Feetech bus on a pseudo-terminal), keyboard teleop
    simreal record so100 --twin --teleop keyboard --camera front=pattern --task "wave" --out /tmp/ds

    # append more episodes later
    simreal record so100 ... --out data/cube --resume

Teleop devices: ``keyboard`` (the terminal; keys q/a w/s e/d r/f t/g y/h jog joints 1-6,
space re-syncs, x ends the episode; the banner on stderr lists them with the joints' names),
``gamepad``, ``spacemouse`` (6 axes jog joints 1-6),
``leader`` (an SO-100 leader arm: the follower copies it). ``--teleop-mode ee`` makes a rate
device's axes move an arm's end effector along world x, y, z and turn it about them, through IK
(:mod:`simreal.hardware.teleop.ee_jog`; keys c and v close and open the gripper). Cameras: ``NAME=SOURCE`` with a
device index, a file or stream URL, or ``pattern`` (a test pattern: checks the pipeline
without a camera). Every late tick and dropped camera frame is counted and printed per
episode; Ctrl-C keeps every finished episode (the one in progress is discarded) and prints the
session's report as a normal end does. While it runs, stderr says when each episode and reset
starts and, every 5 s, how far the episode is.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

HELP = "record teleoperated episodes into a LeRobot v3 dataset (robot or twin)"
TELEOPS = ("keyboard", "gamepad", "spacemouse", "leader")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("robot", help="robot spec name (simreal list) or path")
    from simreal.hardware.drivers import add_driver_arguments

    add_driver_arguments(p, "record from the driver's twin (same wire, simulated robot)")
    p.add_argument("--teleop", required=True, choices=TELEOPS, help="teleoperation device")
    p.add_argument(
        "--teleop-mode",
        choices=("joint", "ee"),
        default="joint",
        help="what a rate device's six axes move: joints 1-6 (joint), or the arm's end effector "
        "along world axes through IK (ee)",
    )
    p.add_argument(
        "--leader-set",
        dest="leader_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="leader arm setting, e.g. --leader-set port=/dev/ttyACM1",
    )
    p.add_argument(
        "--camera",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="a camera: device index, file/URL, or 'pattern' (repeatable)",
    )
    p.add_argument("--camera-size", default="640x480", metavar="WxH", help="camera image size (default 640x480)")
    p.add_argument("--task", required=True, help="the instruction stored with every episode")
    p.add_argument("--out", required=True, help="dataset folder")
    p.add_argument("--resume", action="store_true", help="append to the dataset in --out")
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--episode-s", type=float, default=20.0, help="episode length [s]")
    p.add_argument("--reset-s", type=float, default=5.0, help="teleoperation without recording between episodes [s]")
    p.add_argument(
        "--fps",
        type=int,
        default=None,
        help="recording rate [frames/s], whole (LeRobot's fps is an integer; default: the robot's control rate)",
    )
    p.add_argument("--json", action="store_true", help="print the session's counters as JSON")


def _settings(items: list[str], flag: str) -> dict[str, Any]:
    from simreal.config import parse_overrides
    from simreal.errors import ConfigError

    for it in items:
        if "=" not in it:
            raise ConfigError(flag, f"expected KEY=VALUE, got '{it}'")
    return parse_overrides(items)


def _camera(spec: str, size: str):
    from simreal.errors import ConfigError
    from simreal.hardware.record.cameras import OpenCVCamera, PatternCamera

    if "=" not in spec:
        raise ConfigError("--camera", f"expected NAME=SOURCE (index, file/URL or 'pattern'), got '{spec}'")
    try:
        w, h = (int(v) for v in size.lower().split("x"))
    except ValueError:
        raise ConfigError("--camera-size", f"expected WIDTHxHEIGHT like 640x480, got '{size}'") from None
    name, source = spec.split("=", 1)
    if source == "pattern":
        return PatternCamera(name, w, h)
    return OpenCVCamera(name, int(source) if source.isdigit() else source, w, h)


def _teleop(args: argparse.Namespace, robot, stack):
    from simreal.hardware.teleop.teleoperator import JointJog

    if args.teleop == "leader":
        if args.teleop_mode != "joint":
            from simreal.errors import ConfigError

            raise ConfigError(
                "--teleop-mode",
                "a leader arm sets the follower's joints; --teleop-mode ee takes a "
                "rate device (keyboard, gamepad, spacemouse)",
            )
        from simreal.config import build
        from simreal.hardware.feetech.so100 import SO100Config
        from simreal.hardware.teleop.leader_arm import SO100Leader

        settings = {"robot": args.robot, **_settings(args.leader_settings, "--leader-set")}
        if args.twin:
            from simreal.hardware.drivers import driver

            settings.update(stack.enter_context(driver("so100").twin(args.robot)))
        return SO100Leader(build(SO100Config, settings, prefix="leader"))
    from simreal.hardware.teleop import devices as input_devices

    device = input_devices.DEVICES[args.teleop]()
    if args.teleop_mode == "ee":
        from simreal.hardware.teleop.ee_jog import EndEffectorJog

        return EndEffectorJog(device, robot.spec)
    return JointJog(device, robot.spec)


def banner(args: argparse.Namespace, teleop: Any, fps: int) -> str:
    """What the session records, how it stops, and the teleop's controls: a keyboard's keys, a
    rate device's axes (``DeviceTeleop.axes``, ``BUTTONS``), or the leader arm."""
    lines = [
        f"simreal record: {args.episodes} episodes of up to {args.episode_s:g} s ({args.reset_s:g} s to reset "
        f"between) into {args.out} at {fps} fps, {args.teleop} teleop; Ctrl-C stops, keeping the finished episodes"
    ]
    axes = teleop.axes() if hasattr(teleop, "axes") else []
    if args.teleop == "keyboard":
        from simreal.hardware.teleop.devices import key_help

        lines.append(f"keys (held): {key_help(axes, teleop.BUTTONS)}")
    elif axes:
        lines.append(
            f"{args.teleop} axes: "
            + ", ".join(f"{i} {name}" for i, name in enumerate(axes))
            + "; buttons: "
            + ", ".join(f"{i} {does}" for i, does in sorted(teleop.BUTTONS.items()))
        )
    else:
        lines.append("the follower copies the leader arm")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import contextlib

    from simreal.errors import ConfigError, SimrealError
    from simreal.hardware.drivers import default_driver, open_robot
    from simreal.hardware.record.recorder import Recorder, dataset_features
    from simreal.robot_spec import load_robot_spec
    from simreal.stop_signal import signal_exit_code

    if args.episodes < 1 or args.episode_s <= 0 or args.reset_s < 0:
        raise ConfigError("--episodes/--episode-s/--reset-s", "need episodes >= 1, episode-s > 0, reset-s >= 0")
    spec = load_robot_spec(args.robot)
    if spec.family not in ("arm", "humanoid", "classic"):
        raise ConfigError(
            "robot",
            f"recording takes joint robots (arms, humanoids); '{spec.name}' is a "
            f"{spec.family}, whose teleoperation is not built",
        )
    name = default_driver(spec.name, args.driver)
    cameras = [_camera(c, args.camera_size) for c in args.camera]
    fps = args.fps or int(round(spec.control_rate_hz))
    if fps < 1:
        raise ConfigError("--fps", f"expected a whole number of frames per second >= 1, got {fps}")
    from simreal.dataset.writer import DatasetWriter

    with contextlib.ExitStack() as stack:
        robot = stack.enter_context(
            open_robot(name, args.robot, _settings(args.settings, "--driver-set"), twin=args.twin, bag=args.bag)
        )
        teleop = stack.enter_context(_teleop(args, robot, stack))
        for cam in cameras:
            stack.enter_context(cam)
        if args.resume:
            writer = DatasetWriter.resume(args.out)
            if args.fps and args.fps != writer.fps:
                raise SimrealError(
                    f"--fps: {args.fps}, and the dataset in {args.out} records at {writer.fps} fps; "
                    "its new episodes take the same rate (leave --fps out)"
                )
            fps = writer.fps
        else:
            writer = DatasetWriter.create(
                args.out, fps=fps, features=dataset_features(robot, cameras), robot_type=spec.name
            )
        stack.callback(writer.close)
        print(banner(args, teleop, fps), file=sys.stderr, flush=True)
        rec = Recorder(
            robot,
            teleop,
            cameras,
            writer,
            fps=fps,
            task=args.task,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
        stats = rec.run(args.episodes, args.episode_s, args.reset_s)
    totals = stats.totals()
    if args.json:
        print(json.dumps({**totals, "interrupted": stats.interrupted, "out": args.out}))
    else:
        print(
            f"recorded {totals['episodes']} episodes, {totals['frames']} frames into {args.out}: "
            f"{totals['late_ticks']} late ticks, {totals['dropped_frames']} dropped frames, "
            f"longest gap between episodes {totals['max_gap_s']:.2f} s"
            + (" (interrupted)" if stats.interrupted else "")
        )
    return signal_exit_code(stats.stopped_by) if stats.interrupted else 0
