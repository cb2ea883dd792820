"""`simreal deploy ros2 | run | sim` open the bundle's ONNX graph and check it against bundle.yaml first.

A policy.onnx of random bytes, a truncated one, or one whose observation or action width
differs from bundle.yaml's is refused before anything is written or started: exit code 2 and
one line on stderr naming policy.onnx and the shapes the bundle expects.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from fixtures import bundles as T
from simreal.bundle import OnnxPolicy, load_bundle
from simreal.cli import main
from simreal.errors import BundleError
from simreal.robot_spec import load_robot_spec


def _linear(obs_size: int, act_size: int, declared: tuple = ("batch", 4), dtype: int = TensorProto.FLOAT) -> bytes:
    """obs (batch, obs_size) @ W -> action declared as ``declared`` (it may not be what the graph computes)."""
    W = numpy_helper.from_array(
        np.zeros((obs_size, act_size), np.float32 if dtype == TensorProto.FLOAT else np.float64), "W"
    )
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["obs", "W"], ["action"])],
        "linear",
        [helper.make_tensor_value_info("obs", dtype, ["batch", obs_size])],
        [helper.make_tensor_value_info("action", dtype, list(declared))],
        [W],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", T.OPSET)])
    model.ir_version = 9
    return model.SerializeToString()


GOOD_ONNX = T.pd_hover_onnx(load_robot_spec("crazyflie2")).SerializeToString()
DAMAGED = {
    "random bytes": np.random.default_rng(0).bytes(2000),
    "truncated": GOOD_ONNX[: len(GOOD_ONNX) // 2],
    "empty": b"",
    "obs width 21": T.mlp_onnx(21, 4, hidden=(8,)).SerializeToString(),
    "action width 3": T.mlp_onnx(22, 3, hidden=(8,)).SerializeToString(),
    "symbolic width, 3 actions": _linear(22, 3, declared=("batch", "m")),
    "float64 input": _linear(22, 4, dtype=TensorProto.DOUBLE),
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return T.make_pd_hover_bundle(tmp_path_factory.mktemp("b") / "bundle")


@pytest.mark.parametrize("damage", sorted(DAMAGED))
@pytest.mark.parametrize("verb", ["ros2", "run", "sim"])
def test_a_bad_policy_onnx_is_refused_before_anything_runs(bundle, tmp_path, capsys, damage, verb):
    (bundle / "policy.onnx").write_bytes(DAMAGED[damage])
    out = tmp_path / "ws"
    args = {"ros2": ["--out", str(out)], "run": ["--duration", "0.1"], "sim": ["--duration", "0.1"]}[verb]
    try:
        rc = main(["deploy", verb, str(bundle), *args])
    finally:
        (bundle / "policy.onnx").write_bytes(GOOD_ONNX)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1, err
    assert str(bundle / "policy.onnx") in err and "(N, 22)" in err, err
    assert not out.exists()  # deploy ros2 wrote nothing


def test_the_checked_graph_still_deploys(bundle, tmp_path, capsys):
    """The control: the intact bundle passes the same check and writes its package."""
    assert main(["deploy", "ros2", str(bundle), "--out", str(tmp_path / "ws"), "--name", "cf_hover"]) == 0
    assert (tmp_path / "ws" / "cf_hover" / "bundle" / "policy.onnx").is_file()
    policy = OnnxPolicy(load_bundle(bundle))
    assert policy(np.zeros(22)).shape == (4,)


@pytest.mark.parametrize(
    "damage, field",
    [
        ("obs width 21", "observation.size"),
        ("action width 3", "action.size"),
        ("symbolic width, 3 actions", "action.size"),
        ("random bytes", "onnx.file"),
    ],
)
def test_the_error_names_the_field(bundle, damage, field):
    (bundle / "policy.onnx").write_bytes(DAMAGED[damage])
    try:
        with pytest.raises(BundleError) as e:
            OnnxPolicy(load_bundle(bundle))
    finally:
        (bundle / "policy.onnx").write_bytes(GOOD_ONNX)
    assert e.value.field == field


def test_an_output_path_under_a_file_is_one_line(bundle, tmp_path, capsys):
    """`--out` under a file: the operating system's refusal is one line naming the path, exit 2
    (it was a NotADirectoryError traceback; the same handler serves every verb's output path)."""
    (tmp_path / "a_file").write_text("")
    assert main(["deploy", "ros2", str(bundle), "--out", str(tmp_path / "a_file" / "ws")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("simreal deploy: error: ") and str(tmp_path / "a_file") in err, err
    assert "(a part of the path is a file, not a folder)" in err, err


def test_a_system_error_about_no_path_says_what_the_system_said():
    from simreal.cli import path_problem

    assert (
        path_problem(PermissionError(1, "Operation not permitted"))
        == "PermissionError: [Errno 1] Operation not permitted"
    )
