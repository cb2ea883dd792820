"""Motion loaders recover known joint positions and reject malformed files with the line or field at fault."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixtures import synth_motion as synth
from simreal.errors import ConfigError, DataFileError
from simreal.retarget import amass, joint_names
from simreal.retarget.bvh import load_bvh
from simreal.retarget.keypoints_file import load_keypoints_csv, load_keypoints_npz
from simreal.retarget.loaders import load_motion_source
from simreal.rotations import rotvec_to_matrix

CONVENTIONS = [  # units, up, channel order, 6 channels on every joint, units passed to the loader
    ("cm", "y", "ZXY", False, "auto"),  # LAFAN1 / Mixamo style
    ("m", "z", "XYZ", True, "auto"),
    ("mm", "y", "ZYX", False, "auto"),
    ("in", "z", "YXZ", True, "auto"),  # CMU's BVH conversions in inches: read as CMU units, a 3.9 m person
    ("in", "y", "ZXY", False, "in"),
    ("cmu", "y", "ZYX", False, "auto"),  # CMU's ASF unit (inch / 0.45): a 7.5 cm thigh when read as cm
    ("cm", "z", "ZYX", True, "cm"),
]


@pytest.fixture(scope="module")
def clips():
    return {"walking": synth.walking(duration_s=2.0), "crouching": synth.crouching(duration_s=2.0, scale=1.1)}


def _compare(motion, clip):
    idx = [motion.names.index(n) for n in clip.names]
    return np.abs(motion.positions[:, idx] - clip.positions).max()


@pytest.mark.parametrize("units,up,order,six,load_units", CONVENTIONS)
@pytest.mark.parametrize("name", ["walking", "crouching"])
def test_bvh_recovers_joint_positions(tmp_path, clips, name, units, up, order, six, load_units):
    clip = clips[name]
    path = tmp_path / f"{name}.bvh"
    synth.write_bvh(path, clip, units=units, up=up, order=order, six_channels=six)
    m = load_bvh(path, units=load_units, up="auto")
    assert _compare(m, clip) < 1e-4  # metres; the file holds 6 decimals
    assert m.fps == 30.0
    assert m.source["up_axis"] == up
    assert m.source["units"] == units
    assert set(clip.names) <= set(m.names)  # end sites kept as <parent>_end


def test_bvh_explicit_conventions_override_guesses(tmp_path, clips):
    path = tmp_path / "w.bvh"
    synth.write_bvh(path, clips["walking"], units="cm", up="y")
    m = load_bvh(path, units=0.01, up="y")
    assert _compare(m, clips["walking"]) < 1e-4
    wrong = load_bvh(path, units=0.01, up="z")
    assert _compare(wrong, clips["walking"]) > 0.5
    from simreal.errors import ConfigError
    from simreal.retarget.loaders import load_motion_source

    # through the command's loader, a unit that makes the person 170 m tall (or 17 cm) is refused,
    # with what auto reads
    for units, span in (("m", "170 m"), ("mm", "0.17 m")):
        with pytest.raises(
            ConfigError,
            match=f"read in {units}, the skeleton's largest joint-to-joint span is "
            f"{span}.*--units auto reads it as cm \\(1.70 m\\)",
        ):
            load_motion_source(path, units=units, up="y")
    # through the command's loader, an up axis that lays the human on the floor is refused

    assert _compare(load_motion_source(path, units="cm", up="y"), clips["walking"]) < 1e-4
    with pytest.raises(ConfigError, match="read with --up z, the head is not above the feet"):
        load_motion_source(path, units="cm", up="z")


GOOD = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Spine
  {
    OFFSET 0 10 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 10 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.0333333
0 90 0 0 0 0 0 0 0
0 91 0 0 0 0 10 0 0
"""


def test_small_bvh_parses(tmp_path):
    p = tmp_path / "ok.bvh"
    p.write_text(GOOD)
    m = load_bvh(p, units="cm", up="y")
    assert m.names == ("Hips", "Spine", "Spine_end")
    np.testing.assert_allclose(m.positions[0, 1], [0, 0, 1.0], atol=1e-9)  # Y-up 100 cm -> z 1 m
    assert m.fps == 30.0


