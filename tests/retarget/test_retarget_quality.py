"""The graded quality report (simreal/retarget/checks.py) and PD playback (simreal/retarget/feasibility.py).

A clean synthesised walk passes every check; each failure the real captures showed (a hip-yaw
flip, a floating stance foot, a joint speed spike, a crouch, frames solved with slack, a
reference the robot cannot follow) is injected into that walk's result, and the report must
fail the right check at the right frames; then simreal/retarget/repair.py must bridge the defect or cut
it, never emit it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest

from fixtures import synth_motion as synth
from simreal.errors import ConfigError
from simreal.retarget import checks, feasibility, repair
from simreal.retarget.interaction import solve_interaction
from simreal.retarget.metrics import SLIDE_TOL_M_S, forward_all
from simreal.retarget.pipeline import assess
from simreal.retarget.robot import load_robot
from simreal.retarget.skeleton import HumanMotion
from simreal.retarget.targets import build_targets

FLIP = (30, 39)  # injected frames (inclusive)


@pytest.fixture(scope="module")
def g1():
    return load_robot("g1")


@pytest.fixture(scope="module")
def walk(g1):
    """A clean retargeted synthetic walk: (targets, qpos, stats)."""
    clip = synth.walking(duration_s=3.0)
    targets = build_targets(HumanMotion(clip.names, clip.positions, clip.fps, clip.parents, {"path": "walk"}), g1)
    qpos, stats = solve_interaction(g1, targets)
    return targets, qpos, stats


def _report(g1, walk, qpos=None, stats=None, playback=False):
    targets, q0, s0 = walk
    return checks.graded_report(
        g1, q0 if qpos is None else qpos, targets, s0 if stats is None else stats, playback=playback
    )


def _col(robot, joint: str) -> int:
    return int(robot.qpos_adr[robot.joint_names.index(joint)])


def _covers(check: dict, frames: tuple[int, int], level: str = "fail") -> bool:
    """Some range of ``level`` overlaps ``frames``."""
    return any(
        r["level"] == level and r["frames"][0] <= frames[1] and frames[0] <= r["frames"][1] for r in check["ranges"]
    )


def test_clean_walk_passes_every_check(g1, walk):
    rep = _report(g1, walk, playback=True)
    assert rep["verdict"] == "ok", checks.verdict_lines(rep)
    assert set(rep["checks"]) == set(checks.THRESHOLDS)
    for name, c in rep["checks"].items():
        assert c["level"] == "ok" and c["value"] <= c["warn"], name
    fz = rep["checks"]["feasibility"]
    assert fz["followed_fraction"] > 0.5 and fz["mean_follow_s"] > 0.4
    assert checks.verdict_lines(rep) == ["verdict ok"]


def test_hip_yaw_flip_fails_speed_twist_jump_and_magnitude(g1, walk):
    targets, q0, _ = walk
    q = q0.copy()
    q[FLIP[0] : FLIP[1] + 1, _col(g1, "left_hip_yaw_joint")] = -2.2  # the real walk's flip: -0.2 -> -2.2 rad
    rep = _report(g1, walk, q)
    c = rep["checks"]
    assert rep["verdict"] == "fail"
    speed = c["joint_speed_vs_human"]
    assert speed["level"] == "fail" and _covers(speed, (FLIP[0], FLIP[0]))
    assert _covers(speed, (FLIP[1] + 1, FLIP[1] + 1))  # and back
    assert any(r["at"].startswith("left_hip_yaw_joint") for r in speed["ranges"])
    assert speed["peak_joint"] == "left_hip_yaw_joint" and speed["peak_joint_speed_rad_s"] > 50
    assert c["foot_twist"]["level"] == "fail"
    twist = [r for r in c["foot_twist"]["ranges"] if r["level"] == "fail"]
    assert [r["frames"] for r in twist] == [list(FLIP)] and twist[0]["at"].startswith("left_foot")
    assert _covers(c["orientation_jump_result"], (FLIP[0], FLIP[0]))
    assert c["orientation_jump_target"]["level"] == "ok"  # the targets are clean; the result flipped
    hip = c["hip_magnitude"]
    assert hip["level"] == "fail" and [r["frames"] for r in hip["ranges"]] == [list(FLIP)]
    assert hip["value"] == pytest.approx((FLIP[1] - FLIP[0] + 1) / len(q))
    assert c["slack"]["level"] == "ok"
    text = "\n".join(checks.verdict_lines(rep))
    assert text.startswith("verdict FAIL: ") and f"foot_twist frames {FLIP[0]}-{FLIP[1]}: left_foot" in text


def test_floating_stance_foot_fails_support_float(g1, walk):
    targets, q0, _ = walk
    stance = np.flatnonzero(targets.contacts[:, 0])
    a = int(stance[0])
    b = a + int(np.argmax(np.diff(stance) > 1)) if np.any(np.diff(stance) > 1) else int(stance[-1])
    assert b - a >= 5, "expected a stance phase of the left foot"
    q = q0.copy()
    q[a : b + 1, 2] += 0.03  # the whole robot 3 cm up while the left foot supports
    c = _report(g1, walk, q)["checks"]["support_float"]
    assert c["level"] == "fail" and c["floating_foot_frames"] >= b - a + 1
    assert [r["frames"] for r in c["ranges"]] == [[a, b]]
    assert "cm up while supporting" in c["ranges"][0]["at"]
    assert c["max_support_clearance_m"] > 0.025


def test_a_supporting_foot_off_its_target_fails_support_off_target(g1, walk):
    """A real hop on H1 once planted a foot 38 cm from where the human stood, with a verdict of
    warn: the keypoint error was measured, not graded. The clean walk's supporting feet stay on
    their marks; with the left foot's target 25 cm sideways through one stance, those frames fail."""
    targets, q0, _ = walk
    clean = _report(g1, walk)["checks"]["support_off_target"]
    assert clean["level"] == "ok" and clean["value"] < 0.05, clean["value"]
    stance = np.flatnonzero(targets.contacts[:, 0])
    a = int(stance[0])
    b = a + int(np.argmax(np.diff(stance) > 1)) if np.any(np.diff(stance) > 1) else int(stance[-1])
    left = g1.keypoint_index("left_foot")
    pos = targets.positions.copy()
    pos[a : b + 1, left, 1] += 0.25
    c = checks.graded_report(g1, q0, dataclasses.replace(targets, positions=pos), walk[2], playback=False)["checks"][
        "support_off_target"
    ]
    assert c["level"] == "fail" and c["value"] == pytest.approx(0.25, abs=0.05)
    assert [r["frames"] for r in c["ranges"]] == [[a, b]] and c["ranges"][0]["element"] == "left_foot"
    assert c["ranges"][0]["at"].startswith("left_foot 2") and "from its target while supporting" in c["ranges"][0]["at"]


