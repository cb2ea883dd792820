"""A simulated Feetech bus: a pseudo-terminal that answers as an arm's STS3215 servos.

The driver (:class:`simreal.hardware.feetech.so100.SO100Robot`), LeRobot or Feetech's SDK open the
twin's port as they open ``/dev/ttyACM0`` and speak the same packets
(:mod:`simreal.hardware.feetech.bus`); behind it the robot spec's MuJoCo model (the rehearsal robot
of :mod:`simreal.deploy.sim_robot`) moves. It is the fake device of the driver's tests and the
twin to rehearse with::

    $ python -m simreal.hardware.feetech.twin --robot so100
    Feetech twin of so100 on /dev/pts/3 (servo ids 1-6); Ctrl-C stops

    >>> with FeetechTwin("so100") as twin, SO100Robot(SO100Config("so100", port=twin.port)) as arm:
    ...     arm.observation()["joint_pos"]

Each servo is a 256-byte register table (:data:`~simreal.hardware.feetech.bus.STS3215` addresses)
that PING, READ, WRITE, SYNC_READ and SYNC_WRITE read and write as the real one does; packets
with a bad checksum are dropped and counted (``bad_checksums``); packets for absent servos,
other instructions (REG_WRITE, ACTION, broadcast PING) and malformed ones get no answer and are
counted in ``ignored``. Servo k drives the spec's actuator k:

- encoder [steps] = ``zero_k + q * 4095 / (2 pi)``, with ``zero_k`` fixed by the factory
  calibration the twin is built with; ``Present_Position = encoder - Homing_Offset`` (mod 4096),
  ``Present_Velocity = qdot * 4096 / (2 pi)`` [steps/s], ``Present_Load`` = actuator force over
  the effort limit [0.1 %];
- torque on: the position servo's set-point is ``Goal_Position + Homing_Offset`` clipped to
  [``Min_Position_Limit``, ``Max_Position_Limit``] (the spec's kp/kd are that loop); torque off:
  the set-point follows the joint, leaving only the servo's damping against gravity;
- before the first ``Torque_Enable = 1`` the arm is held at its start pose (it rests there).

Physics runs on demand (:class:`~simreal.hardware.twin_runtime.WallClock`): before each packet
is served the model steps until its time catches up with the wall clock, so commands act at the
times they arrive and an idle twin costs no CPU. A gap over 50 ms is skipped rather than
replayed (the arm has settled, or the twin was starved of CPU and must answer within the
master's timeout).
"""

from __future__ import annotations

import argparse
import math
import os
import select
import threading
import tty
from collections.abc import Sequence

import numpy as np

from simreal.hardware.feetech.bus import (
    BROADCAST_ID,
    STEPS_PER_TURN,
    STS3215,
    STS3215_MODEL,
    Instruction,
    Packet,
    PacketReader,
    decode_register,
    encode_register,
)
from simreal.hardware.feetech.calibration import STEPS_PER_RAD, MotorCalibration
from simreal.hardware.twin_runtime import ServingThread, WallClock, serve_until_interrupted
from simreal.robot_spec import RobotSpec, load_robot_spec

#: Longest gap the physics replays [s] (module docstring): well inside a master's ~100 ms timeout.
MAX_CATCHUP_S = 0.05
#: Registers a twin servo starts with besides its id and calibration (the rest read 0).
FACTORY = {"Model_Number": STS3215_MODEL, "Lock": 1, "Present_Voltage": 120, "Present_Temperature": 25}


def spec_calibration(spec: RobotSpec) -> tuple[MotorCalibration, ...]:
    """A factory calibration for the spec's joints: homing offset 0, each range centred on the
    middle step 2047.5 and just wide enough for the joint's range."""
    cals = []
    for i, a in enumerate(spec.actuators, 1):
        half = min(2047, math.ceil(max(map(abs, a.range)) * STEPS_PER_RAD)) if a.range else 2047
        cals.append(MotorCalibration(i, 0, 0, 2047 - half, 2048 + half))
    return tuple(cals)


