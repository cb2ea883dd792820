"""Teleoperated recording: the loop's timing and counters, and the LeRobot v3 dataset it writes,
with a fake joint robot, a scripted rate device and test-pattern cameras (real threads, real
encoder)."""

from __future__ import annotations

import numpy as np
import pytest

from fixtures import bundles
from fixtures.fake_robot import FakeJointRobot
from simreal.hardware.record.cameras import PatternCamera
from simreal.hardware.record.recorder import Recorder, dataset_features
from simreal.hardware.teleop.teleoperator import DeviceInput, InputDevice, JointJog


class Wave(InputDevice):
    """Axis 0 pushes one way, then the other."""

    def __init__(self):
        self.k = 0

    def open(self):
        pass

    def close(self):
        pass

    def read(self):
        self.k += 1
        return DeviceInput(np.array([1.0 if self.k % 40 < 20 else -1.0, 0.5, 0, 0, 0, 0]))


def _record(root, episodes, *, resume=False, interrupt_at=None, said=None):
    from simreal.dataset.writer import DatasetWriter

    spec = bundles.joint_robot_spec()
    robot = FakeJointRobot(spec)
    cams = [PatternCamera("front", 48, 32, fps=30), PatternCamera("wrist", 48, 32, fps=30)]
    with robot, JointJog(Wave(), spec, speed=0.5) as teleop:
        for c in cams:
            c.connect()
        writer = (
            DatasetWriter.resume(root)
            if resume
            else DatasetWriter.create(root, fps=15, features=dataset_features(robot, cams), robot_type=spec.name)
        )
        rec = Recorder(
            robot,
            teleop,
            cams,
            writer,
            fps=15,
            task="wave the arm",
            progress=None if said is None else said.append,
            status_every_s=0.4,
        )
        if interrupt_at is not None:
            real_add = writer.add_frame

            def add(frame, task, timestamp=None):
                if frame_count[0] == interrupt_at:  # Ctrl-C during the frame numbered interrupt_at
                    raise KeyboardInterrupt
                frame_count[0] += 1
                return real_add(frame, task=task, timestamp=timestamp)

            frame_count = [0]
            writer.add_frame = add
        stats = rec.run(episodes, episode_s=1.0, reset_s=0.0 if said is None else 0.2)
        writer.close()
        for c in cams:
            c.disconnect()
    return stats


def test_record_writes_every_frame_and_counts(tmp_path):
    from simreal.dataset.reader import Dataset

    stats = _record(tmp_path / "ds", 2)
    tot = stats.totals()
    assert tot["episodes"] == 2 and tot["frames"] == 30
    assert tot["dropped_frames"] <= 2 and tot["max_gap_s"] < 1.0  # cameras at 30 fps, recording at 15
    ds = Dataset(tmp_path / "ds")
    assert ds.num_episodes == 2 and ds.num_frames == 30 and ds.episode_task(1) == "wave the arm"
    ep = ds.episode(0)
    assert ep["action"].shape == (15, 2) and ep["observation.images.front"].shape == (15, 32, 48, 3)
    # the recorded action is what the robot was sent: it moves the joints, and within the spec's range
    assert np.ptp(ep["action"][:, 0]) > 0.05
    assert np.all(np.abs(ep["action"][:, 0]) <= 1.5 + 1e-6)


def test_ctrl_c_keeps_finished_episodes_and_resume_appends(tmp_path):
    from simreal.dataset.reader import Dataset

    stats = _record(tmp_path / "ds", 3, interrupt_at=20)  # 5 frames into episode 1
    assert stats.interrupted and stats.stopped_by == "SIGINT" and len(stats.episodes) == 1
    assert Dataset(tmp_path / "ds").num_episodes == 1
    _record(tmp_path / "ds", 1, resume=True)
    ds = Dataset(tmp_path / "ds")
    assert ds.num_episodes == 2 and ds.num_frames == 30
    assert np.array_equal(ds.episode(1)["episode_index"], np.full(15, 1))


def test_recording_says_each_phase_and_how_far_the_episode_is(tmp_path):
    """record --teleop keyboard showed nothing between episodes' end lines: each episode and
    reset is announced, and a status line comes every status_every_s."""
    said: list[str] = []
    _record(tmp_path / "ds", 2, said=said)
    assert said[0] == "episode 1/2: recording, up to 1 s", said
    assert any(line.startswith("episode 1/2: ") and line.endswith(" late") and "frames" in line for line in said), said
    assert "reset: 0.2 s to set the scene, not recorded" in said and said[-1].endswith("(2/2)"), said


def test_the_record_banner_names_the_keys_and_what_they_move():
    import argparse

    from simreal.cli.record import banner
    from simreal.hardware.teleop.devices import KEY_AXES

    spec = bundles.joint_robot_spec()
    args = argparse.Namespace(episodes=3, episode_s=20.0, reset_s=5.0, out="ds", teleop="keyboard")
    text = banner(args, JointJog(Wave(), spec), 15).splitlines()
    assert text[0].startswith("simreal record: 3 episodes of up to 20 s (5 s to reset between) into ds at 15 fps")
    assert "Ctrl-C stops, keeping the finished episodes" in text[0]
    assert text[1] == (
        "keys (held): q/a shoulder, w/s elbow, space back to the measured pose, x or Esc end the episode"
    ), text
    assert KEY_AXES[b"q"] == (0, 1) and spec.actuator_names[0] == "shoulder"  # q moves axis 0 up: the shoulder


