"""A robot's simulated twin behind the robot interface, in simulated time.

The MuJoCo robot of the rehearsal (:func:`simreal.deploy.sim_loop.setup`: the bundle's task
scene and first episode when the bundle records its task, else the robot spec's model) as a
:class:`~simreal.hardware.robot.Robot`, so anything that drives a robot (the deploy runner
through :func:`simreal.hardware.drive.drive`, the benchmark harness) drives the twin unchanged::

    twin = SimTwin(load_bundle("bundle/"), TwinConfig(latency_ms=10))
    with twin:
        drive(twin, PolicyRunner(bundle), duration_s=10.0, clock=twin.clock, sleep=twin.sleep)
    twin.true_state()["pos_w"]

- ``_read`` is the measured state: the true state plus the rehearsal's Gaussian sensor noise
  (:data:`simreal.deploy.sim_robot.NOISE_STD` times ``noise_scale``), from a generator seeded
  by :meth:`SimTwin.reset`, stamped ``t_s`` with the simulated clock.
- ``_write`` applies the command ``latency_ms`` later (rounded to whole physics steps); until
  the first command is applied the robot is held at its start (hover thrust in the air, a
  gantry), the hand-over of the rehearsal.
- :meth:`SimTwin.clock` is the simulated time [s]; :meth:`SimTwin.sleep` advances the physics
  by the whole steps that fit in the requested time, so a control loop's deadlines fall on
  physics steps at or before them (no tick is skipped) and a run is deterministic per seed
  and as fast as the CPU steps MuJoCo.
- :meth:`SimTwin.true_state` is the simulation's state for success detectors, with the
  ``end_effector`` site's world position ``ee_pos_w`` [m] where the model has one.
- Where the simulation diverged (MuJoCo reset a state gone NaN or past 1e10:
  ``twin.sim.diverged_s``) every read raises HardwareError, as a robot whose state stream
  stopped: the driver counts it and the runner's watchdog commands the safe action.

:meth:`SimTwin.reset` puts the twin back at its start for a new trial, the start jittered per
seed (``start_jitter_m`` for a quadrotor's position, ``start_jitter_rad`` for joints), so trials
differ as a robot put back by hand does. Needs MuJoCo (the simulation side).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any

import numpy as np

from simreal.bundle import Bundle
from simreal.config import field
from simreal.deploy.sim_robot import FAMILIES, SimRobot, StartState, with_joints
from simreal.hardware.robot import HardwareError, Robot, RobotConfig, State, time_stamp
from simreal.observations import EE_SITE
from simreal.robot_spec import RobotSpec


@dataclasses.dataclass(frozen=True)
class TwinConfig:
    """How the twin differs from a perfect robot."""

    noise_scale: float = field(1.0, min=0.0, doc="sensor noise scale (deploy.sim_robot.NOISE_STD at 1; 0 = none)")
    latency_ms: float = field(0.0, min=0.0, doc="actuation delay, rounded to whole physics steps [ms]")
    start_jitter_m: float = field(
        0.05, min=0.0, doc="quadrotor start position offset per trial, uniform +- per axis [m]"
    )
    start_jitter_rad: float = field(0.02, min=0.0, doc="joint start offset per trial, uniform +- [rad]")
    seed: int = field(0, doc="the task episode the twin starts from (bundles that record their task)")


class SimTwin(Robot):
    """The bundle's robot in MuJoCo behind the robot interface (see module docstring)."""

    families = tuple(FAMILIES)

    def __init__(self, bundle: Bundle, cfg: TwinConfig = TwinConfig()):
        from simreal.deploy.config import spec_of_bundle
        from simreal.deploy.sim_loop import SimLoopConfig, setup

        spec = spec_of_bundle(bundle)
        super().__init__(RobotConfig(robot=spec.name, action_mode=bundle.action.mode), spec)
        self.twin_cfg = cfg
        self.rehearsal = setup(bundle, spec, SimLoopConfig(seed=cfg.seed))
        model = self.rehearsal.robot.m
        self.dt = float(model.opt.timestep)
        self._delay_steps = round(cfg.latency_ms / 1e3 / self.dt)
        # the simulated robot takes the bundle's channels; the interface sends every actuator
        self._channels = (
            np.array([self.names.index(n) for n in bundle.action.names])
            if self.mode.joint_space
            else np.arange(len(self.names))
        )
        self.reset(cfg.seed)

    @property
    def task_inputs(self) -> dict[str, np.ndarray]:
        """The fixed task inputs of the start episode (a goal the task sampled), by robot-state key."""
        return dict(self.rehearsal.start.task)

    def reset(self, seed: int) -> None:
        """Back to the (jittered) start with the clock at 0, held until the first command; the
        jitter and the sensor noise come from ``seed``."""
        self.rng = np.random.default_rng(seed)
        r = self.rehearsal.robot
        self.sim = SimRobot(r.m, self.spec, r.mode, r.names, self._start(self.rng))
        self._pending: collections.deque[tuple[int, np.ndarray]] = collections.deque()
        self._steps = 0
        self._handed_over = False
        self.last_state = None

    def _start(self, rng: np.random.Generator) -> StartState:
        start, model = self.rehearsal.start, self.rehearsal.robot.m
        family = FAMILIES[self.spec.family]
        qpos = start.qpos.copy()
        if family.hover_hold:
            qpos[0:3] += rng.uniform(-1.0, 1.0, 3) * self.twin_cfg.start_jitter_m
        if family.joints:
            q = self.rehearsal.robot.true_state()["joint_pos"]
            q = q + rng.uniform(-1.0, 1.0, q.shape) * self.twin_cfg.start_jitter_rad
            lo = [a.range[0] if a.range else -np.inf for a in self.spec.actuators]
            hi = [a.range[1] if a.range else np.inf for a in self.spec.actuators]
            qpos = with_joints(model, self.spec, qpos, np.clip(q, lo, hi))
        return dataclasses.replace(start, qpos=qpos)

    # -- the simulated clock -------------------------------------------------------------------
    def clock(self) -> float:
        """Simulated time since the last reset [s]."""
        return self.sim.time_s

    def sleep(self, s: float) -> None:
        """Advance the physics by the whole steps that fit in ``s`` [s] (the 1e-6 absorbs the
        float error of deadlines computed as sums)."""
        for _ in range(max(0, math.floor(s / self.dt + 1e-6))):
            self._apply_due()
            if not self._handed_over:
                self.sim.hold()
            self.sim.step()
            self._steps += 1

    def _apply_due(self) -> None:
        while self._pending and self._pending[0][0] <= self._steps:
            self.sim.apply(self._pending.popleft()[1])
            self._handed_over = True

    # -- state -----------------------------------------------------------------------------------
    def true_state(self) -> State:
        """The simulation's robot-state keys (``ee_pos_w`` [m] among them where the model has the site)."""
        return self.sim.true_state()

    # -- the robot interface ---------------------------------------------------------------------
    def _open(self) -> None:
        pass

    def _close(self) -> None:
        pass

    def _read(self) -> State:
        if self.sim.diverged_s is not None:  # a robot whose state stream stopped: the runner's watchdog takes over
            raise HardwareError(
                f"{self.spec.name} twin: the simulation diverged at {self.sim.diverged_s:.3f} s "
                f"(MuJoCo reset a state gone NaN or past 1e10); reset() it for a new trial"
            )
        s = self.sim.measured_state(self.rng, self.twin_cfg.noise_scale)
        s["t_s"] = time_stamp(self.clock())
        return s

    def _write(self, u: np.ndarray) -> np.ndarray:
        self._pending.append((self._steps + self._delay_steps, u[self._channels].copy()))
        self._apply_due()  # no latency: in force from the next physics step on
        return u


def end_effector_w(spec: RobotSpec, joint_pos: np.ndarray, model: Any = None) -> np.ndarray:
    """World positions (T, 3) [m] of the ``end_effector`` site for joint positions (T, n) in the
    spec's actuator order [rad]: forward kinematics of ``model`` (default: the spec's own), for
    a real arm whose driver reports joints only. Raises ConfigError without the site."""
    import mujoco

    from simreal.errors import ConfigError
    from simreal.sim.robots import build_model

    m = model if model is not None else build_model(spec)
    site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, EE_SITE)
    if site < 0:
        raise ConfigError("model", f"robot '{spec.name}' has no '{EE_SITE}' site to measure the end effector at")
    d = mujoco.MjData(m)
    out = np.zeros((len(joint_pos), 3))
    for k, q in enumerate(np.asarray(joint_pos, np.float64)):
        d.qpos[:] = with_joints(m, spec, m.qpos0, q)
        mujoco.mj_kinematics(m, d)
        out[k] = d.site_xpos[site]
    return out