def test_support_evidence_is_a_low_and_still_human_foot(g1, walk):
    """Unlabelled frames count as support where the human's sole is low and still, not where a
    swinging foot skims the floor (real walks pass 1-2 cm over it at 1-4 m/s)."""
    targets, q0, _ = walk
    left = targets.keypoints.index("left_foot")
    clear = checks.foot_clearance(g1, q0)[:, 0]
    swing = np.flatnonzero(~targets.contacts[:, 0] & (clear > 0.03))
    t = int(swing[len(swing) // 2])
    human = targets.human.copy()
    human[t, left, 2] = 0.005  # the human's swing sole skims the floor in one frame
    skim = dataclasses.replace(targets, human=human)
    c = checks.graded_report(g1, q0, skim, walk[2], playback=False)["checks"]["support_float"]
    speed = np.linalg.norm(human[t + 1, left, :2] - human[t - 1, left, :2]) * targets.fps / 2
    assert speed > 2 * checks.HUMAN_SUPPORT_SPEED_M_S and not _covers(c, (t, t), c["level"])
    human[t - 1 : t + 2, left, :2] = human[t, left, :2]  # now low and still: it supports, and the robot's foot floats
    still = dataclasses.replace(targets, human=human)
    c = checks.graded_report(g1, q0, still, walk[2], playback=False)["checks"]["support_float"]
    assert _covers(c, (t, t), c["level"]) and c["floating_foot_frames"] >= 1


def test_joint_speed_spike(g1, walk):
    q = walk[1].copy()
    q[50, _col(g1, "right_elbow_joint")] += 0.6  # 18 rad/s in and out of one frame; the arm swings slowly
    c = _report(g1, walk, q)["checks"]
    speed = c["joint_speed_vs_human"]
    assert speed["level"] == "fail" and speed["peak_joint"] == "right_elbow_joint"
    assert [r["frames"] for r in speed["ranges"] if r["level"] == "fail"] == [[50, 51]]
    assert c["joint_speed_vs_limit"]["level"] == "ok"  # 18 of the elbow's 37 rad/s
    assert c["hip_magnitude"]["level"] == "ok" and c["foot_twist"]["level"] == "ok"


def test_speed_beyond_the_velocity_limit(g1, walk):
    q = walk[1].copy()
    q[40, _col(g1, "waist_yaw_joint")] += 1.2  # 36 rad/s in and out; the limit is 32
    c = _report(g1, walk, q)["checks"]["joint_speed_vs_limit"]
    assert c["level"] == "fail" and c["value"] == pytest.approx(36 / 32, rel=0.02)
    assert [r["frames"] for r in c["ranges"]] == [[40, 41]]
    assert c["ranges"][0]["at"].startswith("waist_yaw_joint 36.") and c["ranges"][0]["at"].endswith("limit 32")


def test_crouch_fails_root_height(g1, walk):
    q = walk[1].copy()
    q[60:66, 2] -= 0.15
    c = _report(g1, walk, q)["checks"]["root_height"]
    assert c["level"] == "fail" and [r["frames"] for r in c["ranges"]] == [[60, 65]]
    assert c["min_ratio_to_nominal"] < 0.9 and "below its target" in c["ranges"][0]["at"]


def test_slack_frames(g1, walk):
    T = len(walk[1])
    c = _report(g1, walk, stats={"infeasible_frames": [7, 8, 9, 20], "infeasible_max_slack": 0.03})["checks"]["slack"]
    assert c["level"] == "fail" and c["value"] == pytest.approx(4 / T) and c["max_slack"] == 0.03
    assert [r["frames"] for r in c["ranges"]] == [[7, 9], [20, 20]]
    one = _report(g1, walk, stats={"infeasible_frames": [3]})["checks"]["slack"]
    assert one["level"] == "warn"


def test_target_flip_is_reported_separately(g1, walk):
    targets, q0, stats = walk
    rot = targets.rotations.copy()
    k = g1.keypoint_index("right_foot")
    turn = np.diag([-1.0, -1.0, 1.0])  # 180 deg about z: a heading that flips backwards
    rot[70:73, k] = turn @ rot[70:73, k]
    rep = checks.graded_report(g1, q0, dataclasses.replace(targets, rotations=rot), stats, playback=False)
    c = rep["checks"]["orientation_jump_target"]
    assert c["level"] == "fail" and [r["frames"] for r in c["ranges"]] == [[70, 70], [73, 73]]
    m = re.fullmatch(r"right_foot (\d+) deg in one frame", c["ranges"][0]["at"])
    assert m and 170 <= int(m.group(1)) <= 180  # the flip, plus the frame's own small turn
    assert rep["checks"]["orientation_jump_result"]["level"] == "ok"


def test_pd_playback_loses_a_flipping_reference(g1, walk):
    targets, q0, _ = walk
    clean = feasibility.play_back(g1, q0, targets.fps)
    q = q0.copy()
    for a in (5, 35, 65):  # 5 frames into each window, as the real walk's hips flipped
        q[a : a + 10, _col(g1, "left_hip_yaw_joint")] = -2.2
        q[a : a + 10, _col(g1, "right_hip_yaw_joint")] = 2.2
    bad = feasibility.play_back(g1, q, targets.fps)
    # Lost at the flip's first frame (start + 5; 4 frames followed): no PD turns a hip 2 rad in a frame.
    assert bad.followed.tolist() == [4, 4, 4] and [x["lost_at"] for x in bad.summary()["lost"]] == [5, 35, 65]
    assert bad.followed_mask.mean() < 0.5 * clean.followed_mask.mean()
    s = bad.summary()
    assert s["mean_follow_s"] < clean.summary()["mean_follow_s"] and s["lost"]
    assert {x["reason"] for x in s["lost"]} <= {"tilt", "height", "joints"}
    assert clean.starts.tolist() == [0, 30, 60] and clean.lengths.tolist() == [30, 30, 29]
    rep = _report(g1, walk, q, playback=True)
    assert rep["checks"]["feasibility"]["level"] in ("warn", "fail")


def test_pd_playback_holds_a_standing_pose(g1):
    """A still reference at the home pose: the PD servos hold it the whole time."""
    q = np.tile(g1.q_home, (61, 1))
    pb = feasibility.play_back(g1, q, 30.0)
    assert pb.followed_mask.all() and pb.summary()["min_follow_s"] == pytest.approx(1.0)


def test_pd_playback_ends_a_window_where_mujoco_resets_the_state(g1):
    """A reference frame 1e12 m off: the window starting beside it gets a velocity past MuJoCo's
    1e10, which resets the state to the model's initial one at the first step. That window is
    lost there as ``diverged`` (not followed on from the reset pose); the window before is not."""
    q = np.tile(g1.q_home, (61, 1))
    q[31, 0] = 1e12
    pb = feasibility.play_back(g1, q, 30.0)
    assert pb.reasons == ("", "diverged") and pb.followed.tolist() == [30, 0]


def test_reference_qvel_is_the_finite_difference(g1):
    q = np.tile(g1.q_home, (3, 1))
    q[:, 0] = [0.0, 0.1, 0.2]  # 3 m/s in x at 30 fps
    j = _col(g1, "left_knee_joint")
    q[:, j] += [0.0, 0.05, 0.1]
    v = feasibility.reference_qvel(g1.model, q, 30.0)
    assert v[1, 0] == pytest.approx(3.0) and v[0, 0] == pytest.approx(3.0)
    assert v[1, g1.dof_adr[g1.joint_names.index("left_knee_joint")]] == pytest.approx(1.5)


def test_playback_needs_pd_servos():
    spec = mujoco.MjSpec.from_string("""<mujoco><worldbody><body><freejoint/><geom size=".1"/>
      <body><joint name="j" type="hinge"/><geom size=".1"/></body></body></worldbody>
      <actuator><motor joint="j"/></actuator></mujoco>""")
    assert "is not a PD position servo" in feasibility.pd_servo_problem(spec.compile())


def test_rotation_speed_matches_a_constant_turn():
    w, fps = 2.0, 50.0  # [rad/s], [Hz]
    R = np.stack(
        [np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]]) for a in w * np.arange(10) / fps]
    )
    s = checks._rotation_speed(R[:, None], fps)[:, 0]
    assert s[0] == 0.0 and np.allclose(s[1:], w)


