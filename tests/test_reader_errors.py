"""Every npz and YAML reader refuses a bad file in one line naming the file, the field and what was expected.

A table of damaged inputs (a missing key, a wrong dtype or shape, NaN, an object array, a
truncated file, random bytes, an empty file, a folder in place of the file) per reader; and
``simreal retarget`` on pickled AMASS and keypoint arrays, end to end through the CLI.
"""

from __future__ import annotations

import copy
import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from fixtures import reader_seeds as S
from simreal.bundle import load_bundle
from simreal.cli import main
from simreal.errors import SimrealError
from simreal.motion_file import load_motion
from simreal.retarget.loaders import load_motion_source
from simreal.robot_spec import load_robot_spec
from simreal.yaml_io import load_yaml


def _arrays(seed: dict[str, np.ndarray], **changes: Any) -> dict[str, np.ndarray]:
    """``seed`` with arrays replaced (``None`` deletes one)."""
    out = {**seed, **changes}
    return {k: v for k, v in out.items() if v is not None}


def _nan_at(a: np.ndarray, index: tuple) -> np.ndarray:
    a = np.array(a, dtype=float)
    a[index] = np.nan
    return a


OBJECT = np.array([{"pickled": True}], dtype=object)
FILE_DAMAGE = {  # the whole file, whatever reads it
    "truncated": lambda good: good[: len(good) // 2],
    "random bytes": lambda good: np.random.default_rng(1).bytes(300),
    "empty": lambda good: b"",
}


# --- npz readers: (reader, seed arrays, damaged arrays, what the message must say) -------------------


def _read_motion(p: Path) -> Any:
    return load_motion(p)


def _read_source(p: Path) -> Any:
    return load_motion_source(p, body_models=str(p.parent / "models"))


M, K, A = S.MOTION_ARRAYS, S.KEYPOINTS, S.AMASS
NPZ_CASES = [
    ("motion missing key", _read_motion, _arrays(M, root_pos=None), ["missing field(s) root_pos"]),
    (
        "motion wrong dtype",
        _read_motion,
        _arrays(M, root_pos=np.array([["a"] * 3] * 3)),
        ["field 'root_pos' has dtype <U1", "(T, 3) positions [m]"],
    ),
    (
        "motion wrong shape",
        _read_motion,
        _arrays(M, root_pos=np.zeros((3, 2))),
        ["field 'root_pos' has shape (3, 2)", "expected (3, 3)"],
    ),
    ("motion NaN", _read_motion, _arrays(M, dof_pos=_nan_at(M["dof_pos"], (1, 0))), ["field 'dof_pos'", "non-finite"]),
    (
        "motion object names",
        _read_motion,
        _arrays(M, joint_names=OBJECT),
        ["field 'joint_names' is an object array", "(n,) joint names"],
    ),
    (
        "motion provenance not an object",
        _read_motion,
        _arrays(M, provenance=np.array("[1, 2]")),
        ["field 'provenance' is JSON list, expected a JSON object"],
    ),
    (
        "keypoints object names",
        _read_source,
        _arrays(K, names=np.array(["pelvis", "head"], dtype=object)),
        ["field 'names' is an object array", "(K,) keypoint names"],
    ),
    ("keypoints missing names", _read_source, _arrays(K, names=None), ["missing field 'names'", "found: positions"]),
    (
        "keypoints wrong dtype",
        _read_source,
        _arrays(K, positions=np.array(["x"])),
        ["field 'positions' has dtype <U1", "(T, K, 3)"],
    ),
    (
        "keypoints wrong shape",
        _read_source,
        _arrays(K, positions=np.zeros((3, 2, 2))),
        ["field 'positions' must have shape (T, K, 3)", "got (3, 2, 2)"],
    ),
    (
        "keypoints NaN",
        _read_source,
        _arrays(K, positions=_nan_at(K["positions"], (2, 1, 0))),
        ["field 'positions': frame 2, keypoint 'head' is not finite"],
    ),
    (
        "keypoints fps not one number",
        _read_source,
        _arrays(K, fps=np.array([30.0, 60.0])),
        ["field 'fps' has shape (2,), expected a single number"],
    ),
    ("keypoints no frames", _read_source, _arrays(K, positions=np.zeros((0, 2, 3))), ["T, K >= 1", "got (0, 2, 3)"]),
    (
        "amass pickled poses",
        _read_source,
        _arrays(A, poses=np.array([np.zeros(72)] * 3 + [None], dtype=object)),
        ["field 'poses' is an object array", "(T, 72 | 156 | 165)"],
    ),
    ("amass missing trans", _read_source, _arrays(A, trans=None), ["missing field 'trans'", "found: poses"]),
    ("amass wrong dtype", _read_source, _arrays(A, poses=np.array("x")), ["field 'poses' has dtype <U1"]),
    (
        "amass NaN",
        _read_source,
        _arrays(A, poses=_nan_at(A["poses"], (1, 5))),
        ["field 'poses': frame 1 is not finite"],
    ),
    (
        "amass two genders",
        _read_source,
        _arrays(A, gender=np.array(["male", "female"])),
        ["field 'gender' holds 2 strings, expected one"],
    ),
    (
        "amass infinite rate",
        _read_source,
        _arrays(A, mocap_framerate=np.array(np.inf)),
        ["field 'mocap_framerate' must be a finite rate > 0"],
    ),
]


@pytest.mark.parametrize("name, read, arrays, says", NPZ_CASES, ids=[c[0] for c in NPZ_CASES])
def test_a_bad_npz_field_is_named(tmp_path, name, read, arrays, says):
    p = S.write_amass(tmp_path, S.npz_bytes(arrays), S.npz_bytes(S.BODY_MODEL))  # the clip, and a body model
    _refused(lambda: read(p), [str(p), *says])


BODY_CASES = [
    ("missing key", _arrays(S.BODY_MODEL, shapedirs=None), ["missing field 'shapedirs'"]),
    ("object array", _arrays(S.BODY_MODEL, J_regressor=OBJECT), ["field 'J_regressor' is an object array"]),
    (
        "wrong shape",
        _arrays(S.BODY_MODEL, kintree_table=np.zeros((2, 3))),
        ["field 'kintree_table' must be (2, 24), got (2, 3)"],
    ),
    (
        "child before parent",
        _arrays(S.BODY_MODEL, kintree_table=np.array([[-1] + [5] * 23, list(range(24))])),
        ["field 'kintree_table': expected at least 22 joints, each after its parent"],
    ),
    (
        "NaN",
        _arrays(S.BODY_MODEL, v_template=_nan_at(S.BODY_MODEL["v_template"], (0, 0))),
        ["field 'v_template' holds non-finite values"],
    ),
]


@pytest.mark.parametrize("name, arrays, says", BODY_CASES, ids=[c[0] for c in BODY_CASES])
def test_a_bad_body_model_is_named(tmp_path, name, arrays, says):
    clip = S.write_amass(tmp_path, S.npz_bytes(S.AMASS), S.npz_bytes(arrays))
    _refused(lambda: _read_source(clip), [str(tmp_path / S.BODY_MODEL_PATH), *says])


@pytest.mark.parametrize("damage", [*FILE_DAMAGE, "folder", "a single .npy"])
@pytest.mark.parametrize("reader", ["motion", "keypoints", "amass", "body model", "reference"])
def test_a_damaged_npz_file_is_named(tmp_path, reader, damage):
    good = {"motion": M, "keypoints": K, "amass": A, "body model": A, "reference": {"target_pos_w": np.ones((5, 3))}}
    data = S.npz_bytes(good[reader])
    if reader == "reference":
        d = S.write_bundle(tmp_path / "bundle")
        target, read = d / "reference.npz", lambda: load_bundle(d)
    else:
        clip = S.write_amass(tmp_path, data, S.npz_bytes(S.BODY_MODEL))
        target = tmp_path / S.BODY_MODEL_PATH if reader == "body model" else clip
        read = (lambda: load_motion(clip)) if reader == "motion" else (lambda: _read_source(clip))
    _damage(target, data, damage)
    _refused(read, [str(target), "is a folder" if damage == "folder" else "not a readable"])


def _damage(target: Path, good: bytes, damage: str) -> None:
    target.unlink()
    if damage == "folder":
        target.mkdir()
    elif damage == "a single .npy":
        np.save(target.open("wb"), np.zeros(3))
    else:
        target.write_bytes(FILE_DAMAGE[damage](good))


@pytest.mark.parametrize(
    "mangle", [(b"), }", b"  }"), (b"'shape'", b"'sh\x8bpe'"), (b"'<f8'", b"'<x8'"), (b"(3, 2, 3)", b"(3,2,3e9)")]
)
def test_a_mangled_array_header_names_the_field(tmp_path, mangle):
    """A member whose .npy header is damaged, with a valid CRC (the fuzzer's find: numpy's header
    tokenizer raised TokenError on an unclosed bracket)."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, K["positions"])
    npy = buf.getvalue().replace(*mangle)
    p = tmp_path / "kp.npz"
    with zipfile.ZipFile(p, "w") as zf:  # the archive is sound; only the member's header is not
        zf.writestr("positions.npy", npy)
        zf.writestr("names.npy", _npy(K["names"]))
        zf.writestr("fps.npy", _npy(K["fps"]))
    _refused(lambda: load_motion_source(p), [str(p), "field 'positions' cannot be read", "damaged or truncated"])


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a)
    return buf.getvalue()


def test_a_pickled_reference_names_the_array(tmp_path):
    d = S.write_bundle(tmp_path / "bundle", {"reference.npz": S.npz_bytes({"target_pos_w": OBJECT})})
    _refused(lambda: load_bundle(d), [str(d / "reference.npz"), "field 'target_pos_w' is an object array"])


# --- YAML readers ---------------------------------------------------------------------------------


def _edit(tree: dict[str, Any], path: str, value: Any) -> bytes:
    """``tree`` with the dotted ``path`` set to ``value`` (``DELETE`` removes it), as YAML."""
    t = copy.deepcopy(tree)
    node = t
    keys = [int(k) if k.isdigit() else k for k in path.split(".")]
    for k in keys[:-1]:
        node = node[k]
    if value is DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return yaml.safe_dump(t).encode()


class _Delete:
    """The key is removed rather than set (its repr is stable: test ids must not hold an address)."""

    def __repr__(self) -> str:
        return "<deleted>"


DELETE = _Delete()
BUNDLE_CASES = [
    ("action.scale", DELETE, "bundle field 'action.scale': missing"),
    ("observation.size", "22", "bundle field 'observation.size': expected an integer >= 1, got '22'"),
    ("observation.size", float("inf"), "bundle field 'observation.size': expected an integer >= 1"),
    ("action.scale", [float("nan")] * 4, "bundle field 'action.scale': contains NaN or Inf"),
    ("control_rate_hz", float("inf"), "bundle field 'control_rate_hz': expected a finite rate > 0 [Hz]"),
    ("action.names", 5, "bundle field 'action.names': expected a list of names"),
    ("observation.terms", {"a": 1}, "bundle field 'observation.terms': expected a non-empty list"),
    ("observation.terms.0", "pos", "bundle field 'observation.terms[0]': expected a mapping"),
    ("robot_spec", [1, 2], "bundle field 'robot_spec': expected a mapping"),
    ("reference.rate_hz", float("inf"), "bundle field 'reference.rate_hz': expected a finite rate > 0 [Hz]"),
    ("reference.loop", "yes", "bundle field 'reference.loop': expected true or false"),
]
ROBOT_CASES = [
    ("control_rate_hz", float("nan"), "config key 'control_rate_hz': expected a number, got NaN"),
    ("actuators.0.effort_limit", "x", "config key 'actuators[0].effort_limit': expected a number"),
    ("name", DELETE, "config key 'name': missing required key"),
    ("actuators.0.range", [1.0, float("nan")], "config key 'actuators[0].range[1]': expected a number, got NaN"),
    ("physical.mass_kg", -1.0, "config key 'physical.mass_kg': must be > 0 [kg], got -1.0"),  # was MuJoCo's traceback
]


@pytest.mark.parametrize("key, value, says", BUNDLE_CASES, ids=[f"{c[0]}={c[1]!r}" for c in BUNDLE_CASES])
def test_a_bad_bundle_yaml_field_is_named(tmp_path, key, value, says):
    d = S.write_bundle(tmp_path / "bundle", {"bundle.yaml": _edit(S.BUNDLE_TREE, key, value)})
    _refused(lambda: load_bundle(d), [str(d / "bundle.yaml"), says])


@pytest.mark.parametrize("key, value, says", ROBOT_CASES, ids=[f"{c[0]}={c[1]!r}" for c in ROBOT_CASES])
def test_a_bad_robot_spec_field_is_named(tmp_path, key, value, says):
    p = tmp_path / "robot.yaml"
    p.write_bytes(_edit(S.ROBOT_TREE, key, value))
    _refused(lambda: load_robot_spec(str(p)), [str(p), says])


YAML_TEXT = {
    "truncated": (yaml.safe_dump(S.ROBOT_TREE)[:37]).encode(),
    "random bytes": np.random.default_rng(2).bytes(300),
    "nested 1200 deep": b"a: " + b"[" * 1200,
    "nested 100 deep": b"a: " + b"[" * 100 + b"]" * 100,
    "alias cycle": b"a: &x [1, *x]",
    "a date that is not": b"a: 2024-13-45",
    "a 5000-digit integer": b"a: " + b"9" * 5000,
    "a 4000-digit hex integer": b"a: 0x" + b"f" * 4000,
    "not a mapping": b"- 1\n- 2\n",
    "a key with a line break": b'"a\\nb": 1\n',
}


@pytest.mark.parametrize("damage", sorted(YAML_TEXT))
def test_a_damaged_yaml_file_is_one_line(tmp_path, damage):
    p = tmp_path / "robot.yaml"
    p.write_bytes(YAML_TEXT[damage])
    _refused(lambda: load_robot_spec(str(p)), [str(p)])
    _refused(lambda: load_yaml(p), [str(p)])


def test_a_yaml_folder_or_empty_file(tmp_path):
    (tmp_path / "robot.yaml").mkdir()
    _refused(lambda: load_yaml(tmp_path / "robot.yaml"), [str(tmp_path / "robot.yaml"), "is a folder"])
    (tmp_path / "e.yaml").write_bytes(b"")
    _refused(lambda: load_robot_spec(str(tmp_path / "e.yaml")), [str(tmp_path / "e.yaml"), "config key 'name'"])
    d = S.write_bundle(tmp_path / "bundle", {"bundle.yaml": b""})
    _refused(lambda: load_bundle(d), [str(d / "bundle.yaml"), "'format_version': missing"])


def test_overrides_and_names_that_are_no_names(tmp_path):
    from simreal.config import parse_overrides

    for item in ["a\nb=1", "\n", "a..b=1", "a b=1"]:
        _refused(lambda item=item: parse_overrides([item]), ["config key"])
    assert parse_overrides(["a.b=[1, 2]", "c=x: y: z", "d=2024-13-45", "e=" + "9" * 5000]) == {
        "a": {"b": [1, 2]},
        "c": "x: y: z",
        "d": "2024-13-45",
        "e": "9" * 5000,
    }  # not YAML: the text itself
    _refused(lambda: load_robot_spec("9" * 5000), ["unknown robot"])  # longer than a file name may be
    _refused(lambda: load_robot_spec("\x1f\n"), ["unknown robot '\\x1f\\n'"])
    _refused(lambda: load_robot_spec("/" + "x" * 5000 + ".yaml"), ["robot spec file not found"])


# --- text mocap -----------------------------------------------------------------------------------

TEXT_CASES = [
    ("clip.bvh", S.BVH.replace(b"OFFSET 10 -40 0", b"OFFSET 10 nan 0"), "line 8: non-finite value in OFFSET"),
    ("clip.bvh", S.BVH.replace(b"Time: 0.01", b"Time: 1e-320"), "line 27: frame time 1e-320 s is not a frame period"),
    (
        "clip.bvh",
        S.BVH.replace(b"OFFSET 10 -40 0", b"OFFSET 10 1e308 0"),
        "an OFFSET or position channel is 1e+308 file units",
    ),
    (
        "clip.bvh",
        b"HIERARCHY\nROOT a\n"
        + b"".join(b"{\nOFFSET 0 0 0\nCHANNELS 1 Xrotation\nJOINT j%d\n" % i for i in range(1000)),
        "joints nested deeper than 200 levels",
    ),
    (
        "kp.csv",
        S.KEYPOINT_CSV.replace(b"0.1,0,0,0.9", b"0.1,0,0,nan"),
        "line 3, column 4 (pelvis_z): 'nan' is not finite",
    ),
    ("kp.csv", S.KEYPOINT_CSV.replace(b"time,", b"time_" + b"x" * 200_000 + b","), "not a readable CSV"),
    ("kp.csv", b"\xff\xfe" + S.KEYPOINT_CSV, "not a text file"),
    ("kp.csv", S.KEYPOINT_CSV.replace(b"0.1,0,0,0.9", b"0.1,0,0,1e300"), "a keypoint coordinate is 1e+300"),
    ("kp.csv", S.KEYPOINT_CSV.replace(b"0.1,", b"1e-9,"), "'time' column steps 1e-09 from row to row"),
]


@pytest.mark.parametrize("name, data, says", TEXT_CASES, ids=[c[2][:40] for c in TEXT_CASES])
def test_a_bad_text_clip_is_named(tmp_path, name, data, says):
    p = tmp_path / name
    p.write_bytes(data)
    _refused(lambda: load_motion_source(p), [str(p), says])


@pytest.mark.parametrize("name", ["clip.bvh", "kp.csv"])
def test_a_text_clip_that_is_a_folder_or_empty(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(b"")
    _refused(lambda: load_motion_source(p), [str(p)])
    p.unlink()
    p.mkdir()
    _refused(lambda: load_motion_source(p), [str(p), "is a folder"])


# --- the CLI --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "file, arrays, says",
    [
        (
            "walk_poses.npz",
            _arrays(A, poses=np.array([np.zeros(72)] * 3 + [None], dtype=object)),
            "field 'poses' is an object array",
        ),
        (
            "keypoints.npz",
            _arrays(K, names=np.array(["pelvis", "head"], dtype=object)),
            "field 'names' is an object array",
        ),
    ],
)
def test_retarget_refuses_pickled_arrays_in_one_line(tmp_path, capsys, file, arrays, says):
    clip = tmp_path / file
    clip.write_bytes(S.npz_bytes(arrays))
    rc = main(["retarget", str(clip), "--robot", "g1", "--out", str(tmp_path / "out.npz")])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and str(clip) in err and says in err, err
    assert not (tmp_path / "out.npz").exists()


def _refused(read: Callable[[], Any], says: list[str]) -> None:
    with pytest.raises(SimrealError) as e:
        read()
    msg = str(e.value)
    assert "\n" not in msg, msg
    for s in says:
        assert s in msg, f"{s!r} not in {msg!r}"


def test_a_motion_clip_for_another_robot_names_the_key_the_file_and_the_robot(tmp_path):
    """g1-tracking given a clip retargeted for H1: once only "unknown joint
    'left_ankle_pitch_joint'; valid joints: ..."; now the key, the file, and whose joints it has."""
    from fixtures.robot_motion import synthetic_motion
    from simreal.errors import DataFileError
    from simreal.motion_file import save_motion
    from simreal.policies.run_config import make_env, resolve
    from simreal.sim.robots import build_model

    h1 = build_model(load_robot_spec("h1"))
    clip = tmp_path / "walk_h1.npz"
    save_motion(clip, synthetic_motion(h1, seconds=0.2))
    with pytest.raises(DataFileError) as e:
        make_env(resolve("g1-tracking", ["backend=native", f"env.motion_file={clip}"]))
    msg = str(e.value)
    assert msg.startswith(
        f"{clip}: env.motion_file: the clip's joints are not robot g1's: it lacks "
        "'left_ankle_pitch_joint' (13 of 29 missing)"
    ), msg
    assert "retargeted for another robot? it has the joints of h1;" in msg
    assert msg.endswith("retarget the source for g1: simreal retarget SOURCE --robot g1") and "\n" not in msg


def test_train_refuses_another_robots_clip_before_the_run_directory(tmp_path, capsys):
    """``simreal train g1-tracking`` with an H1 clip: the one line, and no ``run directory:`` line
    printed first (the env used to refuse it after the run directory was made)."""
    from fixtures.robot_motion import synthetic_motion
    from simreal.cli import main
    from simreal.motion_file import save_motion
    from simreal.sim.robots import build_model

    clip = tmp_path / "walk_h1.npz"
    save_motion(clip, synthetic_motion(build_model(load_robot_spec("h1")), seconds=0.2))
    runs = tmp_path / "runs"
    assert main(["train", "g1-tracking", f"env.motion_file={clip}", f"runs_root={runs}"]) == 2
    out, err = capsys.readouterr()
    assert "run directory" not in out + err and not runs.exists()
    assert "env.motion_file" in err and "it has the joints of h1" in err and "Traceback" not in err