class FeetechTwin(ServingThread):
    """The bus of the spec's arm on a pseudo-terminal (see module docstring).

    Args:
      robot: robot spec name or path (actuator k is servo id k + 1).
      ids: the servo ids that answer (default all); leave one out to unplug it.
      calibration: the servos' factory calibration (default :func:`spec_calibration`).
      start_joint_pos: the pose the arm rests in [rad] (default the spec's default pose).
    """

    def __init__(
        self,
        robot: str | RobotSpec = "so100",
        *,
        ids: Sequence[int] | None = None,
        calibration: Sequence[MotorCalibration] | None = None,
        start_joint_pos: Sequence[float] = (),
    ):
        from simreal.deploy.sim_robot import SimRobot, spec_start
        from simreal.sim.robots import build_model

        self.spec = robot if isinstance(robot, RobotSpec) else load_robot_spec(robot)
        model = build_model(self.spec)
        start = spec_start(model, self.spec, np.zeros(3), tuple(start_joint_pos))
        self.sim = SimRobot(model, self.spec, "joint_position", self.spec.actuator_names, start)
        n = len(self.spec.actuators)
        self.ids = tuple(ids) if ids is not None else tuple(range(1, n + 1))
        self.calibration = tuple(calibration) if calibration is not None else spec_calibration(self.spec)
        self.zero = np.array([c.middle + c.homing_offset for c in self.calibration])  # encoder at q = 0
        self.effort = np.array([a.effort_limit for a in self.spec.actuators])
        self.regs = {i: bytearray(256) for i in range(1, n + 1)}
        for i, c in enumerate(self.calibration, 1):
            values = {
                **FACTORY,
                "ID": i,
                "Homing_Offset": c.homing_offset,
                "Min_Position_Limit": c.range_min,
                "Max_Position_Limit": c.range_max,
            }
            for name, v in values.items():
                self._poke(i, name, v)
        self.released = False  # a Torque_Enable = 1 arrived: the arm leaves its rest
        self.torque = np.zeros(n, bool)
        self.goal_rad = np.zeros(n)
        self._refresh()
        for i in self.regs:  # a servo powers up with its goal at its position
            self._poke(i, "Goal_Position", self._peek(i, "Present_Position"))
        self._take_registers()
        self.reader = PacketReader()
        self.ignored = 0
        self.lock = threading.Lock()
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line discipline: bytes pass as they are
        self.port = os.ttyname(self._slave)
        super().__init__(f"feetech-twin {self.port}")
        self.clock = WallClock(self.sim.m.opt.timestep, max_catchup_s=MAX_CATCHUP_S)

    # -- life cycle ----------------------------------------------------------------------------
    def _release(self) -> None:
        for fd in (self._master, self._slave):
            try:
                os.close(fd)
            except OSError:  # closed already: stop() is idempotent
                pass

    # -- what tests and users look at ----------------------------------------------------------
    @property
    def bad_checksums(self) -> int:
        return self.reader.corrupt

    def register(self, servo_id: int, name: str) -> int:
        """The value of register ``name`` of servo ``servo_id`` as the servo holds it now."""
        with self.lock:
            self._advance()
            self._refresh()
            return self._peek(servo_id, name)

    def joint_pos(self) -> np.ndarray:
        """The simulated joint angles [rad], spec order."""
        with self.lock:
            self._advance()
            return self.sim.true_state()["joint_pos"]

    # -- the servos ----------------------------------------------------------------------------
    def _poke(self, servo_id: int, name: str, value: int) -> None:
        address, size = STS3215[name]
        self.regs[servo_id][address : address + size] = encode_register(name, value)

    def _peek(self, servo_id: int, name: str) -> int:
        address, size = STS3215[name]
        return decode_register(name, bytes(self.regs[servo_id][address : address + size]))

    def _refresh(self) -> None:
        """Present_* registers from the simulation."""
        s = self.sim.true_state()
        force = self.sim.d.actuator_force[self.sim.spec_act_ids]
        for k, i in enumerate(self.regs):
            encoder = round(self.zero[k] + s["joint_pos"][k] * STEPS_PER_RAD)
            self._poke(i, "Present_Position", (encoder - self._peek(i, "Homing_Offset")) % STEPS_PER_TURN)
            self._poke(
                i,
                "Present_Velocity",
                int(np.clip(round(s["joint_vel"][k] * STEPS_PER_TURN / (2 * math.pi)), -32767, 32767)),
            )
            self._poke(i, "Present_Load", int(np.clip(round(1000 * force[k] / self.effort[k]), -1000, 1000)))

    def _take_registers(self) -> None:
        """Torque flags and set-points [rad] from the registers after a write."""
        for k, i in enumerate(self.regs):
            self.torque[k] = self._peek(i, "Torque_Enable") == 1
            lo, hi = self._peek(i, "Min_Position_Limit"), self._peek(i, "Max_Position_Limit")
            goal = self._peek(i, "Goal_Position")
            goal = min(max(goal, lo), hi) if lo < hi else goal
            self.goal_rad[k] = (goal + self._peek(i, "Homing_Offset") - self.zero[k]) / STEPS_PER_RAD
        self.released = self.released or bool(self.torque.any())

    def _advance(self) -> None:
        """Step the physics until its time reaches the wall clock's."""
        for _ in range(self.clock.steps_due(self.sim.time_s)):
            if not self.released:
                self.sim.hold()
            else:
                q = self.sim.true_state()["joint_pos"]
                self.sim.apply(np.where(self.torque, self.goal_rad, q))
            self.sim.step()

    # -- the wire ------------------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._stop.is_set():
            if not select.select([self._master], [], [], 0.05)[0]:
                continue
            self.reader.feed(os.read(self._master, 4096))
            while (p := self.reader.next()) is not None:
                with self.lock:
                    self._advance()
                    out = self._answer(p)
                if out:
                    os.write(self._master, out)

    def _answer(self, p: Packet) -> bytes:
        """The status packets a packet gets (none for SYNC_WRITE, absent servos, ignored packets)."""
        here = p.servo_id in self.ids
        if p.code == Instruction.PING and here:
            return Packet(p.servo_id, 0).encode()
        if p.code == Instruction.READ and here and len(p.params) == 2:
            self._refresh()
            address, n = p.params
            return Packet(p.servo_id, 0, bytes(self.regs[p.servo_id][address : address + n])).encode()
        if p.code == Instruction.WRITE and here and len(p.params) >= 2:
            self._write(p.servo_id, p.params[0], p.params[1:])
            self._take_registers()
            return Packet(p.servo_id, 0).encode()
        if p.code == Instruction.SYNC_READ and p.servo_id == BROADCAST_ID and len(p.params) >= 2:
            self._refresh()
            address, n = p.params[:2]
            return b"".join(
                Packet(i, 0, bytes(self.regs[i][address : address + n])).encode() for i in p.params[2:] if i in self.ids
            )
        if p.code == Instruction.SYNC_WRITE and p.servo_id == BROADCAST_ID and len(p.params) >= 2:
            address, n = p.params[:2]
            for at in range(2, len(p.params) - n, n + 1):
                if p.params[at] in self.ids:
                    self._write(p.params[at], address, p.params[at + 1 : at + 1 + n])
            self._take_registers()
            return b""
        self.ignored += 1
        return b""

    def _write(self, servo_id: int, address: int, data: bytes) -> None:
        if address + len(data) <= 256:
            self.regs[servo_id][address : address + len(data)] = data


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the twin of ``--robot`` until Ctrl-C, printing its port first."""
    ap = argparse.ArgumentParser(prog="python -m simreal.hardware.feetech.twin", description=__doc__.split("\n")[0])
    ap.add_argument("--robot", default="so100", help="robot spec name or path (default so100)")
    args = ap.parse_args(argv)
    with FeetechTwin(args.robot) as twin:
        serve_until_interrupted(
            f"Feetech twin of {twin.spec.name} on {twin.port} (servo ids {twin.ids[0]}-{twin.ids[-1]}); Ctrl-C stops"
        )


if __name__ == "__main__":
    main()