def test_frame_ranges():
    rule = checks.Rule("peak", 1.0, 2.0, "x", "")
    sig = checks.Signal(np.array([0, 1.5, 1.2, 0, 3.0, 0, 0, 1.1]), [f"f{i}" for i in range(8)], 3.0, {})
    assert checks.frame_ranges(sig, rule, "fail") == [
        {"frames": [1, 2], "level": "warn", "value": 1.5, "at": "f1", "element": None},
        {"frames": [4, 4], "level": "fail", "value": 3.0, "at": "f4", "element": None},
        {"frames": [7, 7], "level": "warn", "value": 1.1, "at": "f7", "element": None},
    ]


def test_docs_table_matches_thresholds():
    """docs/retarget.md prints the threshold table; it must say what the code does (angles in
    degrees, fractions in %, lengths in cm)."""
    doc = (Path(__file__).parents[2] / "docs" / "retarget.md").read_text()
    for name, rule in checks.THRESHOLDS.items():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, f"docs/retarget.md has no row for {name}"
        warn, fail = [c.strip() for c in row.strip().strip("|").split("|")][-2:]
        scale = {"rad": 1 / checks.DEG, "rad/s": 1 / checks.DEG, "m": 100.0}.get(
            rule.unit, 100.0 if rule.kind == "fraction" else 1.0
        )
        shown = [float(re.match(r"-?\d+(?:\.\d+)?", x).group()) for x in (warn, fail)]
        assert shown == pytest.approx([rule.warn * scale, rule.fail * scale], rel=1e-3), (name, row)


