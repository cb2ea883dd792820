"""Session recording as a rosbag2 (MCAP storage + ``metadata.yaml``), via rosbags.

The bytes recorded are the CDR messages exactly as sent or received on DDS (the transport
hands them over), so a bag is a faithful log of the wire; ``ros2 bag info/play`` (Jazzy)
and rosbags read it. Writing happens on a background thread: a control loop only puts
``(topic, bytes, t_ns)`` on a queue and never waits on the disk.

Message definitions come from rosbags' ROS 2 Jazzy type store; the px4_msgs types, which
it lacks, are registered from :mod:`simreal.deploy.ros_types` (their fields are the wire
layout the DDS test pins). Bag format version 9 (Jazzy's).

    with BagRecorder("session_bag") as rec:
        rec.add_topic("/cf/odom", "nav_msgs/msg/Odometry")
        rec.write("/cf/odom", cdr_bytes, time.time_ns())
    read_bag_counts("session_bag")      # {"/cf/odom": 1}
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simreal.errors import DataFileError

_STOP = object()


def typestore(classes: Sequence[type] = ()):
    """rosbags' ROS 2 Jazzy type store plus the px4_msgs types deploy speaks and the message
    classes ``classes`` (a driver's wire types, e.g. Unitree's ``unitree_hg/msg/LowCmd``),
    each with the types it nests, registered from their fields' ``.msg`` spelling."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from simreal.deploy.ros_types import MESSAGE_TYPES, msg_definition, nested_types, ros_type_name

    ts = get_typestore(Stores.ROS2_JAZZY)
    wanted = [c for cls in (*MESSAGE_TYPES.values(), *classes) for c in nested_types(cls)]
    for cls in wanted:  # nested first, so a type's fields resolve when it is registered
        name = ros_type_name(cls)
        if name not in ts.types:
            ts.register(get_types_from_msg(msg_definition(cls), name))
    return ts


class BagRecorder:
    """Record CDR messages into a new rosbag2 folder (MCAP); thread-safe ``write``.

    Args:
      path: the bag folder to create (must not exist).
      classes: message classes beyond ROS 2 Jazzy's and deploy's (:func:`typestore`).
    """

    def __init__(self, path: str | Path, classes: Sequence[type] = ()):
        from rosbags.rosbag2 import StoragePlugin, Writer

        self.path = Path(path)
        if self.path.exists():
            raise DataFileError(str(self.path), "bag folder exists already; rosbag2 bags are never overwritten")
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._ts = typestore(classes)
        self._writer.open()
        self._conns: dict[str, Any] = {}
        self._types: dict[str, str] = {}
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self.counts: dict[str, int] = {}
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bag-writer", daemon=True)
        self._thread.start()

    def __enter__(self) -> BagRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add_topic(self, topic: str, ros_type: str) -> None:
        """Declare a topic before its first :meth:`write` (idempotent)."""
        from simreal.deploy.ros_types import normalize_type_name

        t = normalize_type_name(ros_type)
        if self._types.setdefault(topic, t) != t:
            raise DataFileError(str(self.path), f"topic {topic} recorded as {self._types[topic]}, not {t}")

    def write(self, topic: str, data: bytes, t_ns: int) -> None:
        """Queue one serialized message (CDR with its 4-byte header) received or sent at ``t_ns``."""
        self._q.put((topic, bytes(data), int(t_ns)))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is _STOP:
                return
            topic, data, t_ns = item
            try:
                conn = self._conns.get(topic)
                if conn is None:
                    conn = self._conns[topic] = self._writer.add_connection(
                        topic, self._types[topic], typestore=self._ts
                    )
                self._writer.write(conn, t_ns, data)
                self.counts[topic] = self.counts.get(topic, 0) + 1
            except BaseException as e:  # keep draining; report at close
                self.error = e

    def close(self) -> None:
        """Flush the queue and finalise ``metadata.yaml``."""
        if self._thread.is_alive():
            self._q.put(_STOP)
            self._thread.join()
            self._writer.close()
        if self.error is not None:
            raise DataFileError(str(self.path), f"recording failed: {self.error}")


def read_bag_counts(path: str | Path) -> dict[str, int]:
    """Messages per topic, read back with rosbags (deserializing every message; types the
    Jazzy store lacks come from the definitions the bag carries)."""
    from rosbags.highlevel import AnyReader

    counts: dict[str, int] = {}
    with AnyReader([Path(path)], default_typestore=typestore()) as reader:
        for conn, _t, raw in reader.messages():
            reader.deserialize(raw, conn.msgtype)
            counts[conn.topic] = counts.get(conn.topic, 0) + 1
    return counts
