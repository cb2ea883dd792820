"""SO-100 / SO-101 arm on its Feetech bus: LeRobot's ``SOFollower`` behind the robot interface.

    >>> cfg = SO100Config("so100", port="/dev/ttyACM0",
    ...                   calibration="~/.cache/huggingface/lerobot/calibration/robots/so_follower/arm.json")
    >>> with SO100Robot(cfg) as arm:
    ...     s = arm.observation()                      # joint_pos [rad], joint_vel [rad/s], t_s
    ...     sent = arm.send_action(s["joint_pos"] + 0.05)

Motors are the spec's actuators in order on bus ids 1, 2, ... (shoulder_pan = 1 ... gripper = 6),
STS3215 servos. Angles are LeRobot's calibrated radians (:mod:`~simreal.hardware.feetech.calibration`).

``connect()``, as LeRobot's ``SOFollower.connect()`` with the calibration file accepted:

1. open the port; PING every id and check it is an STS3215 (one line naming the first missing
   id and the port);
2. torque off, EPROM unlocked; write the file's homing offset and range into any servo whose
   EPROM differs (said on stderr); without a file the servos' own calibration is used;
3. LeRobot's servo settings (:data:`SERVO_SETTINGS`, :data:`GRIPPER_SETTINGS`), angle feedback
   mode 0;
4. goal = present position, then torque on, EPROM locked.

``send_action`` limits each joint's step from the present position to ``max_relative_target``
(LeRobot's ``ensure_safe_goal_position``), rounds to whole steps within the calibrated range and
returns that, in radians. ``disconnect()`` holds the measured pose, then turns torque off
(``disable_torque_on_disconnect``) and closes the port. Not built: LeRobot's interactive
calibration (``lerobot-calibrate`` writes the file this reads) and id setup (``lerobot-setup-motors``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import numpy as np

from simreal.config import field
from simreal.errors import ConfigError
from simreal.hardware.feetech.bus import STS3215_MODEL, FeetechBus
from simreal.hardware.feetech.calibration import (
    MotorCalibration,
    load_calibration,
    rad_to_steps,
    speed_to_rad_s,
    steps_to_rad,
)
from simreal.hardware.robot import HardwareError, Robot, RobotConfig, State, time_stamp
from simreal.robot_spec import RobotSpec

#: LeRobot's ``SOFollower.configure()``, written to every servo at connect: no reply delay, full
#: acceleration, position mode, PID 16/0/32. The spec's kp, kd are fitted to P_Coefficient 16,
#: so the servo and the simulation run the same loop.
SERVO_SETTINGS = {
    "Return_Delay_Time": 0,
    "Maximum_Acceleration": 254,
    "Acceleration": 254,
    "Operating_Mode": 0,
    "P_Coefficient": 16,
    "I_Coefficient": 0,
    "D_Coefficient": 32,
}
#: ...and to the gripper: half torque and current, 25 % overload torque (LeRobot: against burnout).
GRIPPER_SETTINGS = {"Max_Torque_Limit": 500, "Protection_Current": 250, "Overload_Torque": 25}
#: Phase register bit 4: angle feedback mode 1 (readings may leave 0..4095); LeRobot clears it.
PHASE_ANGLE_FEEDBACK = 0x10
#: How long the first servo may take to answer once the bus is open [s]: an adapter just plugged
#: in, or a twin serving from a thread of a loaded machine (a CI run missed 3 pings of 0.1 s).
FIRST_ANSWER_S = 1.0
CALIBRATION_REGISTERS = ("Homing_Offset", "Min_Position_Limit", "Max_Position_Limit")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SO100Config(RobotConfig):
    """An SO-100/101 follower arm (LeRobot's ``SOFollowerConfig``); ``max_relative_target`` is
    checked when the robot is built (a positive step, or one per joint)."""

    port: str = field(doc="the bus's serial device (lerobot-find-port names it), or the twin's port")
    calibration: str | None = field(None, doc="LeRobot's calibration json; None: what the servos' EPROM holds")
    max_relative_target: float | tuple[float, ...] | None = field(
        None,
        doc="largest step of a goal from the present position per command, one or per joint [rad]; "
        "None: unlimited (LeRobot's default)",
    )
    disable_torque_on_disconnect: bool = field(True, doc="leave the arm limp after disconnect (LeRobot's default)")
    leader: bool = field(
        False,
        doc="a leader arm moved by hand: torque stays off and send_action is refused "
        "(simreal.hardware.teleop.leader_arm)",
    )
    timeout_s: float = field(0.1, min=0.001, doc="how long a servo may take to answer [s]")
    retries: int = field(2, min=0, doc="extra tries of a transaction whose answer was lost or corrupt (LeRobot's 2)")
    baudrate: int = field(1_000_000, min=1, doc="[bit/s]; STS3215s ship at 1 Mbit/s")


class SO100Robot(Robot):
    """The arm (see module docstring)."""

    config_class = SO100Config
    families = ("arm",)

    def __init__(self, config: SO100Config, spec: RobotSpec | None = None):
        super().__init__(config, spec)
        self.config: SO100Config = config
        if self.mode.name != "joint_position":
            raise ConfigError(
                "action_mode",
                f"{type(self).__name__} takes joint_position (the servos' Goal_Position), got {self.mode.name}",
            )
        self.ids = list(range(1, len(self.names) + 1))
        self.max_step_rad: np.ndarray | None = None
        if config.max_relative_target is not None:
            step = np.asarray(config.max_relative_target, np.float64).reshape(-1)
            step = np.full(len(self.names), step[0]) if step.size == 1 else step
            if step.shape != (len(self.names),) or not np.all(step > 0):
                raise ConfigError(
                    "max_relative_target",
                    f"expected a step > 0 rad, or one per joint "
                    f"({', '.join(self.names)}), got {config.max_relative_target}",
                )
            self.max_step_rad = step
        self.takes_commands = not config.leader
        self.bus: FeetechBus | None = None
        self.cals: tuple[MotorCalibration, ...] = ()

    # -- connect / disconnect ------------------------------------------------------------------
    def _open(self) -> None:
        bus = FeetechBus(
            self.config.port,
            baudrate=self.config.baudrate,
            timeout_s=self.config.timeout_s,
            retries=self.config.retries,
            names=dict(zip(self.ids, self.names)),
        )
        bus.open()
        try:
            self._handshake(bus)
        except BaseException:
            bus.close()
            raise
        self.bus = bus

    def _handshake(self, bus: FeetechBus) -> None:
        where = f"{self.spec.name} on {self.config.port}"
        deadline = time.monotonic() + FIRST_ANSWER_S
        while not bus.ping(self.ids[0]) and time.monotonic() < deadline:
            pass  # each ping waits timeout_s itself; the checks below say which servo stays silent
        for i, name in zip(self.ids, self.names):
            if not bus.ping(i):
                raise HardwareError(
                    f"{where}: servo id {i} ({name}) does not answer; check that it is powered, "
                    f"cabled and set to id {i} (lerobot-setup-motors)"
                )
            model = bus.read(i, "Model_Number")
            if model != STS3215_MODEL:
                raise HardwareError(
                    f"{where}: servo id {i} ({name}) is model {model}, expected an STS3215 ({STS3215_MODEL})"
                )
        self._set_torque(bus, False)
        self.cals = self._calibration(bus)
        for i, name in zip(self.ids, self.names):
            for reg, value in (SERVO_SETTINGS | (GRIPPER_SETTINGS if name == "gripper" else {})).items():
                bus.write(i, reg, value)
            phase = bus.read(i, "Phase")
            if phase & PHASE_ANGLE_FEEDBACK:
                bus.write(i, "Phase", phase & ~PHASE_ANGLE_FEEDBACK)
        if self.config.leader:
            return
        present = bus.sync_read(self.ids, ("Present_Position",))["Present_Position"]
        bus.sync_write("Goal_Position", dict(zip(self.ids, present)))  # torque on must not jump to a stale goal
        self._set_torque(bus, True)

    def _calibration(self, bus: FeetechBus) -> tuple[MotorCalibration, ...]:
        """The file's calibration, written to the servos whose EPROM differs; or the servos' own."""
        stored = [MotorCalibration(i, 0, *(bus.read(i, r) for r in CALIBRATION_REGISTERS)) for i in self.ids]
        if self.config.calibration is None:
            for c, name in zip(stored, self.names):
                if c.range_min >= c.range_max:
                    raise HardwareError(
                        f"{self.spec.name} on {self.config.port}: servo id {c.id} ({name}) holds no "
                        f"range ({c.range_min}..{c.range_max}); calibrate it (lerobot-calibrate) "
                        f"and pass the file as 'calibration'"
                    )
            return tuple(stored)
        path = os.path.expanduser(self.config.calibration)
        cals = load_calibration(path, self.names)
        changed = []
        for c, s, name in zip(cals, stored, self.names):
            if (c.homing_offset, c.range_min, c.range_max) != (s.homing_offset, s.range_min, s.range_max):
                for reg, value in zip(CALIBRATION_REGISTERS, (c.homing_offset, c.range_min, c.range_max)):
                    bus.write(c.id, reg, value)
                changed.append(name)
        if changed:
            print(
                f"simreal: {self.spec.name} on {self.config.port}: wrote {path} into the servos of "
                f"{', '.join(changed)} (their EPROM held another calibration)",
                file=sys.stderr,
            )
        return cals

    def _set_torque(self, bus: FeetechBus, on: bool) -> None:
        """Torque on and EPROM locked, or torque off and unlocked (LeRobot's pairing), for all
        servos in one SYNC_WRITE each, then read back."""
        bus.sync_write("Torque_Enable", dict.fromkeys(self.ids, int(on)))
        bus.sync_write("Lock", dict.fromkeys(self.ids, int(on)))
        state = bus.sync_read(self.ids, ("Torque_Enable",))["Torque_Enable"]
        wrong = [f"{i} ({n})" for i, n, s in zip(self.ids, self.names, state) if s != int(on)]
        if wrong:
            raise HardwareError(
                f"{self.spec.name} on {self.config.port}: torque stayed "
                f"{'off' if on else 'on'} on servo id {', '.join(wrong)}"
            )

    def _close(self) -> None:
        bus, self.bus = self.bus, None
        assert bus is not None  # _close runs only after an _open that set it (Robot.disconnect: connected)
        try:
            if self.config.disable_torque_on_disconnect:
                self._set_torque(bus, False)
        finally:
            bus.close()

    # -- state and commands --------------------------------------------------------------------
    def _read(self) -> State:
        t_s = time.monotonic()  # the servos sample when the request arrives
        assert self.bus is not None  # set by _open; _read runs only while connected (Robot._require)
        r = self.bus.sync_read(self.ids, ("Present_Position", "Present_Velocity"))
        return {
            "joint_pos": steps_to_rad(r["Present_Position"], self.cals),
            "joint_vel": speed_to_rad_s(r["Present_Velocity"]),
            "t_s": time_stamp(t_s),
        }

    def _write(self, u: np.ndarray) -> np.ndarray:
        if self.config.leader:
            raise HardwareError(
                f"{self.spec.name} on {self.config.port} is a leader arm (torque off): it takes no commands"
            )
        assert self.bus is not None  # set by _open; _write runs only while connected (Robot._require)
        goal = u
        if self.max_step_rad is not None:
            present = steps_to_rad(self.bus.sync_read(self.ids, ("Present_Position",))["Present_Position"], self.cals)
            goal = present + np.clip(goal - present, -self.max_step_rad, self.max_step_rad)
        steps = rad_to_steps(goal, self.cals)
        self.bus.sync_write("Goal_Position", dict(zip(self.ids, steps.tolist())))
        return steps_to_rad(steps, self.cals)
