"""Fuzzing every file reader: damaged or random input is refused in one line, never a library traceback.

Each property starts from a valid file (a bundle, a robot spec, a task config, a motion file,
a reference table, a BVH clip, AMASS and keypoint npz files, ``key=value`` overrides) and
damages it: bit flips, truncation, spliced bytes, random bytes, and, one level up, a YAML
value or an npz array replaced by something of the wrong type, shape or dtype (an object
array, text, NaN, a huge integer) or deleted. The reader must then either succeed or raise
one of simreal's own errors, whose message is one line naming the file; anything else fails
the test with the input that caused it.

Each property runs twice: a few derandomised examples in the default run (CI), and many
random ones under ``-m slow``::

    pytest tests/test_fuzz_readers.py -m slow
"""

from __future__ import annotations

import copy
import datetime
import io
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fixtures import reader_seeds as S
from simreal.bundle import OnnxPolicy, load_bundle
from simreal.config import parse_overrides
from simreal.errors import SimrealError
from simreal.motion_file import load_motion
from simreal.retarget.loaders import load_motion_source
from simreal.robot_spec import load_robot_spec
from simreal.yaml_io import load_yaml

_COMMON = dict(
    deadline=datetime.timedelta(seconds=10),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FAST = settings(max_examples=30, derandomize=True, **_COMMON)
SLOW = settings(max_examples=600, **_COMMON)


def fuzz(*strategies: st.SearchStrategy) -> Callable[[Callable[..., None]], tuple[Callable, Callable]]:
    """The property as two tests: a derandomised few for CI, and many under the slow marker."""

    def wrap(check: Callable[..., None]) -> tuple[Callable, Callable]:
        return FAST(given(*strategies)(check)), pytest.mark.slow(SLOW(given(*strategies)(check)))

    return wrap


def refused_cleanly(read: Callable[[], Any], must_name: str | None) -> None:
    """``read()`` returns, or raises a SimrealError of one line that names ``must_name``.

    Any other exception propagates, and hypothesis reports it with the input.
    """
    try:
        read()
    except SimrealError as e:
        msg = str(e)
        assert "\n" not in msg, f"not one line: {msg!r}"
        assert must_name is None or must_name in msg, f"does not name {must_name}: {msg}"


# --- mutations ------------------------------------------------------------------------------


def _flip(seed: bytes, bits: list[int]) -> bytes:
    b = bytearray(seed)
    for k in bits:
        b[k // 8] ^= 1 << (k % 8)
    return bytes(b)


def byte_mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    """Bit flips, a truncation, a splice of random bytes, or random bytes altogether."""
    n = len(seed)
    return st.one_of(
        st.lists(st.integers(0, 8 * n - 1), min_size=1, max_size=8).map(lambda bits: _flip(seed, bits)),
        st.integers(0, n - 1).map(lambda k: seed[:k]),
        st.tuples(st.integers(0, n), st.integers(0, 64), st.binary(max_size=16)).map(
            lambda t: seed[: t[0]] + t[2] + seed[t[0] + t[1] :]
        ),
        st.binary(max_size=512),
    )


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-4, 64),
    st.integers(),
    st.floats(),
    st.text(max_size=10),
    st.sampled_from(["", "/", "..", "policy.onnx", "obs", "m1", "1e400"]),
)
VALUES = st.recursive(
    SCALARS, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4), max_leaves=8
)


def _paths(node: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield from _paths(v, prefix + (k,))


@st.composite
def tree_mutations(draw: st.DrawFn, tree: dict[str, Any]) -> Any:
    """``tree`` with 1-3 nodes replaced by random YAML values, deleted, or given a new key."""
    t = copy.deepcopy(tree)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(t))))
        if not path:
            return draw(VALUES)
        parent = t
        for k in path[:-1]:
            parent = parent[k]
        op = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if op == "replace":
            parent[path[-1]] = draw(VALUES)
        elif op == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(VALUES)
    return t


