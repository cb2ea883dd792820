"""The deploy runner driving a robot through the robot interface, at the control rate.

After the robot's hand-over (``robot.engage()``: arming a flight controller), one loop, one
thread, per period ``dt`` (the runner's control period)::

    s  = robot.observation()          # HardwareError: counted, no state this tick
    runner.on_robot_state(s, s.t_s)   # the runner's watchdog sees the measurement time
    r  = runner.tick(clock())         # observation -> ONNX -> safety layer, at the time it runs
    robot.send_action(full(r.command))  # HardwareError: counted, the loop goes on

``full`` places the bundle's action channels into the robot's actuator order; channels the
bundle does not drive get the action mode's safe command (hold the measured pose). A read
that fails leaves the runner's state to age, so its watchdog puts the safe command on the
wire after ``watchdog.timeout_s``, exactly as a silent DDS topic would (a read must not block
for long: the tick's time is taken after it, and a read that waited the watchdog's timeout every
tick once slowed a silent robot's loop to 8.5 Hz and its watchdog to 0.25 s); a send that fails (the
link is gone: a serial bus unplugged) is counted the same way, so a dead link ends as a watchdog
trip and a report, not an error that skips it. The loop sleeps to
absolute deadlines ``t0 + k dt`` (no drift); a tick that overruns is counted and the next
deadline is the next period boundary after now (no burst of catch-up ticks).

On any exit (duration reached, Ctrl-C, an exception) the runner's shutdown tick (e-stop,
safe command) is sent before the robot disconnects, and ``disconnect()`` sends the safe
command once more.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping

import numpy as np

from simreal.deploy.runner import PolicyRunner, TickResult
from simreal.errors import ConfigError
from simreal.hardware.robot import HardwareError, Robot


class TickTimes:
    """Tick durations in fixed memory, for a loop that runs for days: a histogram with
    :data:`BINS_PER_DECADE` logarithmic bins from 1 us to 10 s (durations outside go to the end
    bins). A quantile is the upper edge of the bin it falls in, so it errs high by less than one
    bin (4.7%)."""

    BINS_PER_DECADE = 50
    LOW_S, DECADES = 1e-6, 7

    def __init__(self) -> None:
        self.counts = np.zeros(self.DECADES * self.BINS_PER_DECADE, np.int64)

    def add(self, seconds: float) -> None:
        k = math.floor(math.log10(max(seconds, self.LOW_S) / self.LOW_S) * self.BINS_PER_DECADE)
        self.counts[min(k, len(self.counts) - 1)] += 1

    def quantile(self, q: float) -> float:
        """The ``q`` quantile [s] (0 before any tick)."""
        n = int(self.counts.sum())
        if n == 0:
            return 0.0
        k = int(np.searchsorted(np.cumsum(self.counts), q * n))
        return self.LOW_S * 10 ** ((k + 1) / self.BINS_PER_DECADE)


@dataclasses.dataclass
class DriveReport:
    """What the loop did; times in [s]."""

    ticks: int = 0
    sent: int = 0
    read_errors: int = 0
    send_errors: int = 0
    overruns: int = 0
    tick_s_max: float = 0.0
    last_error: str = ""
    final_mode: str = ""
    tick_times: TickTimes = dataclasses.field(default_factory=TickTimes, repr=False)
    #: per task input (a teleoperated ``command``): its last value, and per component the value
    #: of largest magnitude over the run (what the device commanded at its most)
    task_input_last: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    task_input_peak: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    def note_task_input(self, given: Mapping[str, np.ndarray]) -> None:
        """Fold one tick's task inputs into :attr:`task_input_last` and :attr:`task_input_peak`."""
        for key, value in given.items():
            v = np.asarray(value, dtype=float).reshape(-1)
            peak = np.asarray(self.task_input_peak.get(key, np.zeros_like(v)), dtype=float)
            self.task_input_last[key] = v.tolist()
            self.task_input_peak[key] = np.where(np.abs(v) > np.abs(peak), v, peak).tolist()

    def tick_p99_s(self) -> float:
        return self.tick_times.quantile(0.99)


def action_index(runner: PolicyRunner, robot: Robot) -> np.ndarray:
    """Indices of the bundle's action channels in the robot's actuator order; refuses a bundle
    for another robot or action mode with one line naming the field."""
    act = runner.bundle.action
    if act.mode != robot.mode.name:
        raise ConfigError(
            "action_mode",
            f"the bundle commands {act.mode}, the {type(robot).__name__} is configured for {robot.mode.name}",
        )
    if runner.spec.name != robot.spec.name:
        raise ConfigError("robot", f"the bundle is for '{runner.spec.name}', the driver drives '{robot.spec.name}'")
    if not robot.mode.joint_space:
        return np.arange(len(robot.names))
    return np.array([robot.names.index(n) for n in act.names])


def drive(
    robot: Robot,
    runner: PolicyRunner,
    *,
    duration_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_tick: Callable[[TickResult, np.ndarray], None] | None = None,
    task_input: Callable[[], Mapping[str, np.ndarray]] | None = None,
    stop: Callable[[], bool] | None = None,
) -> DriveReport:
    """Run ``runner`` on a connected ``robot`` until ``duration_s`` [s] (None: until Ctrl-C) or
    ``stop()`` says so (a signal recorded: the report still comes back); ``on_tick(result, sent)``
    sees every tick (a recorder, a plot); ``task_input()``, read every tick, gives task inputs (a
    teleoperated velocity command, :class:`~simreal.hardware.teleop.teleoperator.VelocityCommand`)."""
    idx = action_index(runner, robot)
    robot.engage()
    dt = runner.cfg.period_s
    report = DriveReport()
    t0 = clock()
    k = 0
    try:
        while (duration_s is None or clock() - t0 < duration_s) and not (stop is not None and stop()):
            t = clock()
            try:
                s = robot.observation()
                runner.on_robot_state(s, float(s.get("t_s", t)))
            except HardwareError as e:
                report.read_errors += 1
                report.last_error = str(e)
            now = clock()  # after the read: the watchdog judges the state's age when the tick runs
            if task_input is not None:
                given = task_input()
                runner.on_task_input(given, now)
                report.note_task_input(given)
            result = runner.tick(now)
            sent = _send(robot, idx, result, report)
            report.ticks += 1
            report.sent += sent is not None
            if on_tick is not None and sent is not None:
                on_tick(result, sent)
            spent = clock() - t
            report.tick_times.add(spent)
            report.tick_s_max = max(report.tick_s_max, spent)
            k += 1
            deadline = t0 + k * dt
            now = clock()
            if now > deadline:
                report.overruns += 1
                k = math.ceil((now - t0) / dt)
                deadline = t0 + k * dt
            sleep(max(0.0, deadline - now))
    finally:
        last = runner.shutdown(clock())
        report.final_mode = last.mode
        _send(robot, idx, last, report)
    return report


def _send(robot: Robot, idx: np.ndarray, result: TickResult, report: DriveReport) -> np.ndarray | None:
    """The tick's command in the robot's actuator order, sent; None when nothing was (a tick that
    publishes nothing, or a send that failed: counted in ``report``)."""
    if not result.publish:
        return None
    u = robot.safe_command()
    u[idx] = result.command
    try:
        return robot.send_action(u)
    except HardwareError as e:
        report.send_errors += 1
        report.last_error = str(e)
        return None
