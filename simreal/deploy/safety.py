"""The safety layer between a policy's proposal and the wire.

A small state machine, stepped once per control tick::

    WAITING --fresh state--> RAMP --ramp_s elapsed--> RUNNING
       ^                      |                          |
       |   state stale (watchdog): STALE, safe command   |
       |   (latch: FAULT until the e-stop is released)   |
       +-- e-stop released <-- ESTOP / FAULT <-----------+-- e-stop / non-finite actions /
                                                               trip (the state envelope)

What reaches the wire, in every mode:

- clamped to ``[low, high]`` (bundle, robot spec and config limits, the tightest);
- finite: a non-finite proposal is never used; the previous command is held, and after
  ``max_nan_ticks`` in a row the layer faults (latched);
- rate limited in RAMP and RUNNING: ``|u_k - u_{k-1}| <= max_rate * dt``;
- in WAITING, STALE, FAULT and ESTOP: the *safe command*, taken once on entering the mode
  (zero thrust for rotors, the joint pose measured then for position-controlled joints);
- except in a FAULT when a *recovery* is configured (a quadrotor's landing,
  :mod:`simreal.deploy.landing`): its state-feedback command, clamped, every tick while the
  state is fresh, until it ends (touchdown, timeout); then the safe command;
- and, where a recovery is configured, the *blind hold* while the state is stale (a watchdog
  trip, or a dropout during the recovery): the hold command (hover thrust, zero body rates),
  for at most ``hold_s`` after the last fresh state, then the safe command. State back in
  time: a latched watchdog FAULT then recovers (lands), a STALE ramps back to the policy. A
  thrust cut in the air is a fall; a flight controller's own watchdog holds first too (the
  Crazyflie's ``commander.c`` levels at 0.5 s without set-points and stops the motors at 2 s);
- RAMP blends from the *initial command* (the safe command, or hover thrust for a
  quadrotor handed over in the air) to the policy's: ``u = (1 - s) u0 + s u_pi``,
  ``s = (t - t0) / ramp_s``, so the robot never jumps to the policy's first action.

The runner publishes nothing before its first state message (WAITING with no state): it
takes over only a robot it can see.

Units: commands in the action's physical units; times in [s] on one monotonic clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

WAITING, RAMP, RUNNING, STALE, FAULT, ESTOP = "waiting", "ramp", "running", "stale", "fault", "estop"
SAFE_MODES = (WAITING, STALE, FAULT, ESTOP)

State = Mapping[str, np.ndarray]


class Recovery(Protocol):
    """A fault response driven by state feedback (:class:`simreal.deploy.landing.Landing`)."""

    outcome: str

    def start(self, now_s: float) -> None: ...

    def command(self, now_s: float, state: State) -> np.ndarray | None: ...


@dataclasses.dataclass
class SafetyStats:
    """Counters since start; ``last_reason`` says why the layer last left normal operation."""

    ticks: int = 0
    safe_ticks: int = 0
    nan_proposals: int = 0
    rate_limited_ticks: int = 0
    clamped_ticks: int = 0
    watchdog_trips: int = 0
    estops: int = 0
    faults: int = 0
    recovery_ticks: int = 0
    hold_ticks: int = 0
    recovery_end: str = ""
    last_reason: str = ""
    first_takeover: str = ""  # why the layer first took the robot (a fault or a watchdog trip)

    @property
    def took_over(self) -> bool:
        """The layer took the robot from the policy (a fault or a watchdog trip; an e-stop is the
        operator's): what makes ``deploy run`` and ``drive`` exit 1."""
        return self.faults + self.watchdog_trips > 0


class SafetyLayer:
    """Clamp, rate-limit, NaN-guard, watchdog, e-stop and start ramp (see module docstring).

    Args:
      low, high: command limits (n,), physical units.
      max_rate: slew limits (n,) per second; ``inf`` for none.
      ramp_s: start ramp duration [s] (0 jumps straight to the policy).
      latch_watchdog: stay in FAULT after a watchdog trip until :meth:`release`.
      max_nan_ticks: consecutive non-finite proposals tolerated (holding the last command).
      safe_command: state (or None) -> the safe command (n,).
      initial_command: state -> the command the start ramp begins from (n,).
      recovery: the state-feedback fault response, or None (the safe command).
      hold_s: the blind hold's longest time without fresh state [s] (only with a recovery).
      hold_command: state (or None) -> the blind hold's command (n,).
    """

    def __init__(
        self,
        low: np.ndarray,
        high: np.ndarray,
        max_rate: np.ndarray,
        *,
        ramp_s: float,
        latch_watchdog: bool,
        max_nan_ticks: int,
        safe_command: Callable[[State | None], np.ndarray],
        initial_command: Callable[[State], np.ndarray],
        recovery: Recovery | None = None,
        hold_s: float = 0.0,
        hold_command: Callable[[State | None], np.ndarray] | None = None,
    ):
        self.low, self.high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        self.max_rate = np.asarray(max_rate, np.float64)
        self._limited = np.isfinite(self.max_rate)
        self.ramp_s, self.latch_watchdog, self.max_nan_ticks = float(ramp_s), bool(latch_watchdog), int(max_nan_ticks)
        self._safe_fn, self._initial_fn = safe_command, initial_command
        self._recovery, self._recovering, self._recovery_started = recovery, False, False
        self.hold_s = float(hold_s) if recovery is not None and hold_command is not None else 0.0
        self._hold_fn = hold_command
        self._hold_u: np.ndarray | None = None  # the blind hold's command while one may run
        self._fresh_s = -np.inf  # the last tick with fresh state
        self.mode = WAITING
        self.stats = SafetyStats()
        self._nan_run = 0
        self._t0 = 0.0
        self._u0 = self._held = self._safe(None)
        self._prev_u: np.ndarray | None = None
        self._prev_t: float | None = None

    # -- events ----------------------------------------------------------------------------------
    def estop(self, engaged: bool, state: State | None = None, reason: str = "e-stop") -> None:
        """E-stop topic: true engages (latched), false releases ESTOP and latched faults."""
        if engaged and self.mode != ESTOP:
            self.stats.estops += 1
            self._enter(ESTOP, state, reason)
        elif not engaged and self.mode in (ESTOP, FAULT):
            self.mode = WAITING
            self._nan_run = 0
            self._recovering, self._hold_u = False, None

    def trip(self, reason: str, state: State | None) -> None:
        """A check outside the layer failed (the state envelope): latched FAULT, safe command,
        until :meth:`release`."""
        if self.mode != FAULT:
            self.stats.faults += 1
            self._enter(FAULT, state, reason)
            self._begin_recovery(state)

    def release(self) -> None:
        """Same as an e-stop ``false``: leave ESTOP or a latched FAULT; the start ramp runs again."""
        self.estop(False)

    # -- per tick --------------------------------------------------------------------------------
    def step(self, now_s: float, proposal: np.ndarray | None, *, fresh: bool, state: State | None) -> np.ndarray:
        """The command to send this tick.

        Args:
          now_s: monotonic time [s].
          proposal: the policy's physical command, or None when it is unavailable or non-finite.
          fresh: every required state topic is younger than the watchdog timeout.
          state: the latest robot state (possibly stale), or None before any.
        """
        self.stats.ticks += 1
        if fresh:
            self._fresh_s = now_s
        if proposal is not None and not np.all(np.isfinite(proposal)):
            proposal = None
        if self.mode in (RAMP, RUNNING) and not fresh:
            self.stats.watchdog_trips += 1
            self._enter(FAULT if self.latch_watchdog else STALE, state, "watchdog: state stale")
            if self.mode == FAULT:
                self._begin_recovery(state)  # it starts once the state is back within hold_s
        elif self.mode in (WAITING, STALE) and fresh and state is not None:
            self.mode, self._t0, self._hold_u = RAMP, now_s, None
            self._u0 = self._clamp(self._initial_fn(state))
            self._prev_u, self._prev_t = self._u0, now_s
            self._nan_run = 0
        if self.mode in SAFE_MODES:
            return self._safe_tick(now_s, fresh, state)
        # RAMP and RUNNING are entered only above, which sets the previous command and time
        assert self._prev_u is not None and self._prev_t is not None

        if proposal is None:
            self.stats.nan_proposals += 1
            self._nan_run += 1
            if self._nan_run >= self.max_nan_ticks:
                self.stats.faults += 1
                self._enter(FAULT, state, f"{self._nan_run} non-finite actions in a row")
                self._begin_recovery(state)
                return self._safe_tick(now_s, fresh, state)
            target = self._prev_u
        else:
            self._nan_run = 0
            target = proposal
        if self.mode == RAMP:
            s = 1.0 if self.ramp_s <= 0 else min(1.0, (now_s - self._t0) / self.ramp_s)
            target = (1.0 - s) * self._u0 + s * target
            if s >= 1.0:
                self.mode = RUNNING
        dt = min(max(now_s - self._prev_t, 0.0), 0.1)
        step = np.full_like(self.max_rate, np.inf)  # (inf * 0 would be NaN)
        step[self._limited] = self.max_rate[self._limited] * dt
        u = np.clip(target, self._prev_u - step, self._prev_u + step)
        if np.any(u != target):
            self.stats.rate_limited_ticks += 1
        c = self._clamp(u)
        if np.any(c != u):
            self.stats.clamped_ticks += 1
        if not np.all(np.isfinite(c)):  # cannot happen with finite inputs; never let it out
            self.stats.faults += 1
            self._enter(FAULT, state, "non-finite command after limiting")
            return self._held.copy()
        self._prev_u, self._prev_t = c, now_s
        return c.copy()

    # -- helpers ---------------------------------------------------------------------------------
    def _clamp(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.asarray(u, np.float64), self.low, self.high)

    def _safe(self, state: State | None) -> np.ndarray:
        u = self._clamp(self._safe_fn(state))
        if not np.all(np.isfinite(u)):  # e.g. a hold pose from a broken encoder: fall back to range centre
            mid = np.where(np.isfinite(self.low + self.high), 0.5 * (self.low + self.high), 0.0)
            u = np.where(np.isfinite(u), u, self._clamp(mid))
        return u

    def _enter(self, mode: str, state: State | None, reason: str) -> None:
        self.mode = mode
        self.stats.last_reason = reason
        if mode != ESTOP and not self.stats.first_takeover:  # an e-stop is the operator's, not a takeover
            self.stats.first_takeover = reason
        self._held = self._safe(state)
        self._recovering = False
        # the operator's e-stop is obeyed at once; a fault or a stale link may hold blind first
        if self.hold_s > 0 and mode != ESTOP:
            assert self._hold_fn is not None  # hold_s > 0 only with a hold command (__init__)
            self._hold_u = self._clamp(self._hold_fn(state))
        else:
            self._hold_u = None

    def _begin_recovery(self, state: State | None) -> None:
        """After entering FAULT: recover where one is configured and the state is known (the first
        recovery tick is the fault's own tick, or the first with fresh state after a watchdog trip)."""
        self._recovering = self._recovery is not None and state is not None
        self._recovery_started = False

    def _safe_tick(self, now_s: float, fresh: bool, state: State | None) -> np.ndarray:
        """A tick in a safe mode: the blind hold while it may run, the recovery's command while one
        runs, else the held safe command."""
        self.stats.safe_ticks += 1
        if self._hold_u is not None and not fresh and now_s - self._fresh_s > self.hold_s:
            self._hold_u = None  # held as long as allowed: the safe command from here on
        if self._hold_u is not None and not fresh:
            self.stats.hold_ticks += 1
            u = self._hold_u
        else:
            u = self._recover(now_s, fresh, state) if self._recovering else self._held
        self._prev_u, self._prev_t = u, now_s
        return u.copy()

    def _recover(self, now_s: float, fresh: bool, state: State | None) -> np.ndarray:
        """The recovery's command this tick; the safe command once it ends or the state is stale."""
        assert self._recovery is not None  # _recovering (the only caller's guard) needs a recovery
        if not self._recovery_started:
            self._recovery.start(now_s)
            self._recovery_started = True
        u = self._recovery.command(now_s, state) if fresh and state is not None else None
        if u is not None and np.all(np.isfinite(u)):
            self.stats.recovery_ticks += 1
            return self._clamp(u)
        self._recovering, self._hold_u = False, None  # ended: nothing more to hold for
        self.stats.recovery_end = self._recovery.outcome or ("state stale" if not fresh else "non-finite command")
        self._held = self._safe(state)
        return self._held

    def snapshot(self) -> dict[str, Any]:
        """Mode and counters as plain data (for logs and JSON reports)."""
        return {"mode": self.mode, **dataclasses.asdict(self.stats)}
