"""The benchmark harness: conditions x trials of one suite, on the twin or on the real robot.

The same loop for both; only where the robot starts and what the detector sees differ::

    for condition in suite.conditions(values):          # e.g. commanded speeds
        for trial in range(trials):                     # seed = cfg.seed + trial, the same per condition
            twin: reset to its start (jittered by the seed)   real: the operator resets it (a prompt)
            runner = PolicyRunner(bundle + the trial's task inputs)
            drive(robot, runner, duration_s, clock, sleep, on_tick=record)   # hardware.drive
            verdict = suite.detect(recording)           # success, metrics, why not

The recording holds, at every tick that sent a command, the state the detector judges: the
twin's true state (the simulation's ground truth) or the real robot's measured state (all a
robot knows; a suite whose keys the robot does not report is refused before the first trial).
``t`` runs from the first such tick, the hand-over. The trial's task inputs (the goal, the
velocity command) are the bundle's, then the twin's start episode's, then the given ones (the
command line's), then the condition's (:data:`simreal.reference.PLAYABLE_KEYS`).

Per condition: the success rate with its Wilson score interval, and per metric the mean with
Student's t interval over the trials where it is defined (:func:`wilson_interval`,
:func:`mean_interval`; scipy). 75 trials per condition by default, the least SimplerEnv's
maintainers ask for: 68 successes of 75 (0.91) then give the 95 % Wilson interval [0.82, 0.95].
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import numpy as np

from simreal.bundle import Bundle
from simreal.config import field, to_dict
from simreal.deploy.runner import PolicyRunner
from simreal.deploy.sim_gate import stack
from simreal.errors import BundleError, ConfigError
from simreal.hardware.benchmark.suites import Condition, Suite, TrialData
from simreal.hardware.benchmark.trial_video import TrialFilm
from simreal.hardware.drive import drive
from simreal.hardware.robot import HardwareError, Robot, State
from simreal.reference import PLAYABLE_KEYS
from simreal.robot_spec import RobotSpec
from simreal.stop_signal import interrupt_signal

if TYPE_CHECKING:
    from simreal.hardware.benchmark.object_locator import ObjectLocator
    from simreal.hardware.record.cameras import Camera
    from simreal.hardware.sim_twin import TwinConfig

FORMAT = "simreal-benchmark/1"
#: Trials per condition by default: SimplerEnv's maintainers ask for at least 75, not 25.
DEFAULT_TRIALS = 75


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """How many trials of what (see module docstring)."""

    trials: int = field(DEFAULT_TRIALS, min=1, doc="trials per condition")
    seed: int = field(0, doc="trial k uses seed + k (the twin's start jitter and sensor noise)")
    duration_s: float | None = field(None, min=0.1, doc="trial length [s]; None: the suite's")
    values: tuple[float, ...] = field((), doc="the suite's condition values (humanoid-walk: speeds [m/s]); (): its own")
    task: dict[str, Any] = field({}, doc="task inputs for every trial (target_pos_w, command)")
    confidence: float = field(0.95, min=0.5, max=0.999, doc="confidence level of the intervals")
    videos: int = field(0, min=0, doc="trials filmed per condition (the first ones; hardware.trial_video)")


# -- statistics ---------------------------------------------------------------------------------
def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (no continuity correction)::

        (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n),   p = k/n

    unlike the normal interval, inside [0, 1] and not of zero width at k = 0 or k = n."""
    from scipy.stats import binomtest

    ci = binomtest(successes, trials).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval of the mean, mean -+ t_{(1+c)/2, n-1} s / sqrt(n); None below 2 values,
    the point itself when they are all equal (the t statistic is undefined there)."""
    from scipy.stats import ttest_1samp

    x = np.asarray(values, np.float64)
    if x.size < 2:
        return None
    if np.ptp(x) == 0.0:
        return float(x[0]), float(x[0])
    ci = ttest_1samp(x, 0.0).confidence_interval(confidence)
    return float(ci.low), float(ci.high)


def summarize(trials: Sequence[Mapping[str, Any]], confidence: float) -> dict[str, Any]:
    """Success count, rate and Wilson interval, and per metric n, mean, std, median and t interval."""
    n = len(trials)
    k = sum(bool(t["success"]) for t in trials)
    out: dict[str, Any] = {
        "success": {
            "k": k,
            "n": n,
            "rate": k / n if n else None,
            "ci": list(wilson_interval(k, n, confidence)) if n else None,
        }
    }
    names = list(trials[0]["metrics"]) if trials else []
    metrics = {}
    for name in names:
        x = [t["metrics"][name] for t in trials if t["metrics"].get(name) is not None]
        ci = mean_interval(x, confidence)
        metrics[name] = {
            "n": len(x),
            "mean": float(np.mean(x)) if x else None,
            "std": float(np.std(x, ddof=1)) if len(x) > 1 else None,
            "median": float(np.median(x)) if x else None,
            "ci": None if ci is None else list(ci),
        }
    out["metrics"] = metrics
    return out


# -- where trials run ---------------------------------------------------------------------------
class Bench(Protocol):
    """Where trials run: the robot and its clock, how a trial starts, what the detector sees."""

    kind: str  # "twin" or "real"
    robot: Robot
    clock: Callable[[], float]  # [s]
    sleep: Callable[[float], None]  # [s]

    def task_inputs(self) -> dict[str, np.ndarray]:
        """Task inputs of where the robot starts (a goal the twin's task episode sampled)."""

    def state_keys(self) -> set[str]:
        """The state keys :meth:`state` will report (the robot is connected)."""

    def begin(self, label: str, seed: int) -> bool:
        """Put the robot at its start for a trial; False: stop the benchmark."""

    def show(self, task: Mapping[str, np.ndarray]) -> None:
        """Put the trial's task in the scene its frames show (the goal marker); a real robot's
        camera sees the real scene, so nothing there."""

    def state(self) -> State:
        """The state the detector judges, now."""

    def unjudgeable(self) -> str | None:
        """Why the trial that just ran cannot be judged (it fails with that reason), or None."""

    def describe(self) -> dict[str, Any]:
        """What ran, for the results (twin settings, driver and its config)."""

    def frames(self) -> Callable[[], np.ndarray] | None:
        """A source of the scene's current image (RGB, for trial videos); None: no camera."""


class TwinBench:
    """Trials on the simulated twin (:class:`simreal.hardware.sim_twin.SimTwin`), in simulated time."""

    kind = "twin"

    def __init__(self, bundle: Bundle, twin_cfg: TwinConfig | None = None):
        from simreal.hardware.sim_twin import SimTwin, TwinConfig

        self.twin_cfg = twin_cfg or TwinConfig()
        self.robot = SimTwin(bundle, self.twin_cfg)
        self.clock, self.sleep = self.robot.clock, self.robot.sleep
        self._camera: Callable[[], np.ndarray] | None = None

    def task_inputs(self) -> dict[str, np.ndarray]:
        return self.robot.task_inputs

    def state_keys(self) -> set[str]:
        return set(self.robot.true_state())

    def begin(self, label: str, seed: int) -> bool:
        self.robot.reset(seed)
        return True

    def show(self, task: Mapping[str, np.ndarray]) -> None:
        """The task env's markers (``mocap_pos``: arm-reach's goal sphere) where ``task`` puts them."""
        env, sim = self.robot.rehearsal.env, self.robot.sim
        if env is not None and sim.m.nmocap:
            sim.d.mocap_pos[:] = np.asarray(env.mocap_pos(dict(task)), np.float64).reshape(sim.m.nmocap, 3)

    def state(self) -> State:
        return self.robot.true_state()

    def unjudgeable(self) -> str | None:
        """The twin's simulation diverged: MuJoCo put it back at its start, which is not where the
        policy took it (:class:`~simreal.deploy.sim_robot.SimRobot`)."""
        t = self.robot.sim.diverged_s
        return None if t is None else f"the simulation diverged at {t:.3f} s (MuJoCo reset it)"

    def describe(self) -> dict[str, Any]:
        return {"twin": to_dict(self.twin_cfg)}

    def frames(self) -> Callable[[], np.ndarray]:
        """The twin rendered by MuJoCo (:class:`~simreal.hardware.benchmark.trial_video.TwinCamera`)."""
        if self._camera is None:
            from simreal.hardware.benchmark.trial_video import TwinCamera

            sim = self.robot.sim
            self._camera = TwinCamera(sim.m, lambda: self.robot.sim.d, sim.free)
        return self._camera


class RealBench:
    """Trials on a connected robot driver, in real time; ``ask`` prompts the operator before each
    trial (None: run without asking, ``--yes``) and an answer ``q`` (or end of input) stops."""

    kind = "real"

    def __init__(
        self,
        robot: Robot,
        driver: str,
        ask: Callable[[str], str] | None = input,
        camera: Camera | None = None,
        locator: ObjectLocator | None = None,
    ):
        self.robot, self.driver, self.ask, self.camera, self.locator = robot, driver, ask, camera, locator
        self.clock, self.sleep = time.monotonic, time.sleep

    def task_inputs(self) -> dict[str, np.ndarray]:
        return {}

    def state_keys(self) -> set[str]:
        return set(self.robot.observation()) - {"t_s"} | ({"object_pos_w"} if self.locator else set())

    def show(self, task: Mapping[str, np.ndarray]) -> None:
        pass

    def begin(self, label: str, seed: int) -> bool:
        if self.ask is None:
            return True
        try:
            answer = self.ask(f"{label}: put the robot at its start, then Enter to run (q to stop): ")
        except EOFError:
            return False
        return answer.strip().lower() != "q"

    def state(self) -> State:
        """The robot's last measured state; with a locator, ``object_pos_w`` from the camera's
        newest frame (NaN while the object is not seen)."""
        s = dict(self.robot.last_state or {})
        if self.locator is not None:
            if self.camera is None:
                raise HardwareError("RealBench: an object locator reads a camera, and none was given")
            seen = self.locator(self.camera.read().image)
            s["object_pos_w"] = np.full(3, np.nan) if seen is None else seen
        return s

    def unjudgeable(self) -> str | None:
        return None

    def describe(self) -> dict[str, Any]:
        return {
            "driver": self.driver,
            "driver_class": type(self.robot).__name__,
            "driver_config": to_dict(self.robot.config),
        }

    def frames(self) -> Callable[[], np.ndarray] | None:
        """The newest frame of the scene camera (connected by the caller), if there is one."""
        camera = self.camera
        return None if camera is None else lambda: camera.read().image


# -- the harness --------------------------------------------------------------------------------
def trial_task(
    bundle: Bundle, start: Mapping[str, Any], condition: Condition, given: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """The task inputs of a trial: the bundle's, the start episode's, the given ones, the
    condition's (later wins); task inputs only (:data:`~simreal.reference.PLAYABLE_KEYS`)."""
    merged = {**bundle.task_params, **start, **given, **condition.task}
    return {k: np.asarray(v, np.float64).reshape(-1) for k, v in merged.items() if k in PLAYABLE_KEYS}


def check_inputs(
    suite: Suite,
    bundle: Bundle,
    task: Mapping[str, np.ndarray],
    given: Mapping[str, Any],
    state_keys: set[str],
    kind: str,
) -> None:
    """One line, before the first trial, for a task input or a state key the suite lacks."""
    for k in given:
        if k not in PLAYABLE_KEYS:
            raise ConfigError(f"--task-param {k}", f"not a task input; valid: {', '.join(PLAYABLE_KEYS)}")
    for k in suite.task_inputs:
        if k not in task:
            raise BundleError(
                "task_params",
                f"suite {suite.name} needs the task input {k}, which neither the bundle "
                f"nor its task gives; pass --task-param {k}=[...]",
                str(bundle.path / "bundle.yaml"),
            )
    computable = {"ee_pos_w"} if "joint_pos" in state_keys else set()  # forward kinematics of the joints
    missing = sorted(set(suite.needs) - state_keys - computable)
    if missing:
        raise HardwareError(
            f"suite {suite.name} judges {', '.join(missing)}, which the {kind} robot does not report "
            f"(it reports {', '.join(sorted(state_keys))})"
        )


def run_trial(
    bench: Bench,
    suite: Suite,
    bundle: Bundle,
    spec: RobotSpec,
    task: Mapping[str, np.ndarray],
    duration_s: float,
    overrides: Mapping[str, Any] | None,
    kinematics: dict[str, Any],
    film: TrialFilm | None = None,
) -> dict[str, Any]:
    """One trial on a robot already at its start: drive it, record, detect (see module
    docstring); ``film`` takes the trial's frames, timed from the hand-over."""
    runner_bundle = dataclasses.replace(
        bundle, task_params={**bundle.task_params, **{k: v.tolist() for k, v in task.items()}}
    )
    runner = PolicyRunner(runner_bundle, overrides=overrides)
    samples: list[tuple[float, State]] = []

    def record(result: Any, sent: np.ndarray) -> None:
        s = bench.state()
        s.pop("t_s", None)
        samples.append((result.t_s, s))
        if film is not None:
            film.tick(result.t_s - samples[0][0])

    wall = time.perf_counter()
    report = drive(bench.robot, runner, duration_s=duration_s, clock=bench.clock, sleep=bench.sleep, on_tick=record)
    wall = time.perf_counter() - wall
    drive_info = {
        "ticks": report.ticks,
        "overruns": report.overruns,
        "read_errors": report.read_errors,
        "final_mode": report.final_mode,
        "envelope_trip": runner.stats.envelope_trip or None,
        "wall_s": round(wall, 4),
    }
    why = bench.unjudgeable() or (None if samples else "no command was sent (no state arrived)")
    if why:
        return {"success": False, "reason": why, "metrics": {}, **drive_info}
    t0 = samples[0][0]
    traj = stack([(t - t0, s) for t, s in samples])
    if "ee_pos_w" in suite.needs and "ee_pos_w" not in traj:
        from simreal.hardware.sim_twin import end_effector_w
        from simreal.sim.robots import build_model

        if "model" not in kinematics:  # built once per benchmark
            kinematics["model"] = build_model(spec)
        traj["ee_pos_w"] = end_effector_w(spec, traj["joint_pos"], kinematics["model"])
    fence = runner.cfg.envelope
    data = TrialData(
        traj,
        task,
        bundle,
        spec,
        (np.asarray(fence.geofence_min_m), np.asarray(fence.geofence_max_m)),
        duration_s,
        runner.cfg.period_s,
    )
    v = suite.detect(data)
    return {"success": bool(v.success), "reason": v.reason, "metrics": v.metrics, **drive_info}


class ProgressLine:
    """One line per trial on ``stream``: the trial, its result, the running success count, rate and ETA."""

    def __init__(self, total: int, stream: TextIO | None = None):
        self.total, self.stream, self.t0, self.done = total, stream or sys.stderr, time.monotonic(), 0

    def __call__(self, label: str, result: Mapping[str, Any], k: int, n: int) -> None:
        from simreal.progress import fmt_time

        self.done += 1
        rate = self.done / max(time.monotonic() - self.t0, 1e-9)
        outcome = "pass" if result["success"] else f"FAIL ({result['reason']})" if result["reason"] else "FAIL"
        self.stream.write(
            f"{label}: {outcome} | {k}/{n} passed | {rate:.2f} trials/s | "
            f"ETA {fmt_time((self.total - self.done) / rate)}\n"
        )
        self.stream.flush()


def run_benchmark(
    suite: Suite,
    bundle: Bundle,
    spec: RobotSpec,
    bench: Bench,
    cfg: BenchmarkConfig = BenchmarkConfig(),
    *,
    overrides: Mapping[str, Any] | None = None,
    progress: Callable[[str, Mapping[str, Any], int, int], None] | None = None,
    video_dir: Path | None = None,
) -> dict[str, Any]:
    """All conditions x trials of ``suite`` on ``bench`` (a :class:`TwinBench` or a
    :class:`RealBench`; its robot is connected for the run and disconnected after it); returns
    the results (JSON-able; per condition :func:`summarize`). Task inputs and state keys the
    suite lacks are refused before the first trial; a run the operator stops, or Ctrl-C during a
    trial (that trial is dropped), keeps the trials run so far (``complete: false``;
    ``interrupted: true`` after Ctrl-C, SIGTERM or SIGHUP, ``stopped_by`` naming the signal).
    With ``video_dir`` and a frame source, the first ``cfg.videos`` trials of each condition are
    filmed into it (a trial's ``video`` entry)."""
    conditions = suite.conditions(cfg.values)
    duration = cfg.duration_s or suite.duration_s(bundle)
    if duration <= suite.settle_s(bundle):
        raise ConfigError(
            "duration_s",
            f"suite {suite.name} judges from {suite.settle_s(bundle):g} s on; a trial of "
            f"{duration:g} s ends before that",
        )
    grab = bench.frames() if video_dir is not None and cfg.videos else None
    start = bench.task_inputs()
    tasks = [trial_task(bundle, start, c, cfg.task) for c in conditions]
    t_start = time.monotonic()
    kinematics: dict[str, Any] = {}
    ran: list[tuple[Any, dict[str, np.ndarray], list[dict[str, Any]]]] = []  # per condition begun: its trials
    complete, stopped_by = True, None
    with bench.robot:
        keys = bench.state_keys()
        for task in tasks:
            check_inputs(suite, bundle, task, cfg.task, keys, bench.kind)
        try:  # Ctrl-C anywhere (a trial, its reset, its video): drive() sent the safe command; keep what finished
            for cond, task in zip(conditions, tasks):
                trials: list[dict[str, Any]] = []
                ran.append((cond, task, trials))
                for i in range(cfg.trials):
                    label = f"[{suite.name} {bench.kind}] {cond.name} trial {i + 1}/{cfg.trials}"
                    if not bench.begin(label, cfg.seed + i):
                        complete = False
                        break
                    bench.show(task)
                    film = TrialFilm(grab) if grab is not None and i < cfg.videos else None
                    r = {
                        "trial": i,
                        "seed": cfg.seed + i,
                        **run_trial(bench, suite, bundle, spec, task, duration, overrides, kinematics, film),
                    }
                    trials.append(r)  # finished: kept, with its video only once that is written whole
                    if film is not None and film.frames:
                        assert video_dir is not None  # a film only when grab is, which needs video_dir
                        stem = f"{suite.name}_{bench.kind}_{cond.name}_trial{i}".replace(" ", "_").replace("/", "_")
                        r["video"] = film.save(video_dir / "videos" / f"{stem}.mp4")
                    if progress is not None:
                        progress(label, r, sum(t["success"] for t in trials), len(trials))
                if not complete:
                    break
        except KeyboardInterrupt as e:
            complete, stopped_by = False, interrupt_signal(e)
    results = [
        {
            "name": cond.name,
            "task": {k: v.tolist() for k, v in task.items()},
            "trials": trials,
            **summarize(trials, cfg.confidence),
        }
        for cond, task, trials in ran
    ]
    return {
        "format": FORMAT,
        "suite": suite.name,
        "family": suite.family,
        "summary": suite.summary,
        "robot": bench.kind,
        **bench.describe(),
        "bundle": str(bundle.path),
        "bundle_robot": bundle.robot,
        "bundle_task": bundle.task,
        "axis": suite.axis or None,
        "duration_s": duration,
        "config": to_dict(cfg),
        "conditions": results,
        "complete": complete,
        "interrupted": stopped_by is not None,
        "stopped_by": stopped_by,
        "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_s": round(time.monotonic() - t_start, 3),
    }


def summary_lines(results: Mapping[str, Any]) -> list[str]:
    """Per condition: successes, rate and interval, and each metric's mean and interval."""
    pct = round(100 * results["config"]["confidence"])
    lines = []
    for c in results["conditions"]:
        s = c["success"]
        if not s["n"]:
            lines.append(f"{c['name']}: no trials")
            continue
        lo, hi = s["ci"]
        parts = [f"{c['name']}: {s['k']}/{s['n']} succeeded, {s['rate']:.3f} [{lo:.3f}, {hi:.3f}] (Wilson {pct} %)"]
        for name, m in c["metrics"].items():
            if m["mean"] is not None:
                ci = "" if m["ci"] is None else f" [{m['ci'][0]:.4g}, {m['ci'][1]:.4g}]"
                parts.append(f"{name} {m['mean']:.4g}{ci} (n={m['n']})")
        lines.append("; ".join(parts))
    return lines
