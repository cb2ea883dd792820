"""The policy runner: one place for observations, inference, action post-processing and safety.

Transport-agnostic. A transport (the generated rclpy node, :mod:`simreal.deploy.transport_dds`,
a test) subscribes to :meth:`PolicyRunner.subscriptions`, hands every message to
:meth:`on_state` / :meth:`on_estop`, calls :meth:`tick` at the control rate and publishes
what :meth:`messages` returns. That is the whole contract::

    runner = PolicyRunner(load_bundle("bundle/"), msg_class=ros_types.msg_class)
    for sub in runner.subscriptions():      # name, topic, type, qos
        ...subscribe; callback: runner.on_state(sub.name, msg, time.monotonic())
    every period:
        result = runner.tick(time.monotonic())
        for topic, msg in runner.messages(result, stamp_ns=time.time_ns()):
            publish(topic, msg)

Per tick: the newest message of each state topic is decoded into the robot-state keys of
:mod:`simreal.observations` (the very functions the simulation used, with ``xp=numpy``),
completed by the task's fixed inputs and, for a bundle with a time-varying reference
(:mod:`simreal.reference`), the reference's row at the time since the first policy run;
a vision-language-action bundle's camera images and instruction come from their own topics
(:mod:`simreal.deploy.perception`: without a fresh image or an instruction the state counts as
stale, so the policy does not run and the watchdog's safe command goes out);
the observation goes through ONNX Runtime (a chunked policy's temporal ensemble: one
prediction per tick, started over after a tick without one), the normalised action becomes physical
(``offset + scale * a``), and :class:`simreal.deploy.safety.SafetyLayer` decides what
goes on the wire; a measured state outside the robot's envelope
(:mod:`simreal.deploy.envelope`) latches a fault first. Callbacks only store the decoded message
(one reference assignment), so they never block and need no lock; the tick owns everything else.

Imports: numpy, onnxruntime (through the bundle), simreal core; never jax or training code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from simreal.action_modes import action_mode
from simreal.bundle import Bundle, OnnxPolicy
from simreal.deploy.adapters import CommandCodec, StateDecoder, StateMessageError, complete_state, norm_type, stamp_ns
from simreal.deploy.config import (
    INPUT_ROLES,
    ROLE_KEYS,
    STATE_PROVIDES,
    DeployConfig,
    provided_state_keys,
    resolve_deploy_config,
    spec_of_bundle,
)
from simreal.deploy.envelope import Envelope
from simreal.deploy.landing import landing_for
from simreal.deploy.perception import Perception
from simreal.deploy.safety import ESTOP as ESTOP_MODE
from simreal.deploy.safety import FAULT, RAMP, RUNNING, SAFE_MODES, SafetyLayer
from simreal.errors import BundleError, ConfigError
from simreal.observations import TERMS, build_observation
from simreal.robot_spec import RobotSpec

#: Robot-state keys each observation term reads (besides runner-provided ones).
TERM_NEEDS: dict[str, tuple[str, ...]] = {
    "pos_error_w": ("pos_w", "target_pos_w"),
    "rot_mat_wb": ("quat_wxyz",),
    "lin_vel_w": ("lin_vel_w",),
    "lin_vel_b": ("quat_wxyz", "lin_vel_w"),
    "ang_vel_b": ("ang_vel_b",),
    "gravity_b": ("quat_wxyz",),
    "joint_pos_rel": ("joint_pos", "default_joint_pos"),
    "joint_vel": ("joint_vel",),
    "command": ("command",),
    "last_action": ("last_action",),
    "action_history": ("action_history",),
    "target_pos_w": ("target_pos_w",),
    "object_pos_w": ("object_pos_w",),
    "gait_phase": ("gait_phase",),
}
ESTOP = "__estop__"
#: Subscription names of a VLA bundle's camera images (``IMAGE + camera``) and instruction.
IMAGE, INSTRUCTION = "__image__/", "__instruction__"
#: The task inputs of a source that is not a topic (:meth:`PolicyRunner.on_task_input`).
TELEOP_INPUT = "__teleop__"


class Subscription(NamedTuple):
    name: str  # state topic name from the config, or ESTOP
    topic: str
    type: str
    qos: str


class Publication(NamedTuple):
    topic: str
    type: str
    qos: str


@dataclasses.dataclass(frozen=True)
class TickResult:
    """One control tick: what was sent and why."""

    t_s: float  # monotonic tick time [s]
    command: np.ndarray  # physical command sent (n,)
    mode: str  # safety mode after this tick
    action: np.ndarray | None  # normalised policy action, None when the policy did not run
    state_rx_s: float | None  # receive time of the newest state message used [s]
    publish: bool = True  # False until the first state message: the runner takes
    # over a robot only once it can see it
    state_stamp_ns: int | None = None  # header stamp of the newest state used (ROS clock)


@dataclasses.dataclass
class RunnerStats:
    state_msgs: int = 0
    bad_state_msgs: int = 0
    nonfinite_obs: int = 0
    nonfinite_actions: int = 0
    policy_runs: int = 0
    last_error: str = ""
    envelope_trip: str = ""  # why the state left the envelope (first time)
    envelope_trip_s: float | None = None  # when, after the hand-over [s]
    unjudged_ticks: int = 0  # ticks whose state the envelope could not judge (Envelope.unjudged)
    commands_clamped: int = 0  # ticks whose velocity command was beyond the trained range


def command_codec(bundle: Bundle, spec: RobotSpec, cfg: DeployConfig) -> CommandCodec:
    """The command message codec both ends use (the runner encodes, a simulated robot decodes)."""
    assert cfg.command is not None  # a resolved config (resolve_deploy_config refuses one without)
    act = bundle.action
    return CommandCodec(
        cfg.command.type,
        act.mode,
        act.names,
        action_mode(act.mode).full_scale(spec, act.names),
        cfg.command.channel_map,
        topic=cfg.command.topic,
        period_s=cfg.period_s,
        heartbeat_topic=cfg.command.heartbeat_topic,
        frame_id=cfg.command.frame_id,
    )


def initial_command(bundle: Bundle, spec: RobotSpec, kind: str, state: Mapping[str, np.ndarray] | None) -> np.ndarray:
    """Where the start ramp begins, in the action's units, for ``start.initial_command`` ``kind``:
    ``hover`` the thrust that holds a quadrotor's weight (where the action mode has one), else
    the safe command at ``state`` (zero thrust, or the measured joint pose held)."""
    mode = action_mode(bundle.action.mode)
    if kind == "hover":
        hover = mode.hover_command(spec, bundle.action.names)
        if hover is not None:
            return hover
    return mode.safe_command(spec, bundle.action.names, state)


def normalised_action(bundle: Bundle, u: np.ndarray) -> np.ndarray:
    """A command ``u`` in the action's units as the policy's normalised action,
    ``clip((u - offset) / scale, -1, 1)`` (a zero scale counts as 1)."""
    act = bundle.action
    scale = np.where(act.scale != 0, act.scale, 1.0)
    return np.clip((u - act.offset) / scale, -1.0, 1.0)


class PolicyRunner:
    """Bundle + deploy config -> commands, fed by any transport (see module docstring).

    Args:
      bundle: a loaded policy bundle.
      cfg: a resolved :class:`DeployConfig` (default: from the bundle, plus ``overrides``).
      spec: the robot spec (default: the one embedded in the bundle).
      policy: callable obs -> normalised action (default: ONNX Runtime on the bundle's graph).
      msg_class: ROS 2 type name -> message class used to build commands.
    """

    def __init__(
        self,
        bundle: Bundle,
        cfg: DeployConfig | None = None,
        *,
        spec: RobotSpec | None = None,
        policy: Callable[..., np.ndarray] | None = None,  # obs, or (obs, extra inputs) for a VLA bundle
        msg_class: Callable[[str], type] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ):
        self.bundle = bundle
        self.mode = action_mode(bundle.action.mode)
        self.spec = spec or spec_of_bundle(bundle)
        self.cfg = cfg or resolve_deploy_config(bundle, overrides, self.spec)
        if msg_class is None:
            from simreal.deploy.ros_types import msg_class as dds_msg_class  # Cyclone DDS classes

            msg_class = dds_msg_class
        self.msg_class = msg_class
        self._check_bundle()
        self._needs = {k for t in bundle.obs_names for k in TERM_NEEDS.get(t, ())}
        self.policy = policy or OnnxPolicy(bundle)
        self.perception = Perception(bundle, self.cfg.perception)
        act = bundle.action
        self.decoders = {
            name: StateDecoder(
                st.type, twist_frame=st.twist_frame, joint_names=self.spec.actuator_names, role_key=ROLE_KEYS[st.role]
            )
            for name, st in self.cfg.state.items()
        }
        # task inputs (a velocity command, a goal pose) are held until replaced; state is watched
        self._inputs = {
            n
            for n, st in self.cfg.state.items()
            if norm_type(st.type) == "geometry_msgs/msg/Twist" or st.role in INPUT_ROLES
        } | {TELEOP_INPUT}
        self._watched = [n for n in self.cfg.state if n not in self._inputs]
        self.codec = command_codec(bundle, self.spec, self.cfg)
        self.envelope = Envelope.from_config(self.cfg.envelope, self.spec)
        lim = self.cfg.limits
        self.safety = SafetyLayer(
            np.array(lim.low),
            np.array(lim.high),
            np.array(lim.max_rate),
            ramp_s=self.cfg.start.ramp_s,
            latch_watchdog=self.cfg.watchdog.latch,
            max_nan_ticks=self.cfg.max_nan_ticks,
            safe_command=self.safe_command,
            initial_command=self.initial_command,
            recovery=landing_for(self.spec, act.mode, act.names, self.cfg.fault),
            hold_s=self.cfg.watchdog.hold_s,
            hold_command=self.hold_command,
        )
        # stale when the *next* tick would be past the timeout: the safe command is on the
        # wire no later than timeout_s after the last state message
        self._stale_after_s = self.cfg.watchdog.timeout_s - self.cfg.period_s
        self._latest: dict[str, tuple[float, dict[str, np.ndarray], int | None]] = {}
        self._estop_request: bool | None = None
        self._started = False
        self._state_stamp: int | None = None
        self.last_action = np.zeros(act.size)
        # the actions before last_action, newest first, as the training env keeps them
        k = sum(t.size for t in bundle.obs_terms if t.name == "action_history") // max(act.size, 1)
        self.action_history = np.zeros((k, act.size))
        # the observation frames before this tick's, newest first, as the training env stacks them
        # (bundle.obs_history - 1 of them); after a safe mode, filled with the first frame again
        self.obs_frames = np.zeros((bundle.obs_history - 1, bundle.frame_size))
        self._frames_valid = False
        self.stats = RunnerStats()
        self._fixed: dict[str, np.ndarray] = {"last_action": self.last_action, "action_history": self.action_history}
        tp = bundle.task_params
        if "target_pos_w" in tp:
            self._fixed["target_pos_w"] = np.asarray(tp["target_pos_w"], np.float64)
        self._default_command = np.asarray(tp.get("command", np.zeros(3)), np.float64)
        # a velocity command (a Twist topic, a teleop) beyond what the policy was trained on is
        # clamped to it: the policy has never seen one, so what it would do is unknown
        self._command_ranges = bundle.command_ranges()
        # a time-varying task input (a figure-8, a motion) played back from the first policy run
        self.reference = bundle.reference
        self._engaged_s: float | None = None
        if self.spec.actuators:
            self._fixed["default_joint_pos"] = np.array([a.default for a in self.spec.actuators])

    # -- validation ------------------------------------------------------------------------------
    def _check_bundle(self) -> None:
        b, where = self.bundle, str(self.bundle.path / "bundle.yaml")
        if b.robot != self.spec.name:
            raise BundleError("robot", f"bundle is for '{b.robot}', the robot spec is '{self.spec.name}'", where)
        provided = provided_state_keys(self.cfg) | {"last_action", "action_history", "default_joint_pos", "command"}
        if "target_pos_w" in b.task_params:
            provided.add("target_pos_w")
        if b.reference is not None:
            provided.update(b.reference.values)
        for t in b.obs_terms:
            if t.name not in TERMS:
                raise BundleError(
                    "observation.terms", f"unknown term '{t.name}'; valid: {', '.join(sorted(TERMS))}", where
                )
            missing = [k for k in TERM_NEEDS.get(t.name, ()) if k not in provided]  # new terms: checked at run time
            if missing:
                hint = (
                    "task_params.target_pos_w in the bundle"
                    if missing == ["target_pos_w"]
                    else "a state topic of type "
                    + " or ".join(ty for ty, ks in STATE_PROVIDES.items() if missing[0] in ks)
                )
                raise ConfigError(
                    "state",
                    f"observation term '{t.name}' needs {missing}, which no configured "
                    f"state topic provides; add {hint}",
                )

    def inputs_only_topics_give(self) -> list[str]:
        """Task inputs the policy observes that only a task topic gives (a goal pose:
        ``target_pos_w``), not the bundle's ``task_params``: what a caller feeding no ROS topics
        (``simreal drive``) must supply, or the policy never runs."""
        from_topics = {
            ROLE_KEYS[self.cfg.state[n].role]
            for n in self._inputs
            if n in self.cfg.state and self.cfg.state[n].role in INPUT_ROLES
        }
        return sorted(k for k in self._needs if k in from_topics and k not in self._fixed)

    # -- safe and initial commands ---------------------------------------------------------------
    def safe_command(self, state: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """The action mode's safe command (:mod:`simreal.action_modes`): zero thrust, or hold the
        measured pose for joint position targets."""
        return self.mode.safe_command(self.spec, self.bundle.action.names, state)

    def initial_command(self, state: Mapping[str, np.ndarray]) -> np.ndarray:
        """Where the start ramp begins (:func:`initial_command`)."""
        return initial_command(self.bundle, self.spec, self.cfg.start.initial_command, state)

    def hold_command(self, state: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """The blind hold's command (hover thrust and, for ``ctbr``, zero body rates)."""
        return initial_command(self.bundle, self.spec, "hover", state)

    # -- transport interface ---------------------------------------------------------------------
    def subscriptions(self) -> list[Subscription]:
        subs = [Subscription(n, st.topic, norm_type(st.type), st.qos) for n, st in self.cfg.state.items()]
        if self.cfg.estop_topic:
            subs.append(Subscription(ESTOP, self.cfg.estop_topic, "std_msgs/msg/Bool", "reliable"))
        per = self.cfg.perception
        subs += [
            Subscription(IMAGE + cam, topic, "sensor_msgs/msg/Image", per.image_qos)
            for cam, topic in per.image_topics.items()
        ]
        if per.instruction_topic:
            subs.append(Subscription(INSTRUCTION, per.instruction_topic, "std_msgs/msg/String", "reliable"))
        return subs

    def publications(self) -> list[Publication]:
        assert self.cfg.command is not None  # a resolved config (resolve_deploy_config refuses one without)
        pubs = [Publication(self.cfg.command.topic, norm_type(self.cfg.command.type), self.cfg.command.qos)]
        if self.cfg.command.heartbeat_topic:
            pubs.append(
                Publication(self.cfg.command.heartbeat_topic, "px4_msgs/msg/OffboardControlMode", self.cfg.command.qos)
            )
        return pubs

    def on_state(self, name: str, msg: Any, now_s: float) -> bool:
        """Store a state message (decoded) received at ``now_s``; False if it was refused."""
        try:
            d = self.decoders[name](msg)
        except (StateMessageError, AttributeError, IndexError, ValueError, TypeError) as e:
            self.stats.bad_state_msgs += 1
            self.stats.last_error = f"{name}: {e}"
            return False
        header = getattr(msg, "header", None)
        return self._store((name,), d, now_s, stamp_ns(header.stamp) if header is not None else None)

    def on_robot_state(self, state: Mapping[str, np.ndarray], now_s: float) -> bool:
        """Store a robot state already in robot-state keys (a :mod:`simreal.hardware` driver's
        ``observation()``) as every watched state topic, measured at ``now_s``; False if refused."""
        d = {k: np.asarray(v, np.float64) for k, v in state.items() if k != "t_s"}
        return self._store(tuple(self._watched), d, now_s, None)

    def _store(self, names: tuple[str, ...], d: dict[str, np.ndarray], now_s: float, stamp: int | None) -> bool:
        if not np.isfinite(np.concatenate([np.ravel(v) for v in d.values()])).all():
            self.stats.bad_state_msgs += 1
            self.stats.last_error = f"{'/'.join(names)}: non-finite values"
            return False
        for name in names:
            self._latest[name] = (now_s, d, stamp)  # one assignment: safe against a concurrent tick
        self.stats.state_msgs += 1
        return True

    def on_task_input(self, values: Mapping[str, np.ndarray], now_s: float) -> None:
        """Task inputs from a source that is not a topic (a teleoperator of ``simreal drive``:
        a velocity ``command``), received at ``now_s``: held and aged like a Twist topic's (a
        command older than the watchdog's timeout reads as zero)."""
        self._latest[TELEOP_INPUT] = (now_s, {k: np.asarray(v, np.float64) for k, v in values.items()}, None)

    def on_estop(self, msg: Any, now_s: float | None = None) -> None:
        """std_msgs/Bool: true engages the e-stop, false releases it (applied at the next tick)."""
        self._estop_request = bool(getattr(msg, "data", msg))

    def dispatch(self, name: str, msg: Any, now_s: float) -> None:
        """Route a subscription's message (``name`` from :meth:`subscriptions`)."""
        if name == ESTOP:
            self.on_estop(msg, now_s)
        elif name.startswith(IMAGE) or name == INSTRUCTION:
            ok = (
                self.perception.on_image(name[len(IMAGE) :], msg, now_s)
                if name.startswith(IMAGE)
                else self.perception.on_instruction(msg)
            )
            if not ok:
                self.stats.last_error = self.perception.last_error
        else:
            self.on_state(name, msg, now_s)

    def is_state(self, name: str) -> bool:
        """Whether subscription ``name`` carries robot state (``trigger: state`` ticks on those, not
        on the e-stop, camera images or the instruction)."""
        return name in self.cfg.state

    def timer_tick_due(self, now_s: float) -> bool:
        """With ``trigger: state``, whether a timer tick is needed: the state is about to go stale
        (the watchdog must act), an e-stop request is pending (it acts at once, not at the next
        state message) or the layer is in a safe mode (keep the safe command streaming)."""
        if self.safety.mode in SAFE_MODES or self._estop_request is not None:
            return True
        latest = dict(self._latest)
        ages = [now_s - latest[n][0] for n in self._watched if n in latest]
        return not ages or max(ages) > self._stale_after_s

    # -- the tick --------------------------------------------------------------------------------
    def _assemble(self, now_s: float) -> tuple[dict[str, np.ndarray] | None, bool, float | None]:
        latest = dict(self._latest)
        if any(n not in latest for n in self._watched):
            return None, False, None
        s: dict[str, np.ndarray] = {}
        t_rx = [latest[n][0] for n in self._watched]
        for n in self._watched:
            s.update(latest[n][1])
        complete_state(s)
        s["command"] = self._default_command
        s.update(self._fixed)
        if self.reference is not None:
            s.update(self.reference.at(now_s - self._engaged_s if self._engaged_s is not None else 0.0))
        for n in self._inputs:
            if n in latest:
                t, d, _ = latest[n]
                if "command" in d:  # a velocity command goes stale like state: stop when it does
                    d = {
                        "command": self._trained_command(d["command"])
                        if now_s - t <= self.cfg.watchdog.timeout_s
                        else np.zeros(3)
                    }
                s.update(d)
        if any(k not in s for k in self._needs):  # a task input (a goal) that has not arrived yet
            return None, False, None
        fresh = all(now_s - t <= self._stale_after_s for t in t_rx)
        stamps = [stamp for stamp in (latest[n][2] for n in self._watched) if stamp is not None]
        self._state_stamp = max(stamps) if stamps else None
        return s, fresh, max(t_rx)

    def _trained_command(self, cmd: np.ndarray) -> np.ndarray:
        """A received velocity command clamped to the range the policy was trained on (counted)."""
        if self._command_ranges is None:
            return cmd
        clamped = np.clip(cmd, self._command_ranges[:, 0], self._command_ranges[:, 1])
        if np.any(clamped != cmd):
            self.stats.commands_clamped += 1
        return clamped

    def _normalised(self, u: np.ndarray) -> np.ndarray:
        return normalised_action(self.bundle, u)

    def tick(self, now_s: float) -> TickResult:
        """One control step at monotonic time ``now_s`` [s]."""
        if self._estop_request is not None:
            req, self._estop_request = self._estop_request, None
            self.safety.estop(req, self._assemble(now_s)[0])
        state, fresh, t_rx = self._assemble(now_s)
        if state is not None and self.envelope.unjudged(state) is not None:
            # a state no check can judge latches the fault below, and steers nothing (no policy run,
            # no recovery): as stale state, the blind hold and then the safe command
            self.stats.unjudged_ticks += 1
            fresh = False
        if state is not None and self.safety.mode not in (FAULT, ESTOP_MODE):
            why = self.envelope.violation(state)
            if why is not None:
                self.safety.trip(f"envelope: {why}", state)
                if self.stats.envelope_trip_s is None:
                    self.stats.envelope_trip = why
                    self.stats.envelope_trip_s = self.engaged_for(now_s) or 0.0
        if self.safety.mode in SAFE_MODES and state is not None:
            # the ramp will start from initial_command: that is the policy's "previous action"
            # (and, held, each one before it)
            self.last_action[:] = self._normalised(self.initial_command(state))
            self.action_history[:] = self.last_action
            self._frames_valid = False  # the policy's first frame starts its history, as a new episode
        proposal, action = None, None
        frames = self.obs_frames
        extra = self.perception.inputs(now_s) if self.perception.active else None
        if self.perception.active and extra is None:
            fresh = False  # no fresh camera image or no instruction: as stale state, the watchdog acts
        if state is not None and fresh and self.safety.mode not in (FAULT, ESTOP_MODE):
            if self._engaged_s is None:  # the hand-over: a reference's clock starts here
                self._engaged_s = now_s
            frame = build_observation(self.bundle.obs_names, state, np)
            if len(frames):
                frames = np.concatenate(
                    [frame[None], frames if self._frames_valid else np.tile(frame, (len(frames), 1))]
                )
            obs = frames.reshape(-1) if len(frames) else frame
            if np.all(np.isfinite(obs)):
                a = np.asarray(self.policy(obs) if extra is None else self.policy(obs, extra), np.float64).reshape(-1)
                self.stats.policy_runs += 1
                if np.all(np.isfinite(a)):
                    action = np.clip(a, -1.0, 1.0)
                    proposal = self.bundle.action.to_physical(action)
                else:
                    self.stats.nonfinite_actions += 1
            else:
                self.stats.nonfinite_obs += 1
        if action is None and isinstance(self.policy, OnnxPolicy):
            # a chunked bundle ensembles one prediction per tick: after a tick without one the
            # earlier chunks no longer line up with the ticks, so the ensemble starts over
            self.policy.reset()
        u = self.safety.step(now_s, proposal, fresh=fresh, state=state)
        if action is not None and self.safety.mode in (RAMP, RUNNING):
            if len(self.action_history):
                self.action_history[1:] = self.action_history[:-1]
                self.action_history[0] = self.last_action
            self.last_action[:] = action
            if len(self.obs_frames):
                self.obs_frames = frames[:-1]
                self._frames_valid = True
        if state is not None:
            self._started = True
        return TickResult(
            now_s, u, self.safety.mode, action, t_rx, publish=self._started, state_stamp_ns=self._state_stamp
        )

    def shutdown(self, now_s: float, reason: str = "shutdown") -> TickResult:
        """Engage the e-stop (``reason`` recorded) and tick once: the safe command to publish
        before exiting."""
        self.safety.estop(True, self._assemble(now_s)[0], reason=reason)
        return self.tick(now_s)

    def engaged_for(self, now_s: float) -> float | None:
        """Seconds since the first policy evaluation (the hand-over), None before it."""
        return None if self._engaged_s is None else now_s - self._engaged_s

    def messages(self, result: TickResult, stamp_ns: int) -> list[tuple[str, Any]]:
        """(topic, message) pairs to publish for a tick; ``stamp_ns`` is the wall/ROS clock."""
        if not result.publish:
            return []
        return self.codec.encode(result.command, stamp_ns, self.msg_class, sample_stamp=result.state_stamp_ns)

    def snapshot(self) -> dict[str, Any]:
        """Counters and safety state as plain data."""
        return {**dataclasses.asdict(self.stats), "safety": self.safety.snapshot()}


def took_over(safety: dict[str, Any]) -> bool:
    """Whether the safety layer took the robot from the policy, from its ``snapshot()``
    (``SafetyStats.took_over``: a fault or a watchdog trip)."""
    return safety.get("faults", 0) + safety.get("watchdog_trips", 0) > 0


def runner_lines(runner: dict[str, Any]) -> list[str]:
    """Ticks, policy runs, the safety layer's final mode and the envelope (a runner's
    ``snapshot()`` with ``ticks``), as report lines; ``simreal drive`` prints them too."""
    safety = runner["safety"]
    trip = runner.get("envelope_trip_s")
    took = took_over(safety)
    return [
        f"runner     {runner['ticks']} ticks, {runner['state_msgs']} state messages, policy ran "
        f"{runner['policy_runs']} times, safety {safety['mode']}"
        + (f" ({safety['last_reason']})" if safety.get("last_reason") else ""),
        *(
            [
                f"took over  {safety['faults']} faults, {safety['watchdog_trips']} watchdog trips; the first: "
                f"{safety['first_takeover']}"
            ]
            if took
            else []
        ),
        (
            "envelope   stayed inside"
            + (
                " while checked: not after the safety layer took over (its state checks stop with a latched fault)"
                if took
                else ""
            )
        )
        if trip is None
        else f"envelope   left {trip:.2f} s after the hand-over: {runner['envelope_trip']}; "
        + (
            f"landed ({safety['recovery_end'] or 'still descending'})"
            if safety.get("recovery_ticks")
            else "safe command latched"
        ),
    ]
