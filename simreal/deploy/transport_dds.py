"""ROS 2 on the wire without ROS: Cyclone DDS with ROS 2's names, types, encoding and QoS.

What makes a Cyclone DDS reader or writer indistinguishable from an ``rclpy`` one (as
``rmw_cyclonedds`` maps them):

- topic ``/cf/odom`` is DDS topic ``rt/cf/odom``;
- type ``nav_msgs/msg/Odometry`` is DDS type ``nav_msgs::msg::dds_::Odometry_``, with the
  ROS ``.msg`` layout (:mod:`simreal.deploy.ros_types`);
- data representation XCDR1 (plain CDR, little endian), keyless topics;
- QoS profiles as ``rclpy.qos`` names them: ``default`` (reliable, volatile, keep last 10),
  ``sensor_data`` (best effort, volatile, keep last 5); a best-effort reader matches
  reliable and best-effort writers, a reliable writer matches both kinds of reader.

One thread does everything: :meth:`DdsTransport.poll` blocks in a Cyclone ``WaitSet``
(the GIL released) until a subscribed topic has data or the timeout passes, then takes
every sample and calls its callback with the receive time. No listener threads, so no
locks and no GIL ping-pong on the control path; :class:`PeriodicTimer` and
:class:`DdsPolicyNode` build the control loop on it.

The domain is configured for loopback by default (:func:`loopback_config`): interface
``lo``, unicast discovery on 127.0.0.1, no multicast. Pass ``loopback=False`` to use
Cyclone's own configuration (``CYCLONEDDS_URI``) on a real network, as a ROS 2 machine
would.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

import numpy as np
from cyclonedds.core import InstanceState, Policy, Qos, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from simreal.deploy.realtime import frozen_heap
from simreal.deploy.ros_types import dds_topic_name, msg_class
from simreal.errors import ConfigError

try:  # the raw (serialized) read/write calls DataReader.take and DataWriter.write use inside
    from cyclonedds._clayer import ddspy_take, ddspy_write
except ImportError:  # pragma: no cover - other cyclonedds builds
    ddspy_take = ddspy_write = None

_ANY = SampleState.Any | ViewState.Any | InstanceState.Any
_XCDR1 = Policy.DataRepresentation(use_cdrv0_representation=True, use_xcdrv2_representation=False)


def qos_profile(name: str) -> Qos:
    """A ROS 2 QoS profile as Cyclone QoS (see module docstring)."""
    reliable = Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100))
    profiles = {
        "default": (reliable, Policy.History.KeepLast(10)),
        "reliable": (reliable, Policy.History.KeepLast(10)),
        "sensor_data": (Policy.Reliability.BestEffort, Policy.History.KeepLast(5)),
        "best_effort": (Policy.Reliability.BestEffort, Policy.History.KeepLast(10)),
    }
    if name not in profiles:
        raise ConfigError("qos", f"unknown QoS profile '{name}'; valid: {', '.join(profiles)}")
    rel, hist = profiles[name]
    return Qos(rel, hist, Policy.Durability.Volatile, _XCDR1)


def loopback_config(max_participants: int = 32) -> str:
    """Cyclone DDS XML: loopback only, unicast discovery, no multicast (``lo`` has none).

    The participant announces itself (SPDP) to the peers' ports every second, not Cyclone's
    default 30 s: a ROS 2 node on Fast DDS started after it announces itself by multicast only
    (unless ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``), which never reaches a loopback
    participant, so the two met only at this participant's next announcement, and a rehearsal
    gave up first (no hand-over)."""
    return (
        "<CycloneDDS><Domain id='any'><General><Interfaces><NetworkInterface name='lo'/></Interfaces>"
        "<AllowMulticast>false</AllowMulticast></General>"
        f"<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>{max_participants}"
        "</MaxAutoParticipantIndex><Peers><Peer address='127.0.0.1'/></Peers><SPDPInterval>1s</SPDPInterval>"
        "</Discovery>"
        "</Domain></CycloneDDS>"
    )


def interface_config(name: str) -> str:
    """Cyclone DDS XML for one network interface, as unitree_sdk2's ChannelFactoryInitialize writes it."""
    return (
        f"<CycloneDDS><Domain id='any'><General><Interfaces><NetworkInterface name='{name}' priority='default' "
        "multicast='default'/></Interfaces></General></Domain></CycloneDDS>"
    )


_domains: dict[int, Domain] = {}
_default_domains: set[int] = set()  # asked for with Cyclone's own configuration
_domains_lock = threading.Lock()


def configured_domains() -> set[int]:
    """The DDS domain ids this process has asked :func:`domain` for: their configuration is
    fixed for the life of the process."""
    with _domains_lock:
        return set(_domains) | _default_domains


