"""Benchmark a policy bundle on its simulated twin or on the real robot, and report.

    # 75 trials (the default) of the hover suite on the twin, results + report into bench/
    simreal benchmark quadrotor-hover --policy runs/quadrotor-hover/RUN/bundle --robot twin --out bench_results/

    # walking at three commanded speeds, 20 trials each, 10 ms actuation latency
    simreal benchmark humanoid-walk --policy BUNDLE --robot twin --conditions 0,0.5,1.0 --trials 20 --latency-ms 10

    # reach a given goal (a task input the bundle does not fix): an SO-100 goal here; keep it
    # inside the goals the policy trained on (arm-reach: the home hand position +- goal_half_extent_m,
    # about [0.31, 0, 0.49] +- [0.15, 0.15, 0.1] for a Franka), or expect the policy to miss it
    simreal benchmark arm-reach --policy BUNDLE --robot twin --task-param target_pos_w=[0.25,0.0,0.15]

    # the same suite on the robot: the operator resets it before each trial (--yes: no prompt)
    simreal benchmark arm-reach --policy BUNDLE --robot real --driver so100 --driver-set port=/dev/ttyACM0 \\
        --task-param target_pos_w=[0.25,0.0,0.15] --trials 30 --out bench_results/

    # twin and real side by side: Markdown + PNG plots
    simreal benchmark report bench_results/arm-reach_twin.json bench_results/arm-reach_real.json --out report/

Suites (simreal.hardware.benchmark.suites): quadrotor-hover, quadrotor-figure8, humanoid-walk,
humanoid-track, arm-reach, arm-push, arm-pick. Each trial runs the bundle through the deploy
runner and the safety layer at the control rate (simreal.hardware.drive); the twin runs in
simulated time, deterministic per --seed. Results: per condition the success rate with its
Wilson interval and each metric's mean with its t interval; ``--out DIR`` writes
``DIR/<suite>_<robot>.json`` and a report of the run, with the first trial of each condition
filmed into ``DIR/videos`` (``--videos N``: the first N; the twin rendered by MuJoCo, a real
robot through ``--camera``), ``--json`` prints the results. A progress
line per trial goes to stderr. Ctrl-C stops after the trial running (which is dropped, the robot
given its safe command) and still writes the finished trials' results and report. Exit 0 when
the benchmark ran (whatever its success rate), 128 + the signal when interrupted (130 Ctrl-C,
143 SIGTERM, 129 SIGHUP), 2 on a bad suite, bundle or flag.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simreal.config import seed_arg
from simreal.stop_signal import signal_exit_code

HELP = "benchmark a bundle on its twin or the real robot (success rates with intervals), and report"

#: Flags -> the config keys they set (a bad value names the flag typed).
FLAGS = {
    "trials": "--trials",
    "seed": "--seed",
    "duration_s": "--duration",
    "values": "--conditions",
    "task": "--task-param",
    "noise_scale": "--noise",
    "latency_ms": "--latency-ms",
    "videos": "--videos",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("suite", help="suite name (quadrotor-hover, humanoid-walk, arm-reach, ...), or 'report'")
    p.add_argument("results", nargs="*", default=[], help="with 'report': the result JSON files to put side by side")
    p.add_argument("--policy", metavar="BUNDLE", help="bundle folder (policy.onnx + bundle.yaml)")
    p.add_argument(
        "--robot",
        choices=("twin", "real"),
        default="twin",
        help="twin: the MuJoCo twin in simulated time; real: a robot driver (--driver)",
    )
    p.add_argument("--trials", type=int, default=None, help="trials per condition (default 75)")
    p.add_argument("--seed", type=seed_arg, default=0, help="trial k uses seed + k")
    p.add_argument("--duration", type=float, default=None, help="trial length [s] (default: the suite's)")
    p.add_argument("--conditions", help="the suite's condition values, comma-separated (humanoid-walk: speeds [m/s])")
    p.add_argument(
        "--task-param",
        dest="task_params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a task input for every trial, e.g. target_pos_w=[0.3,0,0.2] or command=[0.5,0,0]",
    )
    p.add_argument(
        "--deploy-set",
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a deploy config override, e.g. --deploy-set watchdog.timeout_s=0.05 (repeatable; --set: the old "
        "spelling, kept for one release)",
    )
    p.add_argument("--noise", type=float, default=None, help="twin: sensor noise scale (default 1; 0 = none)")
    p.add_argument("--latency-ms", type=float, default=None, help="twin: actuation latency [ms] (default 0)")
    p.add_argument("--driver", help="real: the driver's name in the drivers table (simreal.hardware.drivers)")
    p.add_argument(
        "--driver-set",
        "--driver-config",
        dest="driver_config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="real: one field of the driver's config (port, address, ...), repeatable (--driver-config: the old "
        "spelling, kept for one release)",
    )
    p.add_argument("--yes", action="store_true", help="real: do not ask the operator before each trial")
    p.add_argument("--out", help="folder for the results JSON and the report")
    p.add_argument(
        "--videos",
        type=int,
        default=None,
        help="trials filmed per condition into OUT/videos (mp4 + a contact sheet in the report); "
        "default 1 with --out (the twin rendered by MuJoCo; a real robot needs --camera), 0: none",
    )
    p.add_argument(
        "--camera", metavar="SOURCE", help="real: the scene camera that films trials (device index, file or stream URL)"
    )
    p.add_argument(
        "--locate-object",
        metavar="CALIBRATION",
        help="real: judge object_pos_w from --camera "
        "(a calibration YAML: intrinsics, the camera's pose, the object's colour; hardware.object_locator)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")


def run(args: argparse.Namespace) -> int:
    if args.suite == "report":
        return _report(args)
    return _benchmark(args)


def _report(args: argparse.Namespace) -> int:
    from simreal.errors import SimrealError
    from simreal.hardware.benchmark.report import load_results, write_report

    if not args.results or not args.out:
        raise SimrealError(
            "report: give the result JSON files and --out DIR, e.g. "
            "simreal benchmark report twin.json real.json --out report/"
        )
    path = write_report(load_results(args.results), args.out)
    print(f"wrote {path}")
    return 0


def _config(cls: type, tree: dict[str, Any]) -> Any:
    """Build ``cls`` from flag values; a bad one is one line naming the flag."""
    from simreal.config import build
    from simreal.errors import ConfigError, SimrealError

    try:
        return build(cls, tree)
    except ConfigError as e:
        flag = FLAGS[e.key.split(".")[0].split("[")[0]]
        raise SimrealError(f"{flag}: {str(e).split(': ', 1)[1]}") from None


def _values(text: str | None) -> tuple[float, ...]:
    from simreal.errors import SimrealError

    if text is None:
        return ()
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise SimrealError(f"--conditions: expected numbers separated by commas, got {text!r}") from None


def _benchmark(args: argparse.Namespace) -> int:
    from simreal.bundle import load_bundle
    from simreal.config import parse_overrides, task_params_arg
    from simreal.deploy.config import spec_of_bundle
    from simreal.deploy.runner import PolicyRunner
    from simreal.errors import ConfigError, SimrealError
    from simreal.hardware.benchmark.harness import BenchmarkConfig, ProgressLine, run_benchmark, summary_lines
    from simreal.hardware.benchmark.suites import SUITES, suite_for

    if args.results:
        raise SimrealError(f"unexpected arguments {args.results}; only 'report' takes result files")
    if not args.policy:
        raise SimrealError("--policy BUNDLE is required (the bundle to benchmark)")
    bundle = load_bundle(args.policy)
    spec = spec_of_bundle(bundle)
    suite = suite_for(args.suite, bundle, spec)
    values = _values(args.conditions)
    if values and not suite.axis:
        swept = ", ".join(f"{n} ({s.axis})" for n, s in SUITES.items() if s.axis)
        raise SimrealError(f"--conditions: suite {suite.name} has one condition; suites with conditions: {swept}")
    videos = args.videos if args.videos is not None else (1 if args.out else 0)
    if videos and not args.out:
        raise SimrealError("--videos: needs --out DIR (the videos go to DIR/videos)")
    tree = {
        "seed": args.seed,
        "values": list(values),
        "task": task_params_arg(args.task_params),
        "videos": videos,
        **({"trials": args.trials} if args.trials is not None else {}),
        **({"duration_s": args.duration} if args.duration is not None else {}),
    }
    cfg = _config(BenchmarkConfig, tree)
    overrides = parse_overrides(args.overrides)
    PolicyRunner(bundle, overrides=overrides)  # the graph and the deploy config, checked before any trial
    n_total = cfg.trials * len(suite.conditions(cfg.values))
    with contextlib.ExitStack() as stack:
        bench = _twin(args, bundle, cfg.task) if args.robot == "twin" else stack.enter_context(_real(args, bundle))
        try:
            results = run_benchmark(
                suite,
                bundle,
                spec,
                bench,
                cfg,
                overrides=overrides,
                progress=ProgressLine(n_total),
                video_dir=Path(args.out) if args.out else None,
            )
        except ConfigError as e:  # a setting of this command: name its flag
            if e.key not in FLAGS:
                raise
            raise SimrealError(f"{FLAGS[e.key]}: {str(e).split(': ', 1)[1]}") from None
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(
            f"{suite.name} on the {bench.kind}, trials of {results['duration_s']:g} s (ran {results['wall_s']:.1f} s "
            f"in all): {suite.summary}"
        )
        print("\n".join(summary_lines(results)))
    if args.out:
        from simreal.hardware.benchmark.report import write_report
        from simreal.yaml_io import atomic_write_text

        path = Path(args.out) / f"{suite.name}_{bench.kind}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(results, indent=2))
        report = write_report([(bench.kind, {**results, "file": str(path)})], args.out)
        print(f"wrote {path} and {report}", file=sys.stderr if args.json else sys.stdout)
    if results["interrupted"]:
        done = sum(len(c["trials"]) for c in results["conditions"])
        print(
            f"simreal benchmark: interrupted; kept the {done} finished trials (the one running was dropped)",
            file=sys.stderr,
        )
        return signal_exit_code(results["stopped_by"])
    return 0


def _twin(args: argparse.Namespace, bundle: Any, task: dict[str, Any]) -> Any:
    """The twin, built with the given task inputs (a hover target moves its start)."""
    import dataclasses

    from simreal.dependencies import require
    from simreal.errors import SimrealError
    from simreal.hardware.benchmark.harness import TwinBench
    from simreal.hardware.sim_twin import TwinConfig

    if args.driver or args.driver_config or args.camera or args.locate_object:
        raise SimrealError("--driver, --driver-set, --camera and --locate-object are for --robot real")
    require("mujoco")  # the twin needs it: said here, not as a traceback
    tree = {
        "seed": args.seed,
        **({"noise_scale": args.noise} if args.noise is not None else {}),
        **({"latency_ms": args.latency_ms} if args.latency_ms is not None else {}),
    }
    return TwinBench(dataclasses.replace(bundle, task_params={**bundle.task_params, **task}), _config(TwinConfig, tree))


@contextlib.contextmanager
def _real(args: argparse.Namespace, bundle: Any) -> Iterator[Any]:
    """The robot of --driver from the drivers table (simreal.hardware.drivers), configured by
    --driver-set, connected for the benchmark."""
    from simreal.config import parse_overrides
    from simreal.errors import SimrealError
    from simreal.hardware.benchmark.harness import RealBench

    if args.noise is not None or args.latency_ms is not None:
        raise SimrealError("--noise and --latency-ms are for --robot twin (a real robot has its own)")
    if not args.driver:
        raise SimrealError("--robot real needs --driver NAME (and --driver-set KEY=VALUE for its port or address)")
    from simreal.hardware.drivers import open_robot

    settings = {"action_mode": bundle.action.mode, **parse_overrides(args.driver_config)}
    locator = None
    if args.locate_object:
        from simreal.hardware.benchmark.object_locator import ObjectLocator, load_calibration

        if args.camera is None:
            raise SimrealError("--locate-object needs --camera SOURCE (the calibrated camera)")
        locator = ObjectLocator(load_calibration(args.locate_object))
    with contextlib.ExitStack() as stack:
        camera = None
        if args.camera is not None:
            from simreal.hardware.record.cameras import OpenCVCamera

            source = int(args.camera) if args.camera.isdigit() else args.camera
            size = (locator.cal.width, locator.cal.height) if locator else (640, 480)
            camera = stack.enter_context(OpenCVCamera("scene", source, *size))
        robot = stack.enter_context(open_robot(args.driver, bundle.robot, settings))
        yield RealBench(robot, args.driver, ask=None if args.yes else input, camera=camera, locator=locator)