def yaml_mutations(tree: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """A YAML file's tree mutated and dumped, or its text damaged byte by byte."""
    text = yaml.safe_dump(tree, sort_keys=False).encode()
    dumped = tree_mutations(tree).map(lambda t: yaml.safe_dump(t, sort_keys=False, allow_unicode=True).encode())
    return st.one_of(dumped, byte_mutations(text))


BAD_ARRAYS = st.one_of(
    st.just(np.array([{"evil": 1}], dtype=object)),  # pickled objects
    st.just(np.array(["a", "b"])),
    st.just(np.array(b"\xff\xfe")),
    st.just(np.array(3 + 1j)),
    hnp.arrays(
        st.sampled_from([np.float64, np.float32, np.int64, np.uint8, np.bool_, np.complex64, np.str_]),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
)


@st.composite
def npz_mutations(draw: st.DrawFn, arrays: dict[str, np.ndarray]) -> bytes:
    """An npz's arrays replaced, deleted or added (written compressed or not), or its bytes damaged."""
    if draw(st.booleans()):
        return draw(byte_mutations(S.npz_bytes(arrays)))
    a = dict(arrays)
    for _ in range(draw(st.integers(1, 2))):
        key = draw(st.sampled_from(sorted(a) + ["extra"]))
        if key in a and draw(st.integers(0, 3)) == 0:
            del a[key]
        else:
            a[key] = draw(BAD_ARRAYS)
    buf = io.BytesIO()
    (np.savez_compressed if draw(st.booleans()) else np.savez)(buf, **a)
    return buf.getvalue()


# --- valid seeds read cleanly --------------------------------------------------------------


def test_the_seeds_are_valid():
    """Every property damages a file that reads cleanly as it is."""
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        b = S.write_bundle(d / "bundle")
        assert load_bundle(b).reference is not None and OnnxPolicy(load_bundle(b))
        (d / "r.yaml").write_bytes(yaml.safe_dump(S.ROBOT_TREE).encode())
        assert load_robot_spec(str(d / "r.yaml")).name == "crazyflie2"
        (d / "m.npz").write_bytes(S.npz_bytes(S.MOTION_ARRAYS))
        assert load_motion(d / "m.npz").num_frames == 3
        (d / "c.bvh").write_bytes(S.BVH)
        (d / "k.csv").write_bytes(S.KEYPOINT_CSV)
        (d / "k.npz").write_bytes(S.npz_bytes(S.KEYPOINTS))
        assert load_motion_source(d / "c.bvh").positions.shape == (3, 5, 3)
        assert load_motion_source(d / "k.csv").fps == 10.0
        assert load_motion_source(d / "k.npz").positions.shape == (3, 2, 3)
        clip = S.write_amass(d, S.npz_bytes(S.AMASS), S.npz_bytes(S.BODY_MODEL))
        assert load_motion_source(clip, body_models=str(d / "models")).positions.shape == (3, 22, 3)


# --- the properties ---------------------------------------------------------------------------


def file_check(name: str, read: Callable[[Path], Any]) -> Callable[[bytes], None]:
    """A property: ``read`` of a file ``name`` holding the drawn bytes is refused cleanly, naming it."""

    def check(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / name
            p.write_bytes(data)
            refused_cleanly(lambda: read(p), str(p))

    return check


def bundle_check(member: str, read: Callable[[Path], Any]) -> Callable[[bytes], None]:
    """A property: ``read`` of the seed bundle with ``member`` replaced by the drawn bytes."""

    def check(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            d = S.write_bundle(Path(tmp) / "bundle", {member: data})
            refused_cleanly(lambda: read(d), str(d))

    return check


def _load_and_open(d: Path) -> None:
    OnnxPolicy(load_bundle(d))


def _task_config(p: Path) -> None:
    from simreal.policies.run_config import from_mapping

    tree = load_yaml(p)
    try:
        from_mapping(tree, str(p))
    except SimrealError as e:  # a bad key names the file; an unknown task or robot name is named instead
        assert "\n" not in str(e), str(e)


BVH_TOKENS = [
    "nan",
    "inf",
    "-inf",
    "1e308",
    "1e-320",
    "0",
    "-1",
    "3",
    "99999999999999999999",
    "{",
    "}",
    "JOINT",
    "End",
    "Site",
    "CHANNELS",
    "ROOT",
    "MOTION",
    "Frames:",
    "Frame",
    "Time:",
    "Xrotation",
    "Zposition",
    "OFFSET",
    "HIERARCHY",
    "\x00",
    "\u00e9",
    "\n",
    "",
]


@st.composite
def bvh_token_edits(draw: st.DrawFn) -> bytes:
    """The BVH clip with a few whitespace-separated tokens replaced by BVH keywords and odd numbers."""
    toks = S.BVH.decode().split(" ")
    for _ in range(draw(st.integers(1, 4))):
        toks[draw(st.integers(0, len(toks) - 1))] = draw(st.sampled_from(BVH_TOKENS))
    return " ".join(toks).encode()


def check_amass(files: tuple[bytes, bytes]) -> None:
    clip, model = files
    with tempfile.TemporaryDirectory() as tmp:
        p = S.write_amass(Path(tmp), clip, model)
        refused_cleanly(lambda: load_motion_source(p, body_models=str(Path(tmp) / "models")), tmp)


def check_overrides(items: list[str]) -> None:
    refused_cleanly(lambda: parse_overrides(items), None)


OVERRIDE_KEYS = st.sampled_from(
    [
        "seed",
        "robot",
        "backend",
        "train.num_envs",
        "train.discounting",
        "train",
        "env.episode_length_s",
        "env.action_delay_steps",
        "env",
        "eval.episodes",
        "algorithms.ppo",
        "train.policy_hidden",
        "x.y",
        "env.reward_scales.alive",
    ]
)
OVERRIDE_VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            ".nan",
            ".inf",
            "-1",
            "0",
            "1e400",
            "[1, 2]",
            "{a: 1}",
            "null",
            "true",
            "2024-13-45",
            "!!int x",
            "&a [*a]",
            "9" * 5000,
            "[" * 200,
            "'x",
            "a: b: c",
        ]
    ),
)


def check_overrides_resolve(pairs: list[tuple[str, str]]) -> None:
    from simreal.policies.run_config import resolve

    items = [f"{k}={v}" for k, v in pairs]
    refused_cleanly(lambda: resolve("quadrotor-hover", items), None)


test_bundle_yaml, test_bundle_yaml_slow = fuzz(yaml_mutations(S.BUNDLE_TREE))(
    bundle_check("bundle.yaml", _load_and_open)
)
test_policy_onnx, test_policy_onnx_slow = fuzz(byte_mutations(S.BUNDLE_FILES["policy.onnx"]))(
    bundle_check("policy.onnx", _load_and_open)
)
test_reference_npz, test_reference_npz_slow = fuzz(npz_mutations({"target_pos_w": np.ones((5, 3))}))(
    bundle_check("reference.npz", load_bundle)
)
test_robot_spec, test_robot_spec_slow = fuzz(yaml_mutations(S.ROBOT_TREE))(
    file_check("robot.yaml", lambda p: load_robot_spec(str(p)))
)
test_task_config, test_task_config_slow = fuzz(yaml_mutations(S.TASK_TREE))(file_check("task.yaml", _task_config))
test_motion_file, test_motion_file_slow = fuzz(npz_mutations(S.MOTION_ARRAYS))(file_check("motion.npz", load_motion))
test_bvh, test_bvh_slow = fuzz(st.one_of(byte_mutations(S.BVH), bvh_token_edits()))(
    file_check("clip.bvh", load_motion_source)
)
test_keypoint_csv, test_keypoint_csv_slow = fuzz(byte_mutations(S.KEYPOINT_CSV))(
    file_check("kp.csv", load_motion_source)
)
test_keypoint_npz, test_keypoint_npz_slow = fuzz(npz_mutations(S.KEYPOINTS))(file_check("kp.npz", load_motion_source))
test_amass, test_amass_slow = fuzz(
    st.one_of(
        st.tuples(npz_mutations(S.AMASS), st.just(S.npz_bytes(S.BODY_MODEL))),
        st.tuples(st.just(S.npz_bytes(S.AMASS)), npz_mutations(S.BODY_MODEL)),
    )
)(check_amass)
test_overrides, test_overrides_slow = fuzz(st.lists(st.text(max_size=24), max_size=4))(check_overrides)
test_overrides_resolve, test_overrides_resolve_slow = fuzz(
    st.lists(st.tuples(OVERRIDE_KEYS, OVERRIDE_VALUES), min_size=1, max_size=3)
)(check_overrides_resolve)