MALFORMED = [  # (edit of GOOD, expected fragment of the message)
    (lambda s: s.replace("HIERARCHY", "HIERARCHIE"), "line 1: expected 'HIERARCHY'"),
    (
        lambda s: s.replace("OFFSET 0 10 0\n    CHANNELS", "OFFSET 0 ten 0\n    CHANNELS"),
        "line 8: non-numeric value in OFFSET",
    ),
    (
        lambda s: s.replace("CHANNELS 3 Zrotation", "CHANNELS 3 Wrotation"),
        "line 9: unknown channel 'Wrotation'; valid: Xposition",
    ),
    (
        lambda s: s.replace("CHANNELS 3 Zrotation Xrotation Yrotation", "CHANNELS 4 Zrotation Xrotation Yrotation"),
        "line 9: CHANNELS says 4 channels but lists 3",
    ),
    (
        lambda s: s.replace("0 91 0 0 0 0 10 0 0", "0 91 0 0 0 0 10 0"),
        "line 20: frame 1 has 8 values; the hierarchy declares 9",
    ),
    (
        lambda s: s.replace("0 91 0 0 0 0 10 0 0", "0 91 0 0 x 0 10 0 0"),
        "line 20: frame 1, column 5: 'x' is not a number",
    ),
    (lambda s: s.replace("Frames: 2", "Frames: 3"), "'Frames: 3' but the file holds only 2 frame lines"),
    (lambda s: s.replace("Frame Time: 0.0333333", "Frame Time: 0"), "line 18: frame time must be > 0 s"),
    (lambda s: s.replace("MOTION\n", ""), "expected 'MOTION' after the hierarchy"),
    (lambda s: s.split("MOTION")[0].rsplit("}", 1)[0], "file ends early"),
    (lambda s: s.replace("JOINT Spine", "JOINT Hips"), "line 6: duplicate joint name 'Hips'"),
    (lambda s: "", "file ends early"),
]


@pytest.mark.parametrize("edit,message", MALFORMED)
def test_malformed_bvh_names_the_line(tmp_path, edit, message):
    p = tmp_path / "bad.bvh"
    p.write_text(edit(GOOD))
    with pytest.raises(DataFileError) as e:
        load_bvh(p, units="cm", up="y")
    assert message in str(e.value)
    assert str(p) in str(e.value)


def test_binary_and_missing_files(tmp_path):
    p = tmp_path / "bin.bvh"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    with pytest.raises(DataFileError, match="not a text file"):
        load_bvh(p)
    with pytest.raises(DataFileError, match="file not found"):
        load_bvh(tmp_path / "nope.bvh")
    with pytest.raises(DataFileError, match="unknown motion format '.fbx'; valid: .bvh, .csv, .npz"):
        load_motion_source(tmp_path / "clip.fbx")


def _write_csv(path, clip, with_time=True, scale=1.0):
    cols = (["time"] if with_time else []) + [f"{n}_{a}" for n in clip.names for a in "xyz"]
    rows = []
    for t in range(len(clip.positions)):
        vals = ([t / clip.fps] if with_time else []) + list(scale * clip.positions[t].ravel())
        rows.append(",".join(f"{v:.7f}" for v in vals))
    path.write_text("# synthesised\n" + ",".join(cols) + "\n" + "\n".join(rows) + "\n")


def test_keypoint_csv_and_npz(tmp_path, clips):
    clip = clips["walking"]
    p = tmp_path / "k.csv"
    _write_csv(p, clip, scale=100.0)  # centimetres, Z-up
    m = load_motion_source(p)
    assert _compare(m, clip) < 1e-6 and m.source["units"] == "cm"
    assert m.fps == pytest.approx(30.0)
    q = tmp_path / "k.npz"
    np.savez(q, positions=clip.positions, names=np.array(clip.names), fps=30.0)
    m2 = load_motion_source(q)
    assert _compare(m2, clip) < 1e-12 and m2.source["format"] == "keypoints-npz"


