"""Crazyflie 2.x over CRTP with Bitcraze's ``cflib``: body rates and thrust out, log blocks in.

    >>> cfg = CrazyflieConfig("crazyflie2", uri="radio://0/80/2M/E7E7E7E7E7")   # or udp://HOST:PORT (SITL, twin)
    >>> with CrazyflieRobot(cfg) as cf:
    ...     s = cf.observation()            # pos_w, quat_wxyz, lin_vel_w, ang_vel_b, t_s
    ...     cf.arm()                        # explicit, never implied by connect: opens the thrust lock
    ...     sent = cf.send_action(cf.mode.hover_command(cf.spec, cf.names))

``connect()``:

1. ``cflib``'s connection sequence (link, protocol version, log and parameter TOCs, memories),
   waited for at most ``connect_timeout_s`` (cflib itself would wait for ever on a link
   that stays silent);
2. the RPYT commander into rate mode: parameters ``flightmode.stabModeRoll``,
   ``stabModePitch``, ``stabModeYaw`` = 0 (RATE), each confirmed by the firmware's echo;
3. three log blocks at ``log_period_ms`` (a CRTP packet holds 26 bytes of log data, six
   floats): ``stateEstimate.x y z vx vy vz``, ``stateEstimate.qx qy qz qw`` and ``gyro.x y z``,
   and the first sample of each.

It sends no set-point. :meth:`CrazyflieRobot.arm` sends one with zero thrust: the firmware
locks thrust until it sees one (``thrustLocked`` in ``crtp_commander_rpyt.c``, so that a stale
joystick cannot take off), and locks it again once its commander watchdog stopped the motors
(2 s without set-points); call it again then. A brushed Crazyflie 2.x needs nothing more; a
brushless one also wants the supervisor's arming request (cflib's
``supervisor.send_arming_request``), which is not sent here.

State (:meth:`_read`): the estimator's world frame is x forward at power-on, y left, z up
(the project's world, no conversion); the quaternion is body (x forward, y left, z up) to
world; the gyro's deg/s become rad/s. ``t_s`` is the host's receive time of the oldest of
the three newest blocks (the state is as old as its stalest part); a state older than
``state_timeout_s`` raises, so the drive loop's watchdog acts.

Commands (:meth:`_write`): ``commander.send_setpoint(roll, pitch, yawrate, thrust)``, the
legacy RPYT packet, in rate mode. What the firmware does with it (``crtp_commander_rpyt.c``,
``controller_pid.c``, read from Bitcraze's source, firmware 2023 and later), for a ctbr
command ``(T [N], p, q, r [rad/s])`` in the FLU body frame:

=========  ==================================  ===============================================
field      sent                                 why
=========  ==================================  ===============================================
roll       ``deg(p)``                           the rate loop tracks it against ``gyro.x``
pitch      ``deg(q)``                           cflib sends ``-pitch``; the loop tracks the
                                                firmware's pitch rate against ``-gyro.y``
yawrate    ``-deg(r)``                          "legacy rate input is inverted": the firmware
                                                tracks ``-yawrate`` against ``gyro.z``
thrust     ``round(65535 T / sum(f_max))``      clipped to [0, ``max_thrust``]; below 1000 the
                                                firmware applies 0
=========  ==================================  ===============================================

The thrust map is linear because the firmware's battery compensation
(``motorsCompensateBatteryVoltage``, on by default for brushed Crazyflies) makes rotor thrust
linear in the command, full scale about 60 g (0.59 N) for the four rotors of a Crazyflie 2.x:
the spec's ``sum(f_max)`` = 0.6 N. A vehicle with other motors needs its own spec limits.
Check the signs on a tethered vehicle before a free flight: they come from reading the
firmware, not from flying.

``disconnect()`` sends zero thrust and rates (the motors stop: the vehicle falls) and closes
the link; without set-points the firmware would level the vehicle after 0.5 s and stop the
motors after 2 s (its commander watchdog). Imports numpy, cflib and the core.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import threading
import time

import numpy as np
from cflib import crtp
from cflib.crazyflie import Crazyflie
from cflib.crazyflie.log import LogConfig

from simreal.action_modes import total_thrust_n
from simreal.config import field
from simreal.errors import ConfigError
from simreal.hardware.robot import HardwareError, Robot, RobotConfig, State, time_stamp
from simreal.robot_spec import RobotSpec

#: Log blocks (name, variables): each fits one CRTP packet's 26 bytes as floats.
LOG_BLOCKS = (
    (
        "position",
        (
            "stateEstimate.x",
            "stateEstimate.y",
            "stateEstimate.z",
            "stateEstimate.vx",
            "stateEstimate.vy",
            "stateEstimate.vz",
        ),
    ),
    ("attitude", ("stateEstimate.qx", "stateEstimate.qy", "stateEstimate.qz", "stateEstimate.qw")),
    ("gyro", ("gyro.x", "gyro.y", "gyro.z")),
)
#: Parameters set at connect: the RPYT commander's roll, pitch and yaw in rate mode (RATE = 0).
RATE_MODE = {"flightmode.stabModeRoll": 0, "flightmode.stabModePitch": 0, "flightmode.stabModeYaw": 0}
#: The RPYT thrust command's full scale, and the firmware's cap (``MAX_THRUST``).
THRUST_FULL_SCALE = 65535
FIRMWARE_MAX_THRUST = 60000

_drivers_ready = threading.Lock()
# cflib logs a failed link as a WARNING with its traceback; with no handler configured, Python's
# last-resort handler printed it on stderr before our one line. The driver reports the failure
# itself (HardwareError), so cflib's records go nowhere unless the application configures them.
logging.getLogger("cflib").addHandler(logging.NullHandler())


def _init_drivers() -> None:
    """cflib's link drivers, once per process (``init_drivers`` appends to a global list)."""
    with _drivers_ready:
        if not crtp.CLASSES:
            crtp.init_drivers()


