"""The motion file round-trips, matches the DESIGN.md contract, and refuses broken files by field."""

from __future__ import annotations

import dataclasses
import json

import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from fixtures import synth_motion as synth
from simreal.errors import DataFileError, UnknownNameError
from simreal.motion_file import Motion, load_motion, save_motion
from simreal.retarget.pipeline import retarget
from simreal.retarget.robot import load_robot
from simreal.retarget.skeleton import HumanMotion


@pytest.fixture(scope="module")
def result():
    clip = synth.walking(duration_s=1.5)
    robot = load_robot("g1")
    human = HumanMotion(clip.names, clip.positions, clip.fps, clip.parents, {"path": "synth:walking"})
    return robot, retarget(human, robot, "interaction")


CONTRACT = (
    "fps",
    "joint_names",
    "root_pos",
    "root_quat",
    "root_lin_vel",
    "root_ang_vel",
    "dof_pos",
    "dof_vel",
    "body_names",
    "body_pos",
    "body_quat",
    "foot_names",
    "foot_contacts",
    "provenance",
    "quality",
    "format_version",
)


def test_round_trip_and_contract(tmp_path, result):
    robot, res = result
    path = tmp_path / "walk_g1.npz"
    save_motion(path, res.motion)
    with np.load(path, allow_pickle=False) as z:  # readable without pickle, every contract key present
        assert set(CONTRACT) <= set(z.files)
        assert z["root_quat"].shape == (res.motion.num_frames, 4)
    m = load_motion(path)
    for f in dataclasses.fields(Motion):
        a, b = getattr(m, f.name), getattr(res.motion, f.name)
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            assert a == b, f.name
    T, n = m.num_frames, len(m.joint_names)
    assert m.fps == 30.0 and n == 29 and m.joint_names == robot.joint_names
    assert m.dof_pos.shape == m.dof_vel.shape == (T, n)
    assert m.body_pos.shape == (T, len(m.body_names), 3) and m.body_quat.shape == (T, len(m.body_names), 4)
    assert m.foot_names == ("left_foot", "right_foot") and m.foot_contacts.dtype == bool
    assert m.joint_index("left_knee_joint") == 3
    with pytest.raises(UnknownNameError, match="valid joints: .*left_knee_joint"):
        m.joint_index("knee")


def test_contents_match_the_robot(result):
    robot, res = result
    m, mdl = res.motion, robot.model
    d = mujoco.MjData(mdl)
    t = m.num_frames // 2
    d.qpos[:3], d.qpos[3:7] = m.root_pos[t], m.root_quat[t]  # wxyz, like MuJoCo
    d.qpos[robot.qpos_adr] = m.dof_pos[t]
    mujoco.mj_kinematics(mdl, d)
    np.testing.assert_allclose(d.xpos[1:], m.body_pos[t], atol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(d.xquat[1:] * m.body_quat[t], axis=1)), 1.0, atol=1e-9)
    np.testing.assert_allclose(m.dof_vel[1:-1], (m.dof_pos[2:] - m.dof_pos[:-2]) * m.fps / 2, atol=1e-9)
    np.testing.assert_allclose(m.root_lin_vel[1:-1], (m.root_pos[2:] - m.root_pos[:-2]) * m.fps / 2, atol=1e-9)
    # World-frame angular velocity: R_{t+1} R_{t-1}^T = exp([w_t] 2 dt).
    rel = Rotation.from_matrix(_mat(m.root_quat[t + 1]) @ _mat(m.root_quat[t - 1]).T)
    np.testing.assert_allclose(rel.as_rotvec() * m.fps / 2, m.root_ang_vel[t], atol=1e-9)
    prov, qual = m.provenance, m.quality
    assert prov["method"] == "interaction" and prov["robot"]["robot"] == "g1"
    assert prov["source"]["path"] == "synth:walking" and "scaling" in prov and "mujoco" in prov["versions"]
    for key in ("penetration", "foot_slide", "limits", "keypoint_error_m", "jitter_rad_s2", "solver"):
        assert key in qual
    json.dumps(qual)


def _mat(quat):
    R = np.empty(9)
    mujoco.mju_quat2Mat(R, quat)
    return R.reshape(3, 3)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("root_quat", lambda m: m.root_quat * 2.0, "field 'root_quat' holds quaternions that are not unit length"),
        ("dof_pos", lambda m: m.dof_pos[:, :-1], r"field 'dof_pos' has shape \(\d+, 28\), expected \(\d+, 29\)"),
        ("body_pos", lambda m: m.body_pos[:-1], "field 'body_pos' has shape"),
        ("fps", lambda m: 0.0, "field 'fps' must be > 0 Hz"),
        ("dof_vel", lambda m: m.dof_vel * np.nan, "field 'dof_vel' holds non-finite values"),
        ("foot_names", lambda m: ("left_foot",), "field 'foot_names' must name 2 feet"),
    ],
)
def test_broken_motion_refused_by_field(tmp_path, result, field, value, message):
    _, res = result
    bad = dataclasses.replace(res.motion, **{field: value(res.motion)})
    with pytest.raises(DataFileError, match=message):
        save_motion(tmp_path / "bad.npz", bad)


def test_load_refuses_foreign_and_truncated_files(tmp_path, result):
    p = tmp_path / "x.npz"
    np.savez(p, positions=np.zeros((2, 3, 3)))
    with pytest.raises(DataFileError, match="missing field.*fps.*is this a simreal motion file"):
        load_motion(p)
    p.write_bytes(b"not a zip")
    with pytest.raises(DataFileError, match="not a readable npz file"):
        load_motion(p)
    _, res = result
    good = tmp_path / "g.npz"
    save_motion(good, res.motion)
    with np.load(good, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["quality"] = np.array("{not json")
    np.savez(p, **arrays)
    with pytest.raises(DataFileError, match="field 'quality' is not valid JSON"):
        load_motion(p)