def test_keypoint_files_malformed(tmp_path, clips):
    clip = clips["walking"]
    p = tmp_path / "k.csv"
    _write_csv(p, clip, with_time=False)
    with pytest.raises(DataFileError, match=r"no time column .* give the frame rate \(--fps\)"):
        load_keypoints_csv(p)
    assert load_keypoints_csv(p, fps=30.0).num_frames == len(clip.positions)
    lines = p.read_text().splitlines()
    lines[5] = lines[5].replace(lines[5].split(",")[3], "oops", 1)
    p.write_text("\n".join(lines))
    with pytest.raises(DataFileError, match=r"line 6, column 4 \(Hips_x\)|line 6, column 4"):
        load_keypoints_csv(p, fps=30.0)
    p.write_text("pelvis_x,pelvis_y\n1,2\n")
    with pytest.raises(DataFileError, match="keypoint 'pelvis' lacks column"):
        load_keypoints_csv(p, fps=30.0)
    p.write_text("pelvis_x,pelvis_y,pelvis_z,weird\n1,2,3,4\n")
    with pytest.raises(DataFileError, match="line 1, column 4: header 'weird'"):
        load_keypoints_csv(p, fps=30.0)
    q = tmp_path / "k.npz"
    np.savez(q, positions=np.zeros((5, 3, 2)), names=np.array(["a", "b", "c"]), fps=30.0)
    with pytest.raises(DataFileError, match=r"field 'positions' must have shape \(T, K, 3\)"):
        load_keypoints_npz(q)
    np.savez(q, stuff=np.zeros(3))
    with pytest.raises(DataFileError, match="neither an AMASS clip"):
        load_motion_source(q)


# --- AMASS ------------------------------------------------------------------------

PARENTS_52 = [-1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19] + [20] * 15 + [21] * 15


def _fake_body_model(path: Path, rng) -> np.ndarray:
    """An SMPL+H-shaped model: each joint regressed from one vertex; returns the rest joints."""
    J = len(PARENTS_52)
    V = J + 10
    v = rng.normal(scale=0.3, size=(V, 3))
    dirs = rng.normal(scale=0.01, size=(V, 3, 16))
    reg = np.zeros((J, V))
    reg[np.arange(J), np.arange(J)] = 1.0
    kin = np.array([[4294967295] + PARENTS_52[1:], list(range(J))], dtype=np.int64)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        J_regressor=reg,
        v_template=v,
        shapedirs=dirs,
        kintree_table=kin,
        posedirs=np.zeros((V, 3, 1)),
        weights=np.zeros((V, J)),
        f=np.zeros((1, 3), dtype=np.int32),
    )
    return v, dirs


def _fk(parents, rest, rots, trans):
    pos = np.zeros((len(parents), 3))
    glob = [None] * len(parents)
    for j, p in enumerate(parents):
        if p < 0:
            glob[j], pos[j] = rots[j], rest[j] + trans
        else:
            glob[j] = glob[p] @ rots[j]
            pos[j] = pos[p] + glob[p] @ (rest[j] - rest[p])
    return pos


def test_amass_smplh_joints(tmp_path):
    rng = np.random.default_rng(0)
    v, dirs = _fake_body_model(tmp_path / "models" / "smplh" / "female" / "model.npz", rng)
    T = 4
    betas = rng.normal(size=16)
    poses = rng.normal(scale=0.4, size=(T, 156))
    trans = rng.normal(size=(T, 3))
    clip = tmp_path / "clip_poses.npz"
    np.savez(clip, poses=poses, trans=trans, betas=betas, gender=np.array("female"), mocap_framerate=120.0)
    m = load_motion_source(clip, body_models=str(tmp_path / "models"))
    assert m.names == amass.SMPL_BODY_JOINTS and m.fps == 120.0
    rest = (v + dirs @ betas)[: len(PARENTS_52)]
    for t in range(T):
        rots = rotvec_to_matrix(poses[t, :66].reshape(22, 3))
        np.testing.assert_allclose(m.positions[t], _fk(PARENTS_52[:22], rest[:22], rots, trans[t]), atol=1e-10)
    idx = joint_names.resolve_keypoints(m.names)
    assert m.names[idx["left_ankle"]] == "left_ankle" and m.names[idx["left_toe"]] == "left_foot"