def domain(domain_id: int, interface: str | None = "lo") -> Domain | None:
    """The process's Domain for ``domain_id`` (Cyclone takes one configuration per domain and
    process): loopback (``"lo"``, :func:`loopback_config`), a named network interface
    (``"enp3s0"``, :func:`interface_config`), or None / ``""`` for Cyclone's own configuration
    (``CYCLONEDDS_URI``). The first caller's choice holds for the process."""
    if not interface:
        with _domains_lock:
            _default_domains.add(domain_id)
        return None
    with _domains_lock:
        if domain_id not in _domains:
            xml = loopback_config() if interface == "lo" else interface_config(interface)
            _domains[domain_id] = Domain(domain_id, xml)
        return _domains[domain_id]


def default_domain_id() -> int:
    """``ROS_DOMAIN_ID`` as ROS 2 reads it (0 when unset)."""
    try:
        return int(os.environ.get("ROS_DOMAIN_ID", "0"))
    except ValueError:
        raise ConfigError("ROS_DOMAIN_ID", f"expected an integer 0..232, got {os.environ['ROS_DOMAIN_ID']!r}") from None


@dataclasses.dataclass
class _Sub:
    reader: DataReader
    cls: type[IdlStruct]
    callback: Callable[[Any, float, bytes], None]
    condition: ReadCondition


class Publisher:
    """Writes ROS 2 messages of one topic; returns the serialized CDR bytes it sent."""

    def __init__(self, writer: DataWriter, cls: type, topic: str):
        self.writer, self.cls, self.topic = writer, cls, topic

    def publish(self, msg: Any) -> bytes:
        """Serialize (XCDR1) and write ``msg``; the returned bytes are what a bag records."""
        data = msg.serialize(use_version_2=False)
        if ddspy_write is not None:
            padded = data + b"\0" * (-len(data) % 4)  # as DataWriter.write pads
            ret = ddspy_write(self.writer._ref, padded)
            if ret < 0:
                raise RuntimeError(f"DDS write on {self.topic} failed ({ret})")
        else:  # pragma: no cover
            self.writer.write(msg)
        return data

    def matched(self) -> int:
        """Number of matched subscriptions (readers) right now."""
        return len(self.writer.get_matched_subscriptions())


