"""Time-varying references in the bundle (simreal/reference.py) and their playback by the runner."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("cyclonedds")

from fixtures import bundles as T  # noqa: E402
from simreal.bundle import load_bundle  # noqa: E402
from simreal.errors import BundleError, DataFileError  # noqa: E402
from simreal.reference import Reference, write_reference  # noqa: E402
from simreal.yaml_io import dump_yaml, load_yaml  # noqa: E402


def _table(n: int = 5) -> Reference:
    return Reference(10.0, {"target_pos_w": np.stack([np.arange(n), np.zeros(n), np.ones(n)], axis=1)})


def test_rows_are_nearest_samples_and_the_last_is_held_or_wrapped():
    held, looped = _table(), Reference(10.0, _table().values, loop=True)
    assert [held.row(t) for t in (-1.0, 0.0, 0.04, 0.06, 0.3, 7.0)] == [0, 0, 0, 1, 3, 4]
    assert [looped.row(t) for t in (0.0, 0.4, 0.5, 0.66, 1.0)] == [0, 4, 0, 2, 0]
    assert held.duration_s == pytest.approx(0.5)
    np.testing.assert_array_equal(held.at(0.21)["target_pos_w"], [2.0, 0.0, 1.0])


@pytest.fixture(scope="module")
def pd_bundle(tmp_path_factory):
    return T.make_pd_hover_bundle(tmp_path_factory.mktemp("pd"))


def _with_reference(src, dst, values, entry=None):
    shutil.copytree(src, dst)
    np.savez(dst / "reference.npz", **values)
    raw = load_yaml(dst / "bundle.yaml")
    raw["reference"] = entry or {"file": "reference.npz", "rate_hz": 100.0, "loop": False}
    dump_yaml(dst / "bundle.yaml", raw)
    return dst


@pytest.mark.parametrize(
    "values, entry, field",
    [
        ({"joint_pos": np.zeros((4, 2))}, None, "reference.joint_pos"),  # a sensor, not an input
        ({"target_pos_w": np.zeros((4, 3)), "command": np.zeros((5, 3))}, None, "reference.command"),
        ({"target_pos_w": np.full((4, 3), np.nan)}, None, "reference.target_pos_w"),
        ({"target_pos_w": np.zeros(4)}, None, "reference.target_pos_w"),  # not (rows, width)
        ({"target_pos_w": np.zeros((4, 3))}, {"file": "reference.npz", "rate_hz": 0.0}, "reference.rate_hz"),
        ({"target_pos_w": np.zeros((4, 3))}, {"file": "missing.npz", "rate_hz": 100.0}, "reference.file"),
        ({"target_pos_w": np.zeros((4, 3))}, {"rate_hz": 100.0}, "reference"),
    ],
)
def test_a_bad_reference_is_refused_naming_its_field(pd_bundle, tmp_path, values, entry, field):
    d = _with_reference(pd_bundle, tmp_path / "b", values, entry)
    with pytest.raises(BundleError) as e:
        load_bundle(d)
    assert e.value.field == field and "bundle.yaml" in str(e.value)


@pytest.mark.parametrize("section", ["refrence", "latncy"])
def test_a_misspelled_section_is_refused_not_ignored(pd_bundle, tmp_path, section):
    """A figure-8 bundle whose ``reference`` was misspelled loaded as a hover at a fixed point, and
    its rehearsal and benchmark passed it: an unknown section is now one error naming it."""
    d = _with_reference(pd_bundle, tmp_path / "b", {"target_pos_w": np.zeros((4, 3))})
    raw = load_yaml(d / "bundle.yaml")
    raw[section] = raw.pop(section.replace("refrence", "reference").replace("latncy", "latency"))
    dump_yaml(d / "bundle.yaml", raw)
    with pytest.raises(BundleError) as e:
        load_bundle(d)
    assert e.value.field == section and "unknown section (did you mean" in str(e.value)


def test_a_pickled_reference_is_not_unpickled(pd_bundle, tmp_path):
    d = _with_reference(pd_bundle, tmp_path / "b", {"target_pos_w": np.zeros((4, 3))})
    np.savez(d / "reference.npz", target_pos_w=np.array([{"evil": 1}], dtype=object))
    with pytest.raises((BundleError, DataFileError)):
        load_bundle(d)


def test_the_runner_plays_the_reference_from_its_first_policy_run(pd_bundle, tmp_path):
    """The PD hover bundle observes target - position first: with a reference for the target,
    the observation follows the table row of (tick time - first policy run)."""
    from simreal.deploy import ros_types as R
    from simreal.deploy.adapters import encode_state
    from simreal.deploy.runner import PolicyRunner

    rows = np.stack([np.linspace(0.0, 0.99, 100), np.zeros(100), np.ones(100)], axis=1)
    d = _with_reference(pd_bundle, tmp_path / "b", {"target_pos_w": rows})
    write_reference(d / "reference.npz", Reference(100.0, {"target_pos_w": rows}))  # the atomic writer
    bundle = load_bundle(d)
    seen: list[np.ndarray] = []
    runner = PolicyRunner(
        bundle,
        msg_class=R.msg_class,
        overrides={"start": {"ramp_s": 0.0}},
        policy=lambda obs: (seen.append(np.array(obs)), np.zeros(4))[1],
    )
    s = {
        "pos_w": np.array([0.0, 0.0, 1.0]),
        "quat_wxyz": np.array([1.0, 0, 0, 0]),
        "lin_vel_w": np.zeros(3),
        "ang_vel_b": np.zeros(3),
    }
    odom = encode_state("nav_msgs/msg/Odometry", s, 0, R.msg_class)
    t0 = 50.0
    for t in (t0, t0 + 0.01, t0 + 0.052, t0 + 0.5, t0 + 3.0):
        runner.on_state("odometry", odom, t)
        runner.tick(t)
    np.testing.assert_allclose([o[0] for o in seen], [0.0, 0.01, 0.05, 0.5, 0.99])  # last row held


def test_the_generated_package_carries_the_reference(pd_bundle, tmp_path):
    from simreal.cli import main

    d = _with_reference(pd_bundle, tmp_path / "b", {"target_pos_w": np.zeros((3, 3))})
    assert main(["deploy", "ros2", str(d), "--out", str(tmp_path / "ws")]) == 0
    pkg = next((tmp_path / "ws").iterdir())
    assert load_bundle(pkg / "bundle").reference.num_rows == 3