def link_error_reason(message: str) -> str:
    """cflib's link error message on one line: its lines before the traceback cflib appends."""
    lines = []
    for line in (ln.strip() for ln in message.splitlines()):
        if line.startswith("Traceback"):
            break
        if line:
            lines.append(line)
    return ": ".join(lines[:2]) or "no reason given"


@dataclasses.dataclass(frozen=True, kw_only=True)
class CrazyflieConfig(RobotConfig):
    """A Crazyflie 2.x on a Crazyradio, USB or UDP link (see module docstring)."""

    action_mode: str = field("ctbr", choices=("ctbr",), doc="collective thrust [N] and FLU body rates [rad/s]")
    uri: str = field(
        "radio://0/80/2M/E7E7E7E7E7",
        doc="cflib link URI: radio://0/CHANNEL/RATE/ADDRESS, usb://0, udp://HOST:PORT (SITL, the twin)",
    )
    connect_timeout_s: float = field(10.0, min=0.01, doc="wait for the TOCs, the parameters and the first log data [s]")
    toc_cache: str = field(
        "~/.cache/simreal/cflib_toc", doc="cflib's TOC cache folder: a known firmware's TOCs are not downloaded again"
    )
    log_period_ms: int = field(10, min=10, max=2550, doc="log block period, a multiple of 10 [ms] (firmware unit)")
    state_timeout_s: float = field(0.1, min=0.001, doc="observation() refuses a state older than this [s]")
    max_thrust: int = field(
        FIRMWARE_MAX_THRUST,
        min=0,
        max=FIRMWARE_MAX_THRUST,
        doc="cap of the RPYT thrust command (the firmware caps at 60000)",
    )