class DdsTransport:
    """A DDS participant speaking ROS 2 (see module docstring); use as a context manager.

    Args:
      domain_id: DDS domain = ROS_DOMAIN_ID (0..232).
      loopback: confine discovery and traffic to 127.0.0.1.
    """

    def __init__(self, domain_id: int = 0, *, loopback: bool = True):
        if not 0 <= domain_id <= 232:
            raise ConfigError("domain_id", f"must be in 0..232 (ROS_DOMAIN_ID), got {domain_id}")
        self.domain_id = domain_id
        self._domain = domain(domain_id, "lo" if loopback else None)
        # None once closed (close() drops them for their finalisers)
        self.participant: DomainParticipant | None = DomainParticipant(domain_id)
        self.waitset: WaitSet | None = WaitSet(self.participant)
        self._topics: dict[str, Topic] = {}
        self._subs: list[_Sub] = []
        self.publishers: dict[str, Publisher] = {}

    def __enter__(self) -> DdsTransport:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _topic(self, ros_topic: str, ros_type: str | type) -> tuple[Topic, type[IdlStruct]]:
        """The topic and its message class: ``ros_type`` a ROS 2 type name, or a class itself
        (a version's layout of a type, :class:`~simreal.deploy.ros_types.VehicleStatusHead`)."""
        # a class given is a message class: cyclonedds' Topic takes IdlStruct types only
        cls = cast("type[IdlStruct]", ros_type) if isinstance(ros_type, type) else msg_class(ros_type)
        name = dds_topic_name(ros_topic)
        if name not in self._topics:
            assert self.participant is not None  # not closed (close() drops the participant)
            self._topics[name] = Topic(self.participant, name, cls)
        return self._topics[name], cls

    def subscribe(
        self,
        ros_topic: str,
        ros_type: str | type,
        callback: Callable[[Any, float, bytes], None],
        qos: str = "sensor_data",
    ) -> None:
        """Call ``callback(msg, t_rx_s, cdr_bytes)`` from :meth:`poll` for every sample."""
        topic, cls = self._topic(ros_topic, ros_type)
        # open: a closed transport has no topics, and _topic refuses to make one
        assert self.participant is not None and self.waitset is not None
        reader = DataReader(self.participant, topic, qos=qos_profile(qos))
        cond = ReadCondition(reader, _ANY)
        self.waitset.attach(cond)
        self._subs.append(_Sub(reader, cls, callback, cond))

    def publisher(self, ros_topic: str, ros_type: str | type, qos: str = "default") -> Publisher:
        topic, cls = self._topic(ros_topic, ros_type)
        if ros_topic not in self.publishers:
            assert self.participant is not None  # open: as in subscribe
            self.publishers[ros_topic] = Publisher(
                DataWriter(self.participant, topic, qos=qos_profile(qos)), cls, ros_topic
            )
        return self.publishers[ros_topic]

    def drain(self, now_s: float | None = None) -> int:
        """Take every available sample of every subscription; returns how many were handled."""
        n = 0
        for sub in self._subs:
            if ddspy_take is not None:
                ret = ddspy_take(sub.reader._ref, _ANY, 64)
                if isinstance(ret, int):
                    raise RuntimeError(f"DDS take failed ({ret})")
                if not ret:
                    continue
                t = time.monotonic() if now_s is None else now_s
                for data, info in ret:
                    if info.valid_data:
                        sub.callback(sub.cls.deserialize(data), t, _strip_padding(data))
                        n += 1
            else:  # pragma: no cover
                samples = sub.reader.take(N=64)
                t = time.monotonic() if now_s is None else now_s
                for s in samples:
                    sub.callback(s, t, s.serialize(use_version_2=False))
                    n += 1
        return n

    def poll(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for data (GIL released), then :meth:`drain`."""
        if timeout_s > 0 and self._subs:
            assert self.waitset is not None  # subscriptions exist only while open (close() clears them)
            self.waitset.wait(max(1, int(timeout_s * 1e9)))
        elif timeout_s > 0:
            time.sleep(timeout_s)
        return self.drain()

    def wait_for_match(self, timeout_s: float = 5.0, min_matched: int = 1) -> bool:
        """Block until every publisher has ``min_matched`` readers (discovery is asynchronous)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(p.matched() >= min_matched for p in self.publishers.values()):
                return True
            self.poll(0.01)
        return False

    def close(self) -> None:
        """Delete the participant (and with it every reader and writer)."""
        if self.waitset is not None:  # (closed already: no subscriptions left to detach)
            for sub in self._subs:
                self.waitset.detach(sub.condition)
        self._subs.clear()
        self.publishers.clear()
        self._topics.clear()
        self.waitset = None
        self.participant = None  # the Entity finaliser deletes it, and with it its readers and writers


def _strip_padding(data: bytes) -> bytes:
    """The serialized message as rosbags stores it. XCDR1 writers may pad to 4 bytes; the
    encapsulation options' low 2 bits give that padding where a writer sets them."""
    pad = data[3] & 0x3 if len(data) >= 4 else 0
    return data[: len(data) - pad] if pad else data


class Pollable(Protocol):
    """What :meth:`PeriodicTimer.wait` sleeps in: a transport that blocks up to ``timeout_s`` for
    data and says how much arrived (:class:`DdsTransport`, the Unitree driver's channel)."""

    def poll(self, timeout_s: float) -> int: ...


class PeriodicTimer:
    """Absolute-deadline periodic timer: sleep (in the transport's WaitSet) then spin.

    Deadlines are ``t0 + k * period`` (no drift); a tick later than one period skips the
    missed deadlines and counts an overrun. ``spin_s`` is the final stretch busy-waited to
    beat the OS's wake-up latency.
    """

    def __init__(self, period_s: float, *, spin_s: float = 0.0003, start_s: float | None = None):
        self.period_s, self.spin_s = float(period_s), float(spin_s)
        self.next_s = (time.monotonic() if start_s is None else start_s) + self.period_s
        self.overruns = 0

    def wait(self, transport: Pollable | None, on_data: Callable[[], None] | None = None) -> float:
        """Block until the next deadline, polling ``transport`` meanwhile; returns the deadline [s]."""
        while True:
            now = time.monotonic()
            left = self.next_s - now - self.spin_s
            if left <= 0:
                break
            if transport is not None:
                if transport.poll(left) and on_data is not None:
                    on_data()
            else:
                time.sleep(left)
        while time.monotonic() < self.next_s:
            pass
        deadline = self.next_s
        self.next_s += self.period_s
        now = time.monotonic()
        if now > self.next_s:
            missed = int((now - self.next_s) / self.period_s) + 1
            self.overruns += missed
            self.next_s += missed * self.period_s
        return deadline


@dataclasses.dataclass
class TickTiming:
    """Per-tick timing samples [s] on the monotonic clock (for benchmarks and reports)."""

    deadline: list[float] = dataclasses.field(default_factory=list)
    start: list[float] = dataclasses.field(default_factory=list)
    state_rx: list[float] = dataclasses.field(default_factory=list)
    written: list[float] = dataclasses.field(default_factory=list)
    by_state: list[bool] = dataclasses.field(default_factory=list)  # tick triggered by a state message

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            k: np.asarray(v, dtype=bool if k == "by_state" else np.float64) for k, v in dataclasses.asdict(self).items()
        }


