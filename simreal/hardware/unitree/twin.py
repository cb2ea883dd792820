"""The Unitree twin: a MuJoCo G1 / H1 that speaks ``rt/lowstate`` and ``rt/lowcmd`` as the robot does.

What Unitree's own simulator (unitree_mujoco's ``unitree_sdk2_bridge``) does, on the same
wire as :class:`simreal.hardware.unitree.driver.UnitreeRobot`:

- the robot's model from its spec (the builder ``simreal deploy sim`` uses; for a variant that
  drives part of the robot, its ``whole_robot``'s: a 12-DoF G1's twin is the 29-DoF G1, whose
  waist and arms the driver's LowCmd holds), stepped in real time at ``physics_dt_s`` (2 ms: one
  physics step per LowState at 500 Hz);
- every step, the newest valid LowCmd drives each motor with Unitree's law
  ``tau = tau_ff + kp (q_des - q) + kd (dq_des - dq)``, clipped to the spec's effort limit. It
  is MuJoCo's affine actuator with the command's gains written into it (``ctrl = tau_ff +
  kp q_des + kd dq_des``, bias ``-kp q - kd dq``), so the damping is integrated implicitly and
  the stiff gains stay stable at 2 ms. A motor whose ``mode`` is 0 is off (no torque). Before
  the first command every motor is off;
- a LowCmd whose CRC is wrong, whose encoding is not CDR little endian or whose numbers are
  not finite is dropped and counted, as the robot drops it;
- LowState at ``state_rate_hz``: joint ``q``, ``dq``, ``tau_est`` on each joint's motor slot,
  the IMU (the base's orientation and body rate, turned into the torso's frame for H1, whose
  IMU is there; the accelerometer sensor), ``tick`` (a counter from 1), ``mode_machine`` as
  unitree_mujoco sets it (5: G1 29-DoF, 4: 23-DoF) and a valid CRC;
- a gantry (``TwinConfig.gantry``, :data:`GANTRIES`): ``until_command`` (the default) holds the
  whole robot standing at home, feet on the floor, until the first LowCmd that turns a motor on,
  then lets it go: the rehearsal's hand-over, so a walking policy driven on the twin (``simreal
  drive --twin``) stands and walks on the floor; ``always`` pins the base ``GANTRY_LIFT_M`` above
  its standing pose for the whole run, feet clear and joints free (a robot hung on a gantry, for
  joint-level checks); ``never`` leaves it free from the start (motors off: it collapses);
- where the simulation diverged (MuJoCo reset a state gone NaN or past 1e10: ``sim.diverged_s``)
  the LowState stops, as a robot's does when it dies: the driver's reads time out and the
  runner's watchdog commands the safe action; the robot is not seen back at its start.

Latency probe: a LowCmd whose ``reserve[0]`` names a published tick (``UnitreeConfig.tick_probe``)
records ``t_taken - t_published`` of that state, the state-to-command latency through both
DDS hops and the controller, on one monotonic clock.

    with UnitreeTwin(TwinConfig("g1", domain_id=7)) as twin:      # a thread
        with UnitreeRobot(UnitreeConfig("g1", domain_id=7)) as robot:
            ...

In its own process, for a driver or a controller of yours on the same DDS domain::

    python -m simreal.hardware.unitree.twin --robot g1 --domain-id 7
    simreal drive BUNDLE --driver unitree --driver-set domain_id=7  # another terminal

it prints where the robot is every 2 s (:meth:`UnitreeTwin.status_line`: base position, yaw,
tilt, LowCmds applied), so a walk or a fall shows without a viewer.

Needs MuJoCo and ``simreal.sim`` (the simulation side, not the robot's runtime).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import threading
import time
from collections.abc import Sequence

import numpy as np

from simreal.config import domain_id_arg
from simreal.deploy.realtime import frozen_heap
from simreal.deploy.sim_robot import SimRobot, StartState
from simreal.deploy.transport_dds import PeriodicTimer
from simreal.errors import ConfigError, SimrealError
from simreal.hardware.twin_runtime import serve_until_interrupted
from simreal.hardware.unitree import msgs as um
from simreal.hardware.unitree.driver import Channel, base_to_imu, low_level, motor_slots
from simreal.robot_spec import RobotSpec, load_robot_spec
from simreal.rotations import rot_z, rpy_from_quat

#: How far above its standing pose the ``always`` gantry holds the base [m] (feet clear of the floor).
GANTRY_LIFT_M = 0.3
#: ``TwinConfig.gantry`` values (module docstring).
GANTRIES = ("until_command", "always", "never")
#: unitree_mujoco's G1 ``mode_machine`` by joint count.
MODE_MACHINE = {29: 5, 23: 4}
_RING = 4096  # published ticks remembered for the latency probe (8 s at 500 Hz)


@dataclasses.dataclass(frozen=True)
class TwinConfig:
    """Twin settings (DDS fields as :class:`simreal.hardware.unitree.driver.UnitreeConfig`).

    Attributes:
      physics_dt_s: physics step [s].
      state_rate_hz: LowState rate [Hz] (a whole number of physics steps apart).
      gantry: one of :data:`GANTRIES` (see module docstring).
    """

    robot: str = "g1"
    domain_id: int = 0
    network_interface: str = "lo"
    topic_prefix: str = "rt/"
    messages: str = ""
    physics_dt_s: float = 0.002
    state_rate_hz: float = 500.0
    gantry: str = "until_command"


@dataclasses.dataclass
class TwinStats:
    """What the twin saw; ``latency_s``: per probed LowCmd, state published -> command taken [s]."""

    steps: int = 0
    overruns: int = 0
    states_published: int = 0
    commands_received: int = 0
    commands_bad_crc: int = 0
    commands_malformed: int = 0
    commands_applied: int = 0
    latency_s: list[float] = dataclasses.field(default_factory=list)


class UnitreeTwin:
    """The twin (see module docstring): :meth:`run` in the caller's thread or process, or
    :meth:`start` / :meth:`stop` (a context manager) on a thread of its own."""

    def __init__(self, config: TwinConfig, spec: RobotSpec | None = None):
        import mujoco

        from simreal.sim.robots import build_model

        self.config = c = config
        if not c.physics_dt_s > 0 or not c.state_rate_hz > 0:
            raise ConfigError("physics_dt_s" if not c.physics_dt_s > 0 else "state_rate_hz", "must be > 0")
        if c.gantry not in GANTRIES:
            raise ConfigError("gantry", f"expected one of {', '.join(GANTRIES)}, got {c.gantry!r}")
        self.spec = variant = spec or load_robot_spec(c.robot)
        if self.spec.whole_robot:  # a variant driving part of the robot (g1_12dof): the twin is the robot
            self.spec = load_robot_spec(self.spec.whole_robot)
        self.wire = low_level(c.messages, self.spec)
        self.slots = motor_slots(self.wire, self.spec.actuator_names)
        self.decimation = max(1, round(1.0 / (c.state_rate_hz * c.physics_dt_s)))
        m = build_model(self.spec)
        m.opt.timestep = c.physics_dt_s
        m.actuator_gainprm[:, 0] = 1.0  # the affine motor law (module docstring), gains set per LowCmd
        m.actuator_biasprm[:, :3] = 0.0
        m.actuator_ctrllimited[:] = 0
        key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
        qpos = (m.key_qpos[key] if key >= 0 else m.qpos0).copy()
        for h in variant.held:  # where the variant's driver holds them, as a robot moved to its default
            # pose before the policy starts (unitree_rl_gym's deploy: arm_waist_target): from the whole
            # robot's home (the G1's elbows at 0.97 rad) the hold swung the arms down at hand-over and
            # toppled a walking policy trained with them still
            qpos[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, h.name)]] = h.target
        if c.gantry == "always":
            qpos[2] += GANTRY_LIFT_M
        self.sim = SimRobot(
            m, self.spec, "joint_effort", self.spec.actuator_names, StartState(qpos, np.zeros(m.nv), np.zeros(m.na), {})
        )
        self.sim.d.ctrl[:] = 0.0
        self.m, self.d = m, self.sim.d
        self.act, self.gear = self.sim.spec_act_ids, m.actuator_gear[self.sim.spec_act_ids, 0].copy()
        self._base = qpos[:7].copy()
        acc = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, "imu_acc")
        self._acc_adr = int(m.sensor_adr[acc]) if acc >= 0 else None
        self._yaw = self.spec.actuator_names.index(self.wire.imu_yaw_joint) if self.wire.imu_yaw_joint else None
        self.state = self.wire.state.zeros()
        if "mode_machine" in (self.state.dtype.names or ()):  # a message record: names is never None
            self.state["mode_machine"] = MODE_MACHINE.get(len(self.slots), 0)
        self.motor_mode = np.zeros(len(self.slots), np.uint8)
        self.last_command: np.ndarray | None = None  # the newest LowCmd applied
        self.handed_over = False  # a LowCmd has turned a motor on (the ``until_command`` gantry lets go)
        self.stats = TwinStats()
        self._ring_tick = np.zeros(_RING, np.int64)
        self._ring_t = np.zeros(_RING)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- commands ------------------------------------------------------------------------------
    def _on_command(self, data: bytes, t_rx: float) -> None:
        st = self.stats
        st.commands_received += 1
        try:
            rec = self.wire.cmd.decode(data, check_crc=True)
        except um.CrcError:
            st.commands_bad_crc += 1
            return
        except um.WireError:
            st.commands_malformed += 1
            return
        probe = int(rec["reserve"].reshape(-1)[0])
        if probe and self._ring_tick[probe % _RING] == probe:
            st.latency_s.append(t_rx - self._ring_t[probe % _RING])
            self._ring_tick[probe % _RING] = 0  # the first answer to a state is its latency
        if not self.apply(rec):
            st.commands_malformed += 1
            return
        st.commands_applied += 1
        self.last_command = rec
        self.handed_over = self.handed_over or bool(self.motor_mode.any())
        if "mode_pr" in (rec.dtype.names or ()):  # a message record: names is never None
            self.state["mode_pr"] = rec["mode_pr"]

    def apply(self, rec: np.ndarray) -> bool:
        """Write a LowCmd's motor law into the actuators (module docstring); False (nothing
        changed) when a used motor's numbers are not finite."""
        mc = rec["motor_cmd"][self.slots]
        v = np.where(mc["mode"] != 0, np.stack([mc[k] for k in ("q", "dq", "tau", "kp", "kd")]), 0.0)
        if not np.isfinite(v).all():
            return False
        q, dq, tau, kp, kd = v.astype(np.float64)
        g = self.gear
        self.m.actuator_biasprm[self.act, 1] = -kp / g**2
        self.m.actuator_biasprm[self.act, 2] = -kd / g**2
        self.d.ctrl[self.act] = (tau + kp * q + kd * dq) / g
        self.motor_mode = mc["mode"]
        return True

    # -- state ---------------------------------------------------------------------------------
    def joint_pos(self) -> np.ndarray:
        """True joint positions [rad], spec order."""
        return self.sim.true_state()["joint_pos"]

    def _publish(self, chan: Channel) -> None:
        s, rec = self.sim.true_state(), self.state
        ms, imu = rec["motor_state"], rec["imu_state"]
        ms["q"][self.slots], ms["dq"][self.slots] = s["joint_pos"], s["joint_vel"]
        ms["tau_est"][self.slots] = self.d.actuator_force[self.act] * self.gear
        ms["mode"][self.slots] = self.motor_mode
        quat, gyro = s["quat_wxyz"], s["ang_vel_b"]
        acc = self.d.sensordata[self._acc_adr : self._acc_adr + 3] if self._acc_adr is not None else np.zeros(3)
        if self._yaw is not None:
            yaw = float(s["joint_pos"][self._yaw])
            quat, gyro = base_to_imu(quat, gyro, yaw, float(s["joint_vel"][self._yaw]))
            acc = rot_z(acc, -yaw, np)
        imu["quaternion"], imu["gyroscope"], imu["accelerometer"] = quat, gyro, acc
        imu["rpy"] = rpy_from_quat(np.asarray(quat, np.float64), np)
        tick = self.stats.states_published + 1
        rec["tick"] = tick
        rec["crc"] = um.message_crc(rec)
        data = self.wire.state.encode(rec)
        t = time.monotonic()
        chan.write(data)
        self._ring_tick[tick % _RING], self._ring_t[tick % _RING] = tick, t
        self.stats.states_published = tick

    # -- the loop ------------------------------------------------------------------------------
    def run(self, duration_s: float | None = None, stop: threading.Event | None = None) -> TwinStats:
        """Step and publish in real time until ``duration_s`` [s] or ``stop`` is set."""
        c = self.config
        chan = Channel(
            c.domain_id,
            c.network_interface,
            (c.topic_prefix + "lowcmd", self.wire.cmd),
            (c.topic_prefix + "lowstate", self.wire.state),
            self._on_command,
        )
        with frozen_heap():  # no full garbage collection inside the loop (simreal/deploy/realtime.py)
            timer = PeriodicTimer(c.physics_dt_s, spin_s=0.0)
            end = math.inf if duration_s is None else time.monotonic() + duration_s
            try:
                while not (stop is not None and stop.is_set()) and time.monotonic() < end:
                    timer.wait(chan)  # takes commands as they arrive until the step's deadline
                    chan.drain()
                    if c.gantry == "always":
                        self.d.qpos[:7], self.d.qvel[:6] = self._base, 0.0
                    elif c.gantry == "until_command" and not self.handed_over:
                        self.sim.hold()
                    self.sim.step()
                    self.stats.steps += 1
                    if self.stats.steps % self.decimation == 0 and self.sim.diverged_s is None:
                        self._publish(chan)
                chan.drain()  # what arrived during the last step
            finally:
                self.stats.overruns = timer.overruns
                chan.close()
        return self.stats

    def status_line(self) -> str:
        """``twin 12 s | base (x, y, z) m | yaw, tilt deg | LowCmds n applied``: where the simulated
        robot is (a copy of the pose read while the loop steps: a status, not a measurement)."""
        qpos, t = self.d.qpos[:7].copy(), self.d.time
        roll, pitch, yaw = rpy_from_quat(np.asarray(qpos[3:7], np.float64), np)
        tilt = math.degrees(math.acos(max(-1.0, min(1.0, math.cos(roll) * math.cos(pitch)))))
        return (
            f"twin {t:.0f} s | base ({qpos[0]:.2f}, {qpos[1]:.2f}, {qpos[2]:.2f}) m | yaw {math.degrees(yaw):.0f} "
            f"deg, tilt {tilt:.0f} deg | LowCmds {self.stats.commands_applied} applied"
        )

    def start(self) -> UnitreeTwin:
        """Run on a daemon thread until :meth:`stop`."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, kwargs={"stop": self._stop}, name="unitree-twin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> TwinStats:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self.stats

    def __enter__(self) -> UnitreeTwin:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the twin until Ctrl-C, printing where it is first."""
    ap = argparse.ArgumentParser(prog="python -m simreal.hardware.unitree.twin", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--robot",
        default="g1",
        help="G1 or H1 robot spec name or path; a variant's twin is its whole robot (default g1)",
    )
    ap.add_argument("--domain-id", type=domain_id_arg, default=0, help="DDS domain (default 0)")
    ap.add_argument("--interface", default="lo", help="network interface (default lo, loopback)")
    ap.add_argument(
        "--gantry",
        default="until_command",
        choices=GANTRIES,
        help="until_command: held standing until a LowCmd turns a motor on (default)",
    )
    args = ap.parse_args(argv)
    cfg = TwinConfig(args.robot, domain_id=args.domain_id, network_interface=args.interface, gantry=args.gantry)
    try:
        twin = UnitreeTwin(cfg)
    except SimrealError as e:  # an unknown robot, a spec that is not a Unitree's
        ap.exit(2, f"{ap.prog}: error: {e}\n")
    with twin:
        serve_until_interrupted(
            f"Unitree twin of {twin.spec.name} on DDS domain {cfg.domain_id} "
            f"({cfg.network_interface}): {cfg.topic_prefix}lowstate at {cfg.state_rate_hz:g} Hz, "
            f"{cfg.topic_prefix}lowcmd; Ctrl-C stops",
            twin.status_line,
        )


if __name__ == "__main__":
    main()