class CrazyflieRobot(Robot):
    """The vehicle (see module docstring)."""

    config_class = CrazyflieConfig
    families = ("quadrotor",)
    _engaged = False  # the thrust lock opened on this connection (``arm``)

    def __init__(self, config: CrazyflieConfig, spec: RobotSpec | None = None):
        super().__init__(config, spec)
        self.config: CrazyflieConfig = config
        if self.mode.name != "ctbr":
            raise ConfigError(
                "action_mode",
                f"{type(self).__name__} takes ctbr (the RPYT commander in rate mode), got {self.mode.name}",
            )
        if config.log_period_ms % 10:
            raise ConfigError("log_period_ms", f"the firmware counts log periods in 10 ms; got {config.log_period_ms}")
        self.full_thrust_n = total_thrust_n(self.spec)
        self.where = f"Crazyflie on {config.uri}"
        self.cf: Crazyflie | None = None
        self._lock = threading.Condition()
        self._newest: dict[str, tuple[dict[str, float], float]] = {}
        self._link_error = ""
        self.received: dict[str, int] = {}  # log packets per block since connect

    # -- connect / disconnect ------------------------------------------------------------------
    def _open(self) -> None:
        _init_drivers()
        self._newest, self._link_error, self._engaged = {}, "", False
        self.received = dict.fromkeys((n for n, _ in LOG_BLOCKS), 0)
        self.cf = Crazyflie(rw_cache=os.path.expanduser(self.config.toc_cache))
        try:
            self._connect()
            self._rate_mode()
            self._start_logging()
        except BaseException:
            self._close()
            raise

    def _wait(self, what: str, predicate) -> None:
        with self._lock:
            if not self._lock.wait_for(lambda: predicate() or self._link_error, self.config.connect_timeout_s):
                raise HardwareError(
                    f"{self.where}: no {what} within {self.config.connect_timeout_s:g} s; check the "
                    f"URI, that the Crazyflie is on, and its radio address and channel"
                )
            if self._link_error:
                raise HardwareError(f"{self.where}: the link failed ({self._link_error}) while waiting for {what}")

    def _connect(self) -> None:
        done = threading.Event()

        def failed(uri: str, message: str) -> None:
            with self._lock:
                self._link_error = link_error_reason(message)
                self._lock.notify_all()

        def connected(uri: str) -> None:
            with self._lock:
                done.set()
                self._lock.notify_all()

        assert self.cf is not None  # _open set it before calling this
        self.cf.connected.add_callback(connected)
        self.cf.connection_failed.add_callback(failed)
        self.cf.connection_lost.add_callback(failed)
        self.cf.open_link(self.config.uri)
        self._wait("answer to cflib's connection sequence (log and parameter TOCs)", done.is_set)
        missing = [
            n for _, names in LOG_BLOCKS for n in names if self.cf.log.toc.get_element_by_complete_name(n) is None
        ]
        missing += [n for n in RATE_MODE if self.cf.param.toc.get_element_by_complete_name(n) is None]
        if missing:
            raise HardwareError(
                f"{self.where}: the firmware has no {', '.join(missing)} (a Crazyflie 2.x firmware "
                f"from 2023 on logs and takes all of them)"
            )

    def _rate_mode(self) -> None:
        confirmed: dict[str, int] = {}

        def echo(name: str, value: str) -> None:
            with self._lock:
                confirmed[name] = int(value)
                self._lock.notify_all()

        assert self.cf is not None  # _open set it before calling this
        for name, value in RATE_MODE.items():
            group, short = name.split(".")
            self.cf.param.add_update_callback(group=group, name=short, cb=echo)
            self.cf.param.set_value(name, value)
        self._wait(
            "confirmation of " + ", ".join(f"{n} = {v}" for n, v in RATE_MODE.items()),
            lambda: all(confirmed.get(n) == v for n, v in RATE_MODE.items()),
        )

    def _start_logging(self) -> None:
        assert self.cf is not None  # _open set it before calling this
        for name, variables in LOG_BLOCKS:
            block = LogConfig(name, self.config.log_period_ms)
            for v in variables:
                block.add_variable(v, "float")
            block.data_received_cb.add_callback(self._take)
            self.cf.log.add_config(block)
            block.start()
        self._wait("log data from " + ", ".join(n for n, _ in LOG_BLOCKS), lambda: len(self._newest) == len(LOG_BLOCKS))

    def _take(self, timestamp_ms: int, data: dict[str, float], block: LogConfig) -> None:
        with self._lock:
            self._newest[block.name] = (data, time.monotonic())
            self.received[block.name] += 1
            self._lock.notify_all()

    def _close(self) -> None:
        cf, self.cf = self.cf, None
        if cf is not None:
            cf.close_link()

    def engage(self) -> None:
        """Open the thrust lock once per connection: again, its zero-thrust set-point would cut
        the rotors of a vehicle in flight until the next command."""
        if not self._engaged:
            self.arm()

    def arm(self) -> None:
        """Open the firmware's thrust lock: one set-point with zero thrust (module docstring)."""
        self._require()
        assert self.cf is not None  # set by _open; connected (checked above) until _close
        self.cf.commander.send_setpoint(0.0, 0.0, 0.0, 0)
        self._engaged = True

    # -- state and commands --------------------------------------------------------------------
    def _read(self) -> State:
        now = time.monotonic()
        with self._lock:
            if self._link_error:
                raise HardwareError(f"{self.where}: the link failed ({self._link_error})")
            (pos, t_pos), (att, t_att), (gyro, t_gyro) = (self._newest[n] for n, _ in LOG_BLOCKS)
        t_s = min(t_pos, t_att, t_gyro)
        if now - t_s > self.config.state_timeout_s:
            stale = LOG_BLOCKS[int(np.argmin([t_pos, t_att, t_gyro]))][0]
            raise HardwareError(
                f"{self.where}: no {stale} log data for {(now - t_s) * 1e3:.0f} ms (logged every "
                f"{self.config.log_period_ms} ms; state_timeout_s {self.config.state_timeout_s:g})"
            )
        est = "stateEstimate."
        return {
            "pos_w": np.array([pos[est + k] for k in ("x", "y", "z")]),
            "quat_wxyz": np.array([att[est + k] for k in ("qw", "qx", "qy", "qz")]),
            "lin_vel_w": np.array([pos[est + k] for k in ("vx", "vy", "vz")]),
            "ang_vel_b": np.radians([gyro["gyro." + k] for k in ("x", "y", "z")]),
            "t_s": time_stamp(t_s),
        }

    def _write(self, u: np.ndarray) -> np.ndarray:
        thrust = int(min(max(round(u[0] / self.full_thrust_n * THRUST_FULL_SCALE), 0), self.config.max_thrust))
        roll, pitch, yawrate = (float(np.float32(math.degrees(w))) for w in (u[1], u[2], -u[3]))
        assert self.cf is not None  # set by _open; _write runs only while connected (Robot._require)
        self.cf.commander.send_setpoint(roll, pitch, yawrate, thrust)
        # what went out, back in the action's units: thrust on its 16-bit grid, rates as float32
        return np.array(
            [
                thrust / THRUST_FULL_SCALE * self.full_thrust_n,
                math.radians(roll),
                math.radians(pitch),
                -math.radians(yawrate),
            ]
        )