# -- repair: defects are bridged or cut, never emitted -------------------------------------------


def _judged(g1, walk, q):
    targets, _, stats = walk
    return assess(g1, q, targets, stats, {"method": "interaction"})


def _stance_steps(g1, q, contacts) -> float:
    """The largest frame-to-frame move of a sole in stance at both frames [m] (times fps: [m/s])."""
    soles = forward_all(g1, q)[0][:, g1.foot_sites]
    held = contacts[1:] & contacts[:-1]
    return float(np.linalg.norm(np.diff(soles, axis=0), axis=-1)[held].max())


def test_hermite_bridge_restores_a_line_and_keeps_the_rest():
    q = np.stack([np.arange(20.0), 3.0 - 0.5 * np.arange(20.0)], axis=1)
    hit = q.copy()
    hit[8:12] = [[40.0, -9.0]] * 4
    out = repair.hermite_bridge(hit, 8, 11)
    assert np.allclose(out, q) and np.array_equal(hit[8:12], [[40.0, -9.0]] * 4)  # the input is untouched
    curve = np.sin(np.linspace(0, 3, 40))[:, None]
    out = repair.hermite_bridge(curve + (np.arange(40) == 20)[:, None], 18, 22)
    assert np.abs(out - curve).max() < 1e-2  # a smooth curve through a spike: the curve again (one-sided slopes)
    slopes = np.diff(out[:, 0])
    assert np.abs(np.diff(slopes)).max() < 2 * np.abs(np.diff(np.diff(curve[:, 0]))).max()  # no kink at the seams