def test_amass_without_body_model_says_what_is_needed(tmp_path, monkeypatch):
    monkeypatch.delenv("SIMREAL_BODY_MODELS", raising=False)
    clip = tmp_path / "c.npz"
    np.savez(
        clip,
        poses=np.zeros((3, 165)),
        trans=np.zeros((3, 3)),
        betas=np.zeros(10),
        gender=np.array("neutral"),
        mocap_frame_rate=30.0,
        surface_model_type=np.array("smplx"),
    )
    with pytest.raises(DataFileError) as e:
        load_motion_source(clip)
    msg = str(e.value)
    assert "SMPLX body model (neutral)" in msg and "DIR/smplx/SMPLX_NEUTRAL.npz" in msg and "--body-models" in msg
    assert "smpl-x.is.tue.mpg.de" in msg


def test_amass_malformed_fields(tmp_path):
    clip = tmp_path / "c.npz"
    np.savez(clip, poses=np.zeros((3, 70)), trans=np.zeros((3, 3)), mocap_framerate=30.0)
    with pytest.raises(DataFileError, match=r"field 'poses' must be \(T, 72 \| 156 \| 165\)"):
        load_motion_source(clip, body_models=str(tmp_path))
    np.savez(clip, poses=np.zeros((3, 72)), trans=np.zeros((2, 3)), mocap_framerate=30.0)
    with pytest.raises(DataFileError, match=r"field 'trans' must be \(3, 3\)"):
        load_motion_source(clip, body_models=str(tmp_path))
    np.savez(clip, poses=np.zeros((3, 72)), trans=np.zeros((3, 3)))
    with pytest.raises(DataFileError, match="missing field 'mocap_framerate'"):
        load_motion_source(clip, body_models=str(tmp_path))


# --- joint names --------------------------------------------------------------------

