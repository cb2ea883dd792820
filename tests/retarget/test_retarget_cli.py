"""``simreal retarget`` end to end: one clip, --json, the verdict and --strict, folders (in parallel),
bad inputs, --video."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixtures import synth_motion as synth
from simreal.cli import main
from simreal.motion_file import load_motion
from simreal.retarget import checks


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    synth.write_bvh(d / "walk.bvh", synth.walking(duration_s=1.5), units="cm", up="y", order="ZXY")
    synth.write_bvh(
        d / "sub" / "crouch.bvh", synth.crouching(duration_s=1.5), units="m", up="z", order="XYZ", six_channels=True
    )
    return d


def test_single_clip(tmp_path, clips, capsys):
    out = tmp_path / "walk_g1.npz"
    rc = main(
        [
            "retarget",
            str(clips / "walk.bvh"),
            "--robot",
            "g1",
            "--out",
            str(out),
            "--set",
            "interaction.window=3",
            "--set",
            "interaction.stride=1",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "walk.bvh -> " in text and "penetration>1cm 0/45 frames" in text and "frames/s" in text
    m = load_motion(out)
    assert m.num_frames == 45 and m.provenance["settings"]["window"] == 3
    assert m.provenance["source"]["units"] == "cm" and m.provenance["source"]["up_axis"] == "y"


def test_the_23_dof_g1_retargets_with_the_g1_map_and_trains_on_it(tmp_path, clips):
    """``--robot g1_23dof`` (its spec's keypoint_map: g1, the same links) gives a 23-joint clip
    that ``g1-tracking robot=g1_23dof`` builds its env from (it once had no map at all)."""
    from simreal.errors import DataFileError
    from simreal.policies.run_config import make_env, resolve

    out = tmp_path / "walk_g1_23.npz"
    assert (
        main(
            [
                "retarget",
                str(clips / "walk.bvh"),
                "--robot",
                "g1_23dof",
                "--out",
                str(out),
                "--set",
                "interaction.window=3",
                "--set",
                "interaction.stride=1",
            ]
        )
        == 0
    )
    m = load_motion(out)
    assert len(m.joint_names) == 23 and "left_wrist_pitch_joint" not in m.joint_names
    env = make_env(resolve("g1-tracking", ["robot=g1_23dof", f"env.motion_file={out}"]), backend="native")
    assert env.action_size == 23 and env.num_frames == m.num_frames
    # the 29-DoF G1's clip is not the 23-DoF one's: it moves the wrists and waist joints welded there
    out29 = tmp_path / "walk_g1.npz"
    assert (
        main(
            [
                "retarget",
                str(clips / "walk.bvh"),
                "--robot",
                "g1",
                "--out",
                str(out29),
                "--set",
                "interaction.window=3",
                "--set",
                "interaction.stride=1",
            ]
        )
        == 0
    )
    with pytest.raises(
        DataFileError,
        match="it moves 'waist_roll_joint' .6 joint.s. robot g1_23dof does not "
        "have.; retargeted for another robot. it has the joints of g1;",
    ):
        make_env(resolve("g1-tracking", ["robot=g1_23dof", f"env.motion_file={out29}"]), backend="native")


def test_json_and_ik(tmp_path, clips, capsys):
    out = tmp_path / "w.npz"
    rc = main(
        [
            "retarget",
            str(clips / "walk.bvh"),
            "--robot",
            "h1",
            "--out",
            str(out),
            "--method",
            "ik",
            "--json",
            "--fps",
            "50",
        ]
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["defects"]["defective_frames"] == 0 and len(summary["parts"]) == 1
    report = summary["parts"][0]
    assert report["out"] == str(out) and report["quality"]["method"] == "ik" and report["frames"] == [0, 73]
    assert report["quality"]["fps"] == 50.0 and report["quality"]["frames"] == 74  # 44 intervals of 1/30 s at 50 Hz
    assert report["quality"]["limits"]["position_violations"] == 0
    assert load_motion(out).fps == 50.0
    graded = report["quality"]["checks"]
    assert set(graded) == set(checks.THRESHOLDS) and report["quality"]["verdict"] in checks.LEVELS
    for c in graded.values():
        assert c["level"] in checks.LEVELS and {"value", "warn", "fail", "unit", "ranges"} <= set(c)
    assert graded["feasibility"]["windows"] == 2 and 0 < graded["feasibility"]["mean_follow_s"] <= 1.0


def test_verdict_and_strict(tmp_path, clips, capsys, monkeypatch):
    out = tmp_path / "w.npz"
    args = ["retarget", str(clips / "walk.bvh"), "--robot", "g1", "--out", str(out), "--defects", "keep", "--strict"]
    assert main(args) == 0
    assert "\n  verdict ok\n" in capsys.readouterr().out
    assert load_motion(out).quality["verdict"] == "ok"
    # A threshold every clip breaks: the verdict is fail, --strict exits 1, without it the exit is 0.
    monkeypatch.setitem(checks.THRESHOLDS, "root_height", checks.Rule("peak", -1.0, -1.0, "m", "test"))
    assert main(args) == 1
    text = capsys.readouterr().out
    assert "verdict FAIL: root_height " in text and "  root_height frames 0-44: pelvis " in text
    assert main(args[:-1]) == 0
    q = load_motion(out).quality
    assert q["verdict"] == "fail" and q["checks"]["root_height"]["ranges"][0]["frames"] == [0, 44]
    # Without --defects keep, a clip that fails in every frame is not written at all: exit 1 (a
    # clip that could not be retargeted), not 2 (bad input)
    out.unlink()
    assert main(args[:-3]) == 1
    assert (
        "walk.bvh: every part between its defective frames is shorter than 1 s; nothing written"
        in capsys.readouterr().err
        and not out.exists()
    )


def test_defective_frames_are_cut_into_parts(tmp_path, capsys, monkeypatch):
    """Frames the solver needed slack for (here: told so) are cut; the pieces go to OUT.partK.npz,
    each with its source frames and its own report; the default (repair) emits none of them."""
    from simreal.retarget import pipeline
    from simreal.retarget.interaction import solve_interaction

    def slack_in_the_middle(robot, targets):
        q, stats = solve_interaction(robot, targets)
        return q, {**stats, "infeasible_frames": [44, 45, 46], "infeasible_max_slack": 0.05}

    monkeypatch.setitem(pipeline.METHODS, "interaction", slack_in_the_middle)
    bvh = tmp_path / "walk3.bvh"
    synth.write_bvh(bvh, synth.walking(duration_s=3.0), units="cm", up="y")
    out = tmp_path / "w.npz"
    assert main(["retarget", str(bvh), "--robot", "g1", "--out", str(out), "--defects", "cut", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["defects"]["cut"] == [[44, 46]] and summary["defects"]["why"] == {"slack": [[44, 46]]}
    parts = summary["parts"]
    assert [p["out"] for p in parts] == [str(tmp_path / "w.part1.npz"), str(tmp_path / "w.part2.npz")]
    assert [p["frames"] for p in parts] == [[0, 43], [47, 89]] and not out.exists()
    for p in parts:
        m = load_motion(p["out"])
        assert m.num_frames == p["frames"][1] - p["frames"][0] + 1 and m.provenance["source_frames"] == p["frames"]
        assert m.quality["solver"]["infeasible_frames"] == [] and m.quality["defects"]["mode"] == "cut"
    # --resume takes a clip whose parts are all there, and redoes one stopped between two parts
    from simreal.retarget.batch import done_before

    assert [p["out"] for p in done_before(str(bvh), str(out), None, "g1", "interaction")["parts"]] == [
        p["out"] for p in parts
    ]
    assert done_before(str(bvh), str(out), None, "h1", "interaction") is None  # made for another robot
    (tmp_path / "w.part2.npz").unlink()
    assert done_before(str(bvh), str(out), None, "g1", "interaction") is None
    for f in tmp_path.glob("w*.npz"):
        f.unlink()
    (tmp_path / "w.part7.npz").write_bytes(b"an earlier run's part")  # not this run's: removed
    assert main(["retarget", str(bvh), "--robot", "g1", "--out", str(out)]) == 0
    assert "3 defective frames (slack); " in capsys.readouterr().out
    assert not (tmp_path / "w.part7.npz").exists()
    written = [load_motion(f) for f in sorted(tmp_path.glob("w*.npz"))]
    assert written and all(m.quality["defects"]["mode"] == "repair" for m in written)
    for m in written:  # each slack frame is bridged (all joints, no planted foot dragged) or in no piece
        a, b = m.provenance["source_frames"]
        bridged = any(r[0] <= 44 and 46 <= r[1] for r in m.quality["defects"]["repaired"])
        assert bridged or b < 44 or a > 46
        assert m.quality["solver"]["infeasible_frames"] == []


def test_a_run_stopped_before_its_outputs_keeps_the_earlier_ones(tmp_path, capsys, monkeypatch):
    """A rerun interrupted in its video render (Ctrl-C, no GL) leaves the earlier run's motion file
    and video as they were; once it completes, its own replace them."""
    from simreal.retarget import video

    bvh = tmp_path / "walk.bvh"
    synth.write_bvh(bvh, synth.walking(duration_s=2.0), units="cm", up="y")
    out, mp4 = tmp_path / "w.npz", tmp_path / "w.mp4"
    out.write_bytes(b"an earlier run's motion")
    mp4.write_bytes(b"an earlier run's video")

    def interrupted(path, robot, result, progress):
        raise KeyboardInterrupt

    monkeypatch.setattr(video, "render_video", interrupted)
    assert main(["retarget", str(bvh), "--robot", "g1", "--out", str(out), "--video", str(mp4)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert out.read_bytes() == b"an earlier run's motion" and mp4.read_bytes() == b"an earlier run's video"
    monkeypatch.setattr(video, "render_video", lambda path, robot, result, progress: Path(path).write_bytes(b"new"))
    assert main(["retarget", str(bvh), "--robot", "g1", "--out", str(out), "--video", str(mp4)]) == 0
    assert load_motion(out).num_frames > 0 and mp4.read_bytes() == b"new"


def test_bad_inputs_exit_2_with_a_clear_message(tmp_path, capsys):
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0\n")
    assert main(["retarget", str(bad), "--robot", "g1", "--out", str(tmp_path / "o.npz")]) == 2
    assert "line 4: expected OFFSET with 3 numbers" in capsys.readouterr().err
    assert main(["retarget", str(bad), "--robot", "g9", "--out", str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err
    assert "unknown robot 'g9'; valid: g1, " in err and "franka" not in err  # robots with a keypoint map
    assert main(["retarget", str(tmp_path / "none.bvh"), "--robot", "g1", "--out", str(tmp_path / "o.npz")]) == 2
    assert "file or folder not found" in capsys.readouterr().err
    assert main(["retarget", str(bad), "--robot", "g1", "--out", "o.npz", "--set", "interaction.window=0"]) == 2
    assert "interaction.window" in capsys.readouterr().err
    assert main(["retarget", str(bad), "--robot", "g1", "--out", str(tmp_path / "walk_g1.bvh")]) == 2
    assert "a path ending in .npz; got " in capsys.readouterr().err  # an npz named .bvh, once
    assert not (tmp_path / "walk_g1.bvh").exists()


def test_folder(tmp_path, clips, capsys):
    out = tmp_path / "out"
    rc = main(["retarget", str(clips), "--robot", "g1", "--out", str(out), "--jobs", "1", "--json"])
    assert rc == 0
    printed = capsys.readouterr()
    reports = json.loads(printed.out)
    assert printed.err.count("2/2 (100.0%) | ") == 1 and "clips/s" in printed.err, printed.err  # progress, once done
    assert [r["parts"][0]["out"] for r in reports] == [str(out / "sub" / "crouch.npz"), str(out / "walk.npz")]
    assert (out / "sub" / "crouch.npz").is_file()
    written = (out / "walk.npz").stat().st_mtime_ns
    assert main(["retarget", str(clips), "--robot", "g1", "--out", str(out), "--jobs", "1", "--resume"]) == 0
    text = capsys.readouterr().out
    assert text.count("(an earlier run, --resume)") == 2 and "verdict" in text, text
    assert (out / "walk.npz").stat().st_mtime_ns == written  # kept, not retargeted again
    # with --video, a clip whose video was not finished (Ctrl-C mid render) is not done
    from simreal.retarget.batch import done_before

    video = tmp_path / "videos" / "walk.mp4"
    assert done_before(str(clips / "walk.bvh"), str(out / "walk.npz"), str(video), "g1", "interaction") is None
    video.parent.mkdir()
    video.write_bytes(b"an mp4")
    done = done_before(str(clips / "walk.bvh"), str(out / "walk.npz"), str(video), "g1", "interaction")
    assert done is not None and done["parts"][0]["video"] == str(video)
    (clips / "walk.csv").write_text("time,pelvis_x\n")  # would write walk.npz too
    try:
        assert main(["retarget", str(clips), "--robot", "g1", "--out", str(out), "--jobs", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "walk.bvh and " in err and "would both write" in err, err
    finally:
        (clips / "walk.csv").unlink()
    (clips / "broken.bvh").write_text("HIERARCHY\n")
    try:
        rc = main(["retarget", str(clips), "--robot", "g1", "--out", str(out), "--jobs", "1"])
        assert rc == 1  # the batch finishes; the bad clip is reported
        text = capsys.readouterr().out
        assert "broken.bvh: error:" in text and "file ends early" in text and "walk.bvh -> " in text
    finally:
        (clips / "broken.bvh").unlink()


def test_a_stopped_folder_run_ends_its_worker_processes(clips, tmp_path):
    import argparse
    import multiprocessing as mp

    from simreal.cli.retarget import _options
    from simreal.retarget.batch import run_parallel

    work = [(str(c), str(tmp_path / f"{c.stem}.npz"), None) for c in sorted(clips.rglob("*.bvh"))]
    args = argparse.Namespace(
        robot="g1",
        map=None,
        scene=None,
        method="interaction",
        overrides=[],
        units="auto",
        up="auto",
        fps=None,
        source_fps=None,
        body_models=None,
        joint_map=None,
        defects="repair",
    )
    assert run_parallel(work, _options(args), 2, stop=lambda: True) == {}
    # the clips handed to the workers were ended with them (an executor's shutdown waits for them to write)
    assert mp.active_children() == [] and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_folder_in_parallel_processes(tmp_path, clips, capsys):
    out = tmp_path / "out"
    assert main(["retarget", str(clips), "--robot", "h1", "--out", str(out), "--jobs", "2"]) == 0
    assert (out / "walk.npz").is_file() and (out / "sub" / "crouch.npz").is_file()


@pytest.mark.slow
def test_video(tmp_path, clips, capsys):
    pytest.importorskip("imageio_ffmpeg")
    src = tmp_path / "short.bvh"
    synth.write_bvh(src, synth.walking(duration_s=0.4))
    video = tmp_path / "walk.mp4"
    try:
        rc = main(["retarget", str(src), "--robot", "g1", "--out", str(tmp_path / "w.npz"), "--video", str(video)])
    except Exception as e:  # no OpenGL on this machine
        pytest.skip(f"rendering unavailable: {e}")
    if rc == 2:
        pytest.skip("rendering unavailable (no OpenGL context)")
    assert rc == 0 and video.stat().st_size > 1000
    assert not list(tmp_path.glob("*.tmp.mp4"))  # rendered beside it, then renamed
    import imageio.v2 as imageio

    frames = [f for f in imageio.get_reader(str(video))]
    assert len(frames) == 12 and frames[0].shape == (480, 640, 3) and np.asarray(frames[0]).std() > 5
    assert "12/12 (100.0%) | " in capsys.readouterr().err  # the render's progress line, at its end


def test_a_full_disk_is_one_line_and_leaves_no_temporary_file(tmp_path, clips):
    """A file-size limit (``ulimit -f``; a full disk says ENOSPC the same way) once ended in
    ``OSError: [Errno 27] File too large`` from inside the atomic writer, a traceback naming no
    file. Now one line naming the file meant, exit 1, and no temporary file beside it."""
    import resource
    import subprocess
    import sys

    out = tmp_path / "walk_g1.npz"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))  # the motion file is larger

    r = subprocess.run(
        [sys.executable, "-m", "simreal.cli", "retarget", str(clips / "walk.bvh"), "--robot", "g1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert (
        r.stderr.strip() == f"simreal retarget: error: {out}: File too large (free space or write elsewhere; "
        "what was written whole before is kept)"
    )
    assert list(tmp_path.iterdir()) == []


def test_workers_end_with_a_parent_killed_outright(tmp_path, clips):
    """``kill -9`` on ``retarget DIR --jobs 2`` once left its two workers writing clips, then
    blocked on a pipe for ever; now they end with it (the parent-death signal)."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    src = tmp_path / "clips"
    src.mkdir()
    for k in range(6):  # more clips than workers, so they are busy when the parent dies
        shutil.copy(clips / "walk.bvh", src / f"walk{k}.bvh")
    parent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "simreal.cli",
            "retarget",
            str(src),
            "--robot",
            "g1",
            "--out",
            str(tmp_path / "out"),
            "--jobs",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def children() -> list[int]:
        out = []
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, ValueError, IndexError):
                continue
            if d.isdigit() and int(fields[1]) == parent.pid:
                out.append(int(d))
        return out

    deadline = time.monotonic() + 120
    while len(children()) < 2 and time.monotonic() < deadline:  # the two workers (and the tracker)
        time.sleep(0.2)
    workers = children()
    assert len(workers) >= 2, workers
    time.sleep(1.0)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15

    def running(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    alive = workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in workers if running(p)]
    for p in alive:
        os.kill(p, signal.SIGKILL)
    assert alive == [], f"workers {alive} outlived their parent"