def test_limb_is_the_joint_and_below_or_the_path_to_a_frame(g1):
    def joints(e):
        return {j for j, x in zip(g1.joint_names, repair.limb(g1, e)) if x}

    assert joints("right_elbow_joint") == {
        "right_elbow_joint",
        "right_wrist_roll_joint",
        "right_wrist_pitch_joint",
        "right_wrist_yaw_joint",
    }
    left_leg = {j for j in g1.joint_names if j.startswith("left_") and ("hip" in j or "knee" in j or "ankle" in j)}
    assert joints("left_foot") == left_leg and len(left_leg) == 6
    assert joints(None) == joints("no_such_element") == set(g1.joint_names)


def test_a_hip_flip_in_swing_is_bridged_and_the_rest_kept(g1, walk):
    targets, q0, _ = walk
    swing = np.flatnonzero(~targets.contacts[:, 0])
    t = int(swing[len(swing) // 2])
    assert not targets.contacts[t - 3 : t + 5, 0].any(), "expected the middle of a left swing"
    q = q0.copy()
    q[t : t + 2, _col(g1, "left_hip_yaw_joint")] = -2.2
    parts, rec = repair.fix_defects(g1, _judged(g1, walk, q))
    assert len(parts) == 1 and (parts[0].first, parts[0].last) == (0, len(q) - 1)
    assert rec["cut"] == [] and len(rec["repaired"]) == 1
    a, b = rec["repaired"][0]
    assert a < t and b > t + 1 and (b - a + 1) / targets.fps <= repair.DefectConfig().max_repair_s
    assert set(rec["why"]) >= {"foot_twist", "joint_speed_vs_human"}  # 2 of 90 frames: hip_magnitude only warns
    out = parts[0].result
    outside = np.r_[0:a, b + 1 : len(q)]
    assert np.array_equal(out.qpos[outside], q[outside])  # nothing outside the range changes
    assert np.array_equal(out.qpos[:, :7], q[:, :7])  # nor the root
    right = [g1.joint_names.index(j) for j in g1.joint_names if not j.startswith("left_")]
    assert np.array_equal(out.qpos[:, g1.qpos_adr[right]], q[:, g1.qpos_adr[right]])  # only the left leg's joints
    # A cubic from outside the range flattens the swing's knee peak (1.08 -> 0.70 rad here); the
    # swing foot stays off the floor.
    assert np.abs(out.qpos[a : b + 1] - q0[a : b + 1]).max() < 0.5
    assert checks.foot_clearance(g1, out.qpos[a : b + 1])[:, 0].min() > 0.005
    rep = out.motion.quality
    assert rep["verdict"] == "ok", checks.verdict_lines(rep)
    assert rep["defects"] is rec and out.motion.provenance["source_frames"] == [0, len(q) - 1]
    assert _stance_steps(g1, out.qpos, targets.contacts) * targets.fps <= SLIDE_TOL_M_S


def test_a_bridge_that_would_drag_a_planted_foot_is_cut_instead(g1, walk):
    """The long flip runs into the left foot's landing: a cubic over the leg cannot follow a
    swing into a stance, the planted sole would slide, so the range is cut."""
    targets, q0, _ = walk
    assert targets.contacts[FLIP[1] - 4 : FLIP[1] + 4, 0].all() and not targets.contacts[FLIP[0], 0]
    q = q0.copy()
    q[FLIP[0] : FLIP[1] + 1, _col(g1, "left_hip_yaw_joint")] = -2.2
    parts, rec = repair.fix_defects(g1, _judged(g1, walk, q))
    assert not any(a <= FLIP[0] <= b for a, b in rec["repaired"])
    assert any(a <= FLIP[0] and FLIP[1] <= b for a, b in rec["cut"])
    assert parts and all(p.last < FLIP[0] or p.first > FLIP[1] for p in parts)
    for p in parts:
        assert np.array_equal(p.result.qpos, q[p.first : p.last + 1])
        assert p.result.motion.quality["verdict"] != "fail", checks.verdict_lines(p.result.motion.quality)


def test_an_arm_spike_changes_only_that_arm(g1, walk):
    q = walk[1].copy()
    q[50, _col(g1, "right_elbow_joint")] += 0.6
    parts, rec = repair.fix_defects(g1, _judged(g1, walk, q))
    assert len(parts) == 1 and rec["why"] == {"joint_speed_vs_human": [[50, 51]]}
    changed = np.flatnonzero(np.abs(parts[0].result.qpos - q).max(axis=0) > 0)
    names = {g1.joint_names[list(g1.qpos_adr).index(c)] for c in changed}
    assert "right_elbow_joint" in names and names <= {
        "right_elbow_joint",
        "right_wrist_roll_joint",
        "right_wrist_pitch_joint",
        "right_wrist_yaw_joint",
    }
    assert (
        abs(parts[0].result.qpos[50, _col(g1, "right_elbow_joint")] - walk[1][50, _col(g1, "right_elbow_joint")]) < 0.05
    )
    assert parts[0].result.motion.quality["verdict"] == "ok"


def test_a_bridge_that_would_reach_into_the_robot_is_cut_instead(g1, walk, monkeypatch):
    """The arm spike of the test above, bridged by a cubic that turns the wrist into the arm (the
    wrist yaw at its limit: 3.5 cm into itself): the range is cut, no part reaches into itself."""
    q = walk[1].copy()
    q[50, _col(g1, "right_elbow_joint")] += 0.6
    real = repair.hermite_bridge

    def into_itself(cols, a, b):  # the bridged columns: the right elbow and wrist, wrist yaw last
        out = real(cols, a, b)
        out[a : b + 1, -1] = g1.q_upper[g1.joint_names.index("right_wrist_yaw_joint")]
        return out

    monkeypatch.setattr(repair, "hermite_bridge", into_itself)
    parts, rec = repair.fix_defects(g1, _judged(g1, walk, q))
    assert rec["repaired"] == [] and any(a <= 50 <= b for a, b in rec["cut"])
    for p in parts:
        assert forward_all(g1, p.result.qpos)[2][:, 2].max() <= 0.01  # SELF


def test_cut_splits_the_clip_and_judges_each_part(g1, walk):
    targets, q0, _ = walk
    q = q0.copy()
    q[44:47, _col(g1, "left_hip_yaw_joint")] = -2.2
    parts, rec = repair.fix_defects(g1, _judged(g1, walk, q), repair.DefectConfig(mode="cut"))
    assert rec["repaired"] == [] and rec["cut"] and rec["dropped"] == []
    assert [(p.first, p.last) for p in parts] == [(0, rec["cut"][0][0] - 1), (rec["cut"][-1][1] + 1, len(q) - 1)]
    assert rec["cut"][0][0] <= 44 and rec["cut"][-1][1] >= 47
    for p in parts:
        assert np.array_equal(p.result.qpos, q[p.first : p.last + 1])
        assert p.result.motion.num_frames == p.last - p.first + 1
        assert np.array_equal(p.result.motion.foot_contacts, targets.contacts[p.first : p.last + 1])
        assert p.result.motion.provenance["source_frames"] == [p.first, p.last]
        assert p.result.motion.quality["verdict"] != "fail", checks.verdict_lines(p.result.motion.quality)
    kept, rec = repair.fix_defects(g1, _judged(g1, walk, q), repair.DefectConfig(mode="keep"))
    assert len(kept) == 1 and np.array_equal(kept[0].result.qpos, q) and rec["defective_frames"] > 0
    short = repair.DefectConfig(mode="cut", min_part_s=2.0)  # neither side of the cut lasts 2 s
    assert repair.fix_defects(g1, _judged(g1, walk, q), short)[0] == []


def test_defects_mode_is_checked():
    with pytest.raises(ConfigError, match="defects"):
        repair.DefectConfig(mode="fix")


def test_a_neck_on_the_chest_joint_does_not_flip_the_chest_frame():
    """A rig whose Neck sits on its chest joint (OFFSET 0 0 0, a real one from a public
    repository) has no bone there: the chest frame built on it flipped 175-178 deg between frames.
    The frame now leans on the first joint apart from the chest (the head)."""
    from simreal.retarget.targets import human_frames, human_keypoints

    clip = synth.walking(duration_s=2.0)
    kp, _ = human_keypoints(HumanMotion(clip.names, clip.positions, clip.fps, clip.parents, {"path": "walk"}))
    torso = human_frames(kp, clip.fps)["torso"]
    noise = np.random.default_rng(0).normal(0.0, 1e-9, kp["torso"].shape)  # the file's rounding
    kp["neck"] = kp["torso"] + noise  # the zero-length bone
    coincident = human_frames(kp, clip.fps)["torso"]
    between = np.degrees(np.arccos(np.clip(np.einsum("tij,tij->t", torso, coincident) / 2 - 0.5, -1, 1)))
    assert between.max() < 15.0, between.max()  # the same chest, leaning on the head instead of the neck
    step = np.degrees(np.arccos(np.clip(np.einsum("tij,tij->t", coincident[1:], coincident[:-1]) / 2 - 0.5, -1, 1)))
    assert step.max() < 5.0, step.max()


def _raw_foot_points(clip: synth.SynthClip, positions: np.ndarray) -> np.ndarray:
    """(T, 2, 2, 3): the ankle and toe joints of the left and right foot, as captured."""
    idx = [[clip.names.index(f"{side}{part}") for part in ("Foot", "Toe")] for side in ("Left", "Right")]
    return positions[:, idx]


def test_stance_labels_hold_on_a_capture_floor_that_is_not_level(g1):
    """A capture floor 5 cm lower at one end of a 5 m walk (as a public 120 fps walk's is) is
    fitted as a plane and taken out: the stance labels match the level clip's. Read as level,
    the feet at the low end seemed planted nowhere (a planted foot labelled swing, its robot
    foot free to slide) and at the high end hovering."""
    from simreal.retarget.targets import floor_slope

    clip = synth.walking(duration_s=6.0, fps=60.0, turn_rate_rad_s=0.0, feet=synth.REAL_FEET)
    pos = clip.positions
    span = np.ptp(pos[:, 0, 0])
    slope = -0.05 / span  # 5 cm down along the walk
    tilted = pos.copy()
    tilted[..., 2] += slope * (pos[..., 0] - pos[:, 0, 0].mean())
    assert span > 4.0
    fitted, _ = floor_slope(_raw_foot_points(clip, tilted), clip.fps)
    assert abs(fitted[0] - slope) < 0.1 * abs(slope) and abs(fitted[1]) < 0.1 * abs(slope), (fitted, slope)

    def labels(p: np.ndarray) -> np.ndarray:
        return build_targets(HumanMotion(clip.names, p, clip.fps, clip.parents, {"path": "walk"}), g1).contacts

    level, got = labels(pos), labels(tilted)
    assert (got == level).mean() > 0.98, (got == level).mean()
    assert (got & clip.contacts).sum() / clip.contacts.sum() > 0.9
    # on the spot (no ground covered) the floor stays level, though one foot's rig sits 5 mm higher
    still = synth.balancing(duration_s=3.0, fps=60.0)
    p = still.positions.copy()
    p[:, [i for i, n in enumerate(still.names) if n.startswith("Left")], 2] += 0.005
    assert np.abs(floor_slope(_raw_foot_points(still, p), still.fps)[0]).max() < 1e-3


def test_no_leg_target_asks_for_the_straight_leg():
    """Near a straight leg the knee turns fastest per millimetre of reach (H1's swung through
    straight at its 14 rad/s limit on a real walk): lowered by ``reach_drop``, no hip-to-ankle
    target is longer than MAX_REACH of the straight leg, and a leg well inside it is left alone."""
    from simreal.retarget.targets import MAX_REACH, reach_drop

    fps, R = 60.0, 0.8
    T = 120
    names = ("left_hip", "left_knee", "left_ankle", "right_hip", "right_knee", "right_ankle")
    pos = np.zeros((T, 6, 3))
    stretch = np.where(np.arange(T) < 60, 0.9, np.linspace(0.9, 1.02, T))  # then past straight
    lean = 0.2  # rad forward, as in late stance
    for side, y in ((0, 0.1), (3, -0.1)):
        pos[:, side, :] = [0.0, y, 1.0]
        pos[:, side + 2, :] = pos[:, side] - stretch[:, None] * R * np.array([np.sin(lean), 0.0, np.cos(lean)])
        pos[:, side + 1] = 0.5 * (pos[:, side] + pos[:, side + 2])
    drop = reach_drop(pos, names, {"left": R, "right": R}, fps)
    lowered = pos.copy()
    lowered[:, [0, 3], 2] -= drop[:, None]
    reach = np.linalg.norm(lowered[:, 0] - lowered[:, 2], axis=1) / R
    assert reach.max() <= MAX_REACH + 0.002, reach.max()
    assert np.all(drop[:40] == 0.0) and drop.max() < 0.05
    assert np.abs(np.diff(drop)).max() * fps < 0.5  # lowered over time, not in a frame [m/s]
    assert not reach_drop(pos, names[:3], {"left": R}, fps).any()  # one leg's keypoints only: nothing


@pytest.mark.parametrize("fps", [30.0, 120.0])
def test_foot_slide_is_a_speed_whatever_the_frame_rate(g1, fps):
    """A planted foot dragged at 0.2 m/s slides at 30 and at 120 fps alike (1 cm a frame, the
    old rule, was 1.2 m/s at 120 fps: a real walk's 0.27 m/s slide read 0%); 0.05 m/s does not."""
    from simreal.retarget.metrics import quality_report

    clip = synth.walking(duration_s=1.0, fps=fps)
    targets = build_targets(HumanMotion(clip.names, clip.positions, fps, clip.parents, {"path": "walk"}), g1)
    T = targets.num_frames
    held = dataclasses.replace(targets, contacts=np.ones((T, 2), bool), pivot=np.zeros((T, 2), np.int8))
    for speed, sliding in ((0.2, True), (0.05, False)):
        q = np.tile(g1.q_home, (T, 1))
        q[:, 0] += speed * np.arange(T) / fps  # the whole robot, both feet planted, drifts along x
        s = quality_report(g1, q, held)["foot_slide"]
        assert s["max_m_s"] == pytest.approx(speed, rel=1e-3)
        assert s["fraction"] == (1.0 if sliding else 0.0), s
