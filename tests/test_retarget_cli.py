"""``simreal retarget`` end to end: one clip, --json, the verdict and --strict, folders (in parallel),
bad inputs, --video."""

from __future__ import annotations

import json

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
    synth.write_bvh(d / "sub" / "crouch.bvh", synth.crouching(duration_s=1.5), units="m", up="z", order="XYZ",
                    six_channels=True)
    return d


def test_single_clip(tmp_path, clips, capsys):
    out = tmp_path / "walk_g1.npz"
    rc = main(["retarget", str(clips / "walk.bvh"), "--robot", "g1", "--out", str(out),
               "--set", "interaction.window=3", "--set", "interaction.stride=1"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "walk.bvh -> " in text and "penetration>1cm 0/45 frames" in text and "frames/s" in text
    m = load_motion(out)
    assert m.num_frames == 45 and m.provenance["settings"]["window"] == 3
    assert m.provenance["source"]["units"] == "cm" and m.provenance["source"]["up_axis"] == "y"


def test_json_and_ik(tmp_path, clips, capsys):
    out = tmp_path / "w.npz"
    rc = main(["retarget", str(clips / "walk.bvh"), "--robot", "h1", "--out", str(out), "--method", "ik", "--json",
               "--fps", "50"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["out"] == str(out) and report["quality"]["method"] == "ik"
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
    args = ["retarget", str(clips / "walk.bvh"), "--robot", "g1", "--out", str(out), "--strict"]
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


def test_bad_inputs_exit_2_with_a_clear_message(tmp_path, capsys):
    bad = tmp_path / "bad.bvh"
    bad.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0\n")
    assert main(["retarget", str(bad), "--robot", "g1", "--out", str(tmp_path / "o.npz")]) == 2
    assert "line 4: expected OFFSET with 3 numbers" in capsys.readouterr().err
    assert main(["retarget", str(bad), "--robot", "g9", "--out", str(tmp_path / "o.npz")]) == 2
    assert "unknown robot 'g9'; valid: " in capsys.readouterr().err
    assert main(["retarget", str(tmp_path / "none.bvh"), "--robot", "g1", "--out", str(tmp_path / "o.npz")]) == 2
    assert "file or folder not found" in capsys.readouterr().err
    assert main(["retarget", str(bad), "--robot", "g1", "--out", "o.npz", "--set", "interaction.window=0"]) == 2
    assert "interaction.window" in capsys.readouterr().err


def test_folder(tmp_path, clips, capsys):
    out = tmp_path / "out"
    rc = main(["retarget", str(clips), "--robot", "g1", "--out", str(out), "--jobs", "1", "--json"])
    assert rc == 0
    reports = json.loads(capsys.readouterr().out)
    assert [r["out"] for r in reports] == [str(out / "sub" / "crouch.npz"), str(out / "walk.npz")]
    assert (out / "sub" / "crouch.npz").is_file()
    (clips / "broken.bvh").write_text("HIERARCHY\n")
    try:
        rc = main(["retarget", str(clips), "--robot", "g1", "--out", str(out), "--jobs", "1"])
        assert rc == 1  # the batch finishes; the bad clip is reported
        text = capsys.readouterr().out
        assert "broken.bvh: error:" in text and "file ends early" in text and "walk.bvh -> " in text
    finally:
        (clips / "broken.bvh").unlink()


@pytest.mark.slow
def test_folder_in_parallel_processes(tmp_path, clips, capsys):
    out = tmp_path / "out"
    assert main(["retarget", str(clips), "--robot", "h1", "--out", str(out), "--jobs", "2"]) == 0
    assert (out / "walk.npz").is_file() and (out / "sub" / "crouch.npz").is_file()


@pytest.mark.slow
def test_video(tmp_path, clips):
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
    import imageio.v2 as imageio

    frames = [f for f in imageio.get_reader(str(video))]
    assert len(frames) == 12 and frames[0].shape == (480, 640, 3) and np.asarray(frames[0]).std() > 5