RIGS = {
    "lafan": [
        "Hips",
        "LeftUpLeg",
        "LeftLeg",
        "LeftFoot",
        "LeftToe",
        "RightUpLeg",
        "RightLeg",
        "RightFoot",
        "RightToe",
        "Spine",
        "Spine1",
        "Spine2",
        "Neck",
        "Head",
        "LeftShoulder",
        "LeftArm",
        "LeftForeArm",
        "LeftHand",
        "RightShoulder",
        "RightArm",
        "RightForeArm",
        "RightHand",
    ],
    "cmu": [
        "hip",
        "lhipjoint",
        "lfemur",
        "ltibia",
        "lfoot",
        "ltoes",
        "rhipjoint",
        "rfemur",
        "rtibia",
        "rfoot",
        "rtoes",
        "lowerback",
        "upperback",
        "thorax",
        "lowerneck",
        "upperneck",
        "head",
        "lclavicle",
        "lhumerus",
        "lradius",
        "lwrist",
        "lhand",
        "rclavicle",
        "rhumerus",
        "rradius",
        "rwrist",
        "rhand",
    ],
    "unreal": [
        "pelvis",
        "thigh_l",
        "calf_l",
        "foot_l",
        "ball_l",
        "thigh_r",
        "calf_r",
        "foot_r",
        "ball_r",
        "spine_01",
        "spine_02",
        "spine_03",
        "neck_01",
        "head",
        "clavicle_l",
        "upperarm_l",
        "lowerarm_l",
        "hand_l",
        "clavicle_r",
        "upperarm_r",
        "lowerarm_r",
        "hand_r",
    ],
    "mixamo": [
        f"mixamorig:{n}"
        for n in [
            "Hips",
            "LeftUpLeg",
            "LeftLeg",
            "LeftFoot",
            "LeftToeBase",
            "RightUpLeg",
            "RightLeg",
            "RightFoot",
            "RightToeBase",
            "Spine",
            "Spine1",
            "Spine2",
            "Neck",
            "Head",
            "LeftArm",
            "LeftForeArm",
            "LeftHand",
            "RightArm",
            "RightForeArm",
            "RightHand",
        ]
    ],
    "hik": [
        f"Character1_{n}"
        for n in [
            "Hips",
            "LeftUpLeg",
            "LeftLeg",
            "LeftFoot",
            "LeftToeBase",
            "RightUpLeg",
            "RightLeg",
            "RightFoot",
            "RightToeBase",
            "Spine",
            "Spine1",
            "Neck",
            "Head",
            "LeftArm",
            "LeftForeArm",
            "LeftHand",
            "RightArm",
            "RightForeArm",
            "RightHand",
        ]
    ],
    "biped": [
        "Bip01 Pelvis",
        "Bip01 L Thigh",
        "Bip01 L Calf",
        "Bip01 L Foot",
        "Bip01 L Toe0",
        "Bip01 R Thigh",
        "Bip01 R Calf",
        "Bip01 R Foot",
        "Bip01 R Toe0",
        "Bip01 Spine",
        "Bip01 Neck",
        "Bip01 Head",
        "Bip01 L UpperArm",
        "Bip01 L Forearm",
        "Bip01 L Hand",
        "Bip01 R UpperArm",
        "Bip01 R Forearm",
        "Bip01 R Hand",
    ],
}
EXPECTED = {
    "lafan": {
        "left_hip": "LeftUpLeg",
        "left_knee": "LeftLeg",
        "left_ankle": "LeftFoot",
        "left_toe": "LeftToe",
        "torso": "Spine2",
        "left_shoulder": "LeftArm",
        "left_wrist": "LeftHand",
    },
    "cmu": {
        "pelvis": "hip",
        "left_hip": "lfemur",
        "left_knee": "ltibia",
        "left_ankle": "lfoot",
        "left_shoulder": "lhumerus",
        "left_elbow": "lradius",
        "left_wrist": "lwrist",
        "torso": "thorax",
    },
    "unreal": {
        "left_hip": "thigh_l",
        "left_knee": "calf_l",
        "left_toe": "ball_l",
        "torso": "spine_03",
        "left_shoulder": "upperarm_l",
        "right_wrist": "hand_r",
    },
    "mixamo": {"left_toe": "mixamorig:LeftToeBase", "left_elbow": "mixamorig:LeftForeArm"},
    "hik": {"pelvis": "Character1_Hips", "left_toe": "Character1_LeftToeBase", "right_knee": "Character1_RightLeg"},
    "biped": {
        "pelvis": "Bip01 Pelvis",
        "left_hip": "Bip01 L Thigh",
        "right_knee": "Bip01 R Calf",
        "left_toe": "Bip01 L Toe0",
        "left_shoulder": "Bip01 L UpperArm",
    },
}


@pytest.mark.parametrize("rig", sorted(RIGS))
def test_rig_names_resolve(rig):
    names = RIGS[rig]
    idx = joint_names.resolve_keypoints(names)
    for canon, src in EXPECTED[rig].items():
        assert names[idx[canon]] == src, canon


def test_unknown_rig_asks_for_a_joint_map():
    names = ["root", "a", "b", "c"]
    with pytest.raises(ConfigError, match=r"could not find pelvis.*joints: root, a, b, c.*--joint-map"):
        joint_names.resolve_keypoints(names)
    # without a joint map of the user's, the file is to blame, not a joint_map key
    with pytest.raises(DataFileError, match=r"^clip.bvh: could not find pelvis"):
        joint_names.resolve_keypoints(names, source="clip.bvh")
    jm = {
        "pelvis": "root",
        "left_hip": "a",
        "right_hip": "b",
        "left_knee": "c",
        "right_knee": "c",
        "left_ankle": "a",
        "right_ankle": "b",
    }
    assert joint_names.resolve_keypoints(names, jm)["pelvis"] == 0
    with pytest.raises(ConfigError, match="joint_map.nose.*valid: pelvis"):
        joint_names.resolve_keypoints(names, {"nose": "a"})