class DdsPolicyNode:
    """The policy runner over DDS: ROS 2's ``rclpy`` node, without ROS.

    Args:
      runner: a :class:`simreal.deploy.runner.PolicyRunner`.
      transport: a :class:`DdsTransport`.
      recorder: optional :class:`simreal.deploy.bag.BagRecorder`; receives every message
        taken and sent (its writes happen on its own thread).
      spin_s: see :class:`PeriodicTimer`.
      keep_timing: keep per-tick timing samples (benchmarks).
    """

    def __init__(
        self, runner, transport: DdsTransport, *, recorder=None, spin_s: float = 0.0003, keep_timing: bool = False
    ):
        self.runner, self.transport, self.recorder = runner, transport, recorder
        self.spin_s = spin_s
        self.timing = TickTiming() if keep_timing else None
        self.ticks = 0
        self.modes: dict[str, int] = {}
        self.max_tick_gap_s = 0.0  # the longest time between two ticks after the hand-over [s]
        self.timer_overruns = 0
        self._pending_state = False
        self._last_tick_s = -1.0
        for sub in runner.subscriptions():
            transport.subscribe(sub.topic, sub.type, self._callback(sub.name, sub.topic, sub.type), sub.qos)
        for pub in runner.publications():
            transport.publisher(pub.topic, pub.type, pub.qos)
            if recorder is not None:
                recorder.add_topic(pub.topic, pub.type)
        if recorder is not None:
            for sub in runner.subscriptions():
                recorder.add_topic(sub.topic, sub.type)

    def _callback(self, name: str, topic: str, type_name: str):
        dispatch = self.runner.dispatch

        def on_msg(msg: Any, t_rx: float, data: bytes) -> None:
            dispatch(name, msg, t_rx)
            if self.runner.is_state(name):
                self._pending_state = True
            if self.recorder is not None:
                self.recorder.write(topic, data, time.time_ns())

        return on_msg

    def tick(self, now_s: float, deadline_s: float | None = None, *, by_state: bool = False):
        """Run one runner tick and publish its messages."""
        res = self.runner.tick(now_s)
        stamp = time.time_ns()
        pubs = self.transport.publishers
        for topic, msg in self.runner.messages(res, stamp):
            data = pubs[topic].publish(msg)
            if self.recorder is not None:
                self.recorder.write(topic, data, stamp)
        t_w = time.monotonic()
        self.ticks += 1
        self.modes[res.mode] = self.modes.get(res.mode, 0) + 1
        if self._last_tick_s >= 0.0 and self.runner.engaged_for(self._last_tick_s) is not None:
            self.max_tick_gap_s = max(self.max_tick_gap_s, now_s - self._last_tick_s)
        self._last_tick_s = now_s
        if self.timing is not None:
            self.timing.deadline.append(now_s if deadline_s is None else deadline_s)
            self.timing.start.append(now_s)
            self.timing.state_rx.append(np.nan if res.state_rx_s is None else res.state_rx_s)
            self.timing.written.append(t_w)
            self.timing.by_state.append(by_state)
        return res

    def spin(
        self,
        duration_s: float | None = None,
        stop: threading.Event | None = None,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Run the control loop: ticks at the control rate (``trigger: timer``) or on every
        state message (``trigger: state``; then timer ticks only when the state is going stale
        or the safety layer is in a safe mode, so the watchdog still acts on time)."""
        with frozen_heap():  # before the clock starts: its one full collection takes a while
            timer = PeriodicTimer(self.runner.cfg.period_s, spin_s=self.spin_s)
            end = None if duration_s is None else time.monotonic() + duration_s
            try:
                self._loop(timer, end, self.runner.cfg.trigger == "state", stop, until)
            finally:
                self.timer_overruns = timer.overruns

    def _loop(
        self,
        timer: PeriodicTimer,
        end: float | None,
        event_driven: bool,
        stop: threading.Event | None,
        until: Callable[[], bool] | None,
    ) -> None:
        # trigger state: a state message ticks unless the timer is ticking anyway (a safe mode streams
        # the safe command at the control rate; ticking on state too sent two commands a period)
        def on_data() -> None:
            if event_driven and self._pending_state and not self.runner.timer_tick_due(time.monotonic()):
                self._pending_state = False
                self.tick(time.monotonic(), by_state=True)

        while not (stop is not None and stop.is_set()) and not (until is not None and until()):
            deadline = timer.wait(self.transport, on_data)
            if end is not None and deadline >= end:
                break
            now = time.monotonic()
            self.transport.drain(now)
            if event_driven:
                if self.runner.timer_tick_due(now):
                    self._pending_state = False
                    self.tick(now, deadline)
                elif self._pending_state:
                    self._pending_state = False
                    self.tick(time.monotonic(), by_state=True)
            else:
                self._pending_state = False
                self.tick(now, deadline)
