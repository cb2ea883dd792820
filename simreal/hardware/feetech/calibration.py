"""Feetech servo calibration as LeRobot stores it, and encoder steps <-> calibrated radians.

The file is LeRobot's calibration json (``lerobot-calibrate`` writes it to
``~/.cache/huggingface/lerobot/calibration/robots/so_follower/<id>.json``), one entry per motor::

    {"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1470, "range_min": 758, "range_max": 3292}, ...}

The same numbers live in each servo's EPROM: the servo reports ``Present_Position = encoder -
Homing_Offset`` [steps] and clamps goals to [``Min_Position_Limit``, ``Max_Position_Limit``].
Angles are LeRobot's degrees mode in radians, 0 in the middle of the range::

    q = (steps - (range_min + range_max) / 2) * 2 pi / 4095      [rad]

(LeRobot divides by 4095, the largest reading, not by the 4096 steps of a turn; kept, so angles
match LeRobot's exactly). ``drive_mode`` is read and ignored, as LeRobot's degrees mode ignores
it. Speeds are physical: ``qdot = steps_per_s * 2 pi / 4096`` [rad/s].
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simreal.errors import DataFileError
from simreal.hardware.feetech.bus import STEPS_PER_TURN

#: steps per radian of LeRobot's angle mapping (see module docstring).
STEPS_PER_RAD = (STEPS_PER_TURN - 1) / (2 * math.pi)
FIELDS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")


@dataclasses.dataclass(frozen=True)
class MotorCalibration:
    """One motor's entry (LeRobot's ``MotorCalibration``): bus id, drive mode, homing offset and
    range [steps]."""

    id: int
    drive_mode: int
    homing_offset: int
    range_min: int
    range_max: int

    @property
    def middle(self) -> float:
        return (self.range_min + self.range_max) / 2


def load_calibration(path: str | Path, names: Sequence[str]) -> tuple[MotorCalibration, ...]:
    """The calibration of motors ``names`` (bus ids 1, 2, ... in that order) from LeRobot's json."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise DataFileError(str(path), f"cannot read the calibration json ({e})") from None
    if not isinstance(doc, dict):
        raise DataFileError(str(path), "expected an object {motor name: {id, drive_mode, homing_offset, ...}}")
    cals = []
    for servo_id, name in enumerate(names, 1):
        entry = doc.get(name)
        if not isinstance(entry, dict) or any(not isinstance(entry.get(f), int) for f in FIELDS):
            raise DataFileError(str(path), f"motor '{name}' needs integer fields {', '.join(FIELDS)}")
        c = MotorCalibration(**{f: entry[f] for f in FIELDS})
        if c.id != servo_id:
            raise DataFileError(str(path), f"motor '{name}' has id {c.id}; its bus id is {servo_id}")
        if not 0 <= c.range_min < c.range_max < STEPS_PER_TURN:
            raise DataFileError(
                str(path),
                f"motor '{name}': expected 0 <= range_min < range_max <= "
                f"{STEPS_PER_TURN - 1}, got {c.range_min}, {c.range_max}",
            )
        if abs(c.homing_offset) >= 1 << 11:
            raise DataFileError(str(path), f"motor '{name}': homing_offset {c.homing_offset} is outside +-2047")
        cals.append(c)
    return tuple(cals)


def save_calibration(path: str | Path, names: Sequence[str], cals: Sequence[MotorCalibration]) -> None:
    """Write LeRobot's calibration json for motors ``names``."""
    doc = {n: dataclasses.asdict(c) for n, c in zip(names, cals)}
    Path(path).write_text(json.dumps(doc, indent=4) + "\n")


def steps_to_rad(steps: Sequence[float] | np.ndarray, cals: Sequence[MotorCalibration]) -> np.ndarray:
    """Present_Position [steps] -> calibrated joint angles [rad]."""
    return (np.asarray(steps, np.float64) - [c.middle for c in cals]) / STEPS_PER_RAD


def rad_to_steps(q: Sequence[float] | np.ndarray, cals: Sequence[MotorCalibration]) -> np.ndarray:
    """Calibrated joint angles [rad] -> Goal_Position [steps]: rounded to the nearest step (LeRobot
    truncates) and clipped to the range, as the servo would clip it."""
    steps = np.rint(np.asarray(q, np.float64) * STEPS_PER_RAD + [c.middle for c in cals])
    return np.clip(steps, [c.range_min for c in cals], [c.range_max for c in cals]).astype(np.int64)


def speed_to_rad_s(steps_per_s: Sequence[float]) -> np.ndarray:
    """Present_Velocity [steps/s] -> [rad/s]."""
    return np.asarray(steps_per_s, np.float64) * (2 * math.pi / STEPS_PER_TURN)