def test_record_cli_on_the_so100_twins(tmp_path):
    """The README's verb end to end: follower and leader twins on pseudo-terminals (the Feetech
    protocol), a test-pattern camera, a dataset the reader reads back."""
    import json
    import subprocess
    import sys

    from simreal.dataset.reader import Dataset

    out = tmp_path / "ds"
    cmd = [
        sys.executable,
        "-m",
        "simreal.cli",
        "record",
        "so100",
        "--twin",
        "--teleop",
        "leader",
        "--camera",
        "front=pattern",
        "--camera-size",
        "64x48",
        "--task",
        "copy the leader",
        "--episodes",
        "2",
        "--episode-s",
        "1",
        "--reset-s",
        "0",
        "--out",
        str(out),
        "--json",
        "--fps",
        "15",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["episodes"] == 2 and res["frames"] == 30
    ds = Dataset(out)
    ep = ds.episode(1)
    assert ds.num_frames == 30 and ds.episode_task(1) == "copy the leader"
    assert ep["observation.images.front"].shape == (15, 48, 64, 3) and ep["action"].shape == (15, 6)
    # the follower copies the leader (limp under gravity, it sags): commands and state agree
    np.testing.assert_allclose(ep["action"][-1], ep["observation.state"][-1], atol=0.1)
    # resumed, the new episodes take the dataset's rate (once the robot's 30 Hz, stamped as 15 fps);
    # another --fps is refused in one line
    more = [
        *cmd[: cmd.index("--episodes")],
        "--episodes",
        "1",
        "--episode-s",
        "1",
        "--reset-s",
        "0",
        "--out",
        str(out),
        "--resume",
    ]
    r = subprocess.run([*more, "--fps", "30"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--fps: 30, and the dataset in" in r.stderr and "records at 15 fps" in r.stderr, (
        r.stderr
    )
    r = subprocess.run(more, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ds = Dataset(out)
    assert ds.num_episodes == 3 and ds.num_frames == 45 and len(ds.episode(2)["action"]) == 15


@pytest.mark.parametrize(
    "flags,needle",
    [
        (["--camera", "front"], "--camera"),
        (["--camera-size", "big", "--camera", "f=pattern"], "--camera-size"),
        (["--episodes", "0"], "--episodes"),
        (["--set", "prot=1"], "driver.prot"),
        (["--bag", "never-written-bag"], "--bag"),  # the Feetech bus is not DDS
        (["--teleop-mode", "ee"], "--teleop-mode"),  # with the leader arm of these tests
    ],
)
def test_record_cli_bad_input_is_one_line(tmp_path, flags, needle):
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "simreal.cli",
        "record",
        "so100",
        "--twin",
        "--teleop",
        "leader",
        "--task",
        "t",
        "--out",
        str(tmp_path / "ds"),
        *flags,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_one_slow_tick_counts_once_and_the_schedule_recovers(tmp_path):
    """A tick that takes three periods is one late tick; the loop then skips to the next slot
    instead of counting every later tick late."""
    from simreal.dataset.writer import DatasetWriter

    class Clock:
        t = 0.0

        def __call__(self):
            return self.t

        def sleep(self, s):
            self.t += s

    clock = Clock()
    spec = bundles.joint_robot_spec()
    robot = FakeJointRobot(spec, clock=clock)
    slow_at = 5
    real_read = robot._read

    def read():
        if robot.reads == slow_at:
            clock.t += 3 / 15  # this read stalls for three periods
        robot.reads += 1
        return real_read()

    robot.reads = 0
    robot._read = read
    with robot, JointJog(Wave(), spec, clock=clock) as teleop:
        writer = DatasetWriter.create(tmp_path / "ds", fps=15, features=dataset_features(robot, []), robot_type="x")
        rec = Recorder(robot, teleop, [], writer, fps=15, task="t", clock=clock, sleep=clock.sleep)
        ep = rec.episode(2.0)
        writer.close()
    assert ep.frames == 30 and ep.late_ticks == 1


def test_an_episode_starts_just_after_a_frame_of_the_first_camera():
    """The loop runs on the first camera's clock: its first tick is TICK_AFTER_FRAME of a frame
    period after that camera's next frame, whatever the phase at which the episode was asked for."""
    from simreal.hardware.record.cameras import Frame
    from simreal.hardware.record.recorder import TICK_AFTER_FRAME

    class StillCamera:
        fps = 30.0

        def read(self):
            return Frame(np.zeros((2, 2, 3), np.uint8), 10.0, 7)  # its last frame came at t = 10 s

    for now in (10.0, 10.001, 10.02, 10.05, 10.5):
        rec = Recorder(None, None, [StillCamera()], None, fps=30, task="t", clock=lambda now=now: now)
        t0 = rec._first_tick()
        phase = (t0 - 10.0) * 30.0  # in frame periods after the last frame
        assert 0 <= t0 - now < 1 / 30 and phase == pytest.approx(round(phase - TICK_AFTER_FRAME) + TICK_AFTER_FRAME)
    assert Recorder(None, None, [], None, fps=30, task="t", clock=lambda: 3.0)._first_tick() == 3.0
