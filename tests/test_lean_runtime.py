"""The robot computer's lean runtime: the CLI path to ``simreal deploy`` imports no training stack.

Each CLI test runs ``simreal.cli.main`` in a subprocess whose ``sitecustomize`` (on PYTHONPATH)
installs a meta-path finder that makes jax, jaxlib, brax, mujoco (and mujoco.mjx), torch, flax
and optax unimportable, as on a robot computer with ``pip install --no-deps simreal`` plus the
README's runtime packages, and logs every attempt to import them: a test fails on a traceback
and also on an attempt that code caught and survived. The install commands in README.md and
docs/deploy.md are checked against pyproject.toml and ``simreal.dependencies``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import bundles as T
from simreal.dependencies import PROVIDERS, ROBOT_RUNTIME, install_hint

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("jax", "jaxlib", "brax", "mujoco", "torch", "flax", "optax")

_SITECUSTOMIZE = """
import importlib.abc, os, sys

BLOCKED = set(os.environ["SIMREAL_TEST_BLOCK"].split(","))
LOG = os.environ["SIMREAL_TEST_BLOCK_LOG"]


class _Unimportable(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        parts = name.split(".")
        if any(".".join(parts[:n]) in BLOCKED for n in range(1, len(parts) + 1)):
            with open(LOG, "a") as f:
                f.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None


sys.meta_path.insert(0, _Unimportable())
"""


Run = tuple[subprocess.CompletedProcess, list[str]]


def _python(tmp_path: Path, args: list[str], block: tuple[str, ...] = HEAVY, unset: tuple[str, ...] = ()) -> Run:
    """Run ``python ARGS`` with ``block`` unimportable and the ``unset`` environment variables
    unset; returns the process and the blocked import attempts."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    log = tmp_path / "blocked.log"
    log.write_text("")
    env = {
        **{k: v for k, v in os.environ.items() if k not in unset},
        "SIMREAL_TEST_BLOCK": ",".join(block),
        "SIMREAL_TEST_BLOCK_LOG": str(log),
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run([sys.executable, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return proc, log.read_text().split()


def _cli(tmp_path: Path, args: list[str], block: tuple[str, ...] = HEAVY, unset: tuple[str, ...] = ()) -> Run:
    """``simreal ARGS`` through the CLI's entry point, as :func:`_python`."""
    return _python(
        tmp_path, ["-c", "import sys; from simreal.cli import main; sys.exit(main(sys.argv[1:]))", *args], block, unset
    )


def test_help_imports_nothing_heavy(tmp_path):
    proc, attempts = _cli(tmp_path, ["--help"])
    assert proc.returncode == 0, proc.stderr
    assert all(v in proc.stdout for v in ("train", "retarget", "deploy")), proc.stdout
    assert attempts == []
    proc, attempts = _cli(tmp_path, ["deploy", "--help"])
    assert proc.returncode == 0 and "ros2" in proc.stdout and "run" in proc.stdout, proc.stderr
    assert attempts == []


def test_deploy_run_ticks_without_the_training_stack(tmp_path):
    bundle = T.make_pd_hover_bundle(tmp_path / "bundle")  # built here, where the full install is
    domain = T.random_domain_id()
    proc, attempts = _cli(
        tmp_path,
        ["deploy", "run", str(bundle), "--duration", "1", "--json", "--domain-id", str(domain), "--no-realtime"],
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["domain_id"] == domain and report["ticks"] > 50, report  # 100 Hz for 1 s
    assert attempts == []


def test_deploy_ros2_writes_the_package_without_the_training_stack(tmp_path):
    bundle = T.make_pd_hover_bundle(tmp_path / "bundle")
    proc, attempts = _cli(
        tmp_path, ["deploy", "ros2", str(bundle), "--out", str(tmp_path / "src"), "--name", "cf_hover"]
    )
    assert proc.returncode == 0, proc.stderr
    pkg = tmp_path / "src" / "cf_hover"
    for rel in ("package.xml", "setup.py", "cf_hover/policy_node.py", "bundle/policy.onnx", "config/cf_hover.yaml"):
        assert (pkg / rel).is_file(), rel
    assert attempts == []


def test_deploy_runtime_modules_import_nothing_heavy(tmp_path):
    modules = (
        "simreal.deploy.runner",
        "simreal.bundle",
        "simreal.deploy.transport_dds",
        "simreal.deploy.ros2_package",
        "simreal.deploy.config",
        "simreal.deploy.bag",
    )
    proc, attempts = _python(tmp_path, ["-c", f"import importlib; [importlib.import_module(m) for m in {modules!r}]"])
    assert proc.returncode == 0, proc.stderr
    assert attempts == []


def test_sim_package_imports_nothing_yet_keeps_the_mjx_warp_notice_off_stdout():
    code = "import sys, simreal.sim; assert 'mujoco' not in sys.modules; import brax.envs, mujoco.mjx"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # MJX prints "Failed to import warp" where NVIDIA Warp is absent


@pytest.mark.parametrize("verb", ["train", "deploy sim", "play"])
def test_full_install_verbs_on_the_lean_runtime_are_one_line_exit_2(tmp_path, verb):
    """``play`` probed OpenGL first, and advised installing libegl1 where MuJoCo was missing."""
    args = {
        "train": ["train", "quadrotor-hover"],
        "play": ["play", str(tmp_path / "run")],
        "deploy sim": [
            "deploy",
            "sim",
            str(T.make_pd_hover_bundle(tmp_path / "bundle")),
            "--duration",
            "1",
            "--no-realtime",
        ],
    }[verb]
    proc, _ = _cli(tmp_path, args, unset=("MUJOCO_GL",))  # as on a robot computer: no GL chosen beforehand
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert re.fullmatch(
        rf"simreal {verb.split()[0]}: error: needs (jax|mujoco), part of simreal's full install "
        r"\(the robot runtime leaves it out\): pip install simreal",
        lines[0],
    ), lines


def test_retarget_without_mink_is_one_line_exit_2(tmp_path):
    from fixtures import synth_motion

    clip = tmp_path / "walk.bvh"
    synth_motion.write_bvh(clip, synth_motion.walking(duration_s=0.4))
    proc, attempts = _cli(
        tmp_path,
        ["retarget", str(clip), "--robot", "g1", "--out", str(tmp_path / "w.npz"), "--method", "ik"],
        block=("mink",),
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "simreal retarget: error: needs mink, part of simreal's full install (the robot runtime "
        "leaves it out): pip install simreal"
    ], proc.stderr
    assert attempts and not (tmp_path / "w.npz").exists()


# -- install hints and documented installs ------------------------------------------------------------
def test_install_hints_name_the_pip_command():
    assert str(install_hint("torch.nn")) == "needs torch, from the [torch] extra: pip install 'simreal[torch]'"
    assert str(install_hint("mujoco.mjx._src")).startswith("needs mujoco.mjx, part of simreal's full install")
    assert str(install_hint("cyclonedds.domain")) == "needs cyclonedds: pip install cyclonedds"
    # a driver's package on the robot runtime: the extra itself would pull the training stack back in
    assert str(install_hint("serial")) == (
        "needs serial, from the [so100] extra: pip install 'simreal[so100]' "
        "(on the robot runtime: pip install pyserial)"
    )
    assert install_hint("not_a_simreal_dependency") is None


def test_install_hints_name_the_checkout_where_simreal_is_not_installed(monkeypatch):
    """simreal is not on PyPI: ``pip install 'simreal[torch]'`` works only where simreal is
    installed (pip keeps it and adds the extra); run from a checkout on PYTHONPATH, the hint
    named a package no registry has."""
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    assert str(install_hint("torch")) == f"needs torch, from the [torch] extra: pip install -e '{ROOT}[torch]'"
    assert str(install_hint("jax")).endswith(f"leaves it out): pip install -e {ROOT}")


@pytest.mark.parametrize("argv", [["train-bc", "data/choice", "--policy", "vla"], ["finetune-vla", "runs/x"]])
def test_a_vla_verb_without_the_vlm_extra_is_one_line_before_anything_loads(tmp_path, capsys, monkeypatch, argv):
    """train-bc --policy vla without transformers failed after 90 s of loading the dataset; now at
    once, naming the extra (here the dataset does not even exist: it is never read)."""
    import importlib.util

    from simreal import dependencies
    from simreal.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        dependencies.importlib.util,
        "find_spec",
        lambda name, *a: None if name.split(".")[0] == "transformers" else real(name, *a),
    )
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"simreal {argv[0]}: error: needs transformers, from the [vlm] extra: pip install 'simreal[vlm]'"], (
        err
    )


def _dist(req: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", req).group(0)).lower()


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_providers_match_pyproject():
    """Every core dependency and every package of the torch, data, vlm, so100, teleop, px4, crazyflie and franka extras
    has an install hint."""
    project = _pyproject()
    want = {None: {_dist(r) for r in project["dependencies"]}}
    for extra in ("torch", "data", "vlm", "so100", "teleop", "px4", "crazyflie", "franka"):
        want[extra] = {_dist(r) for r in project["optional-dependencies"][extra]}
    have: dict[str | None, set[str]] = {}
    for dist, extra in PROVIDERS.values():
        have.setdefault(extra, set()).add(_dist(dist))
    assert have == want


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md"])
def test_documented_robot_install_is_the_robot_runtime(doc):
    """The doc's robot install: simreal without dependencies, then exactly ROBOT_RUNTIME with
    pyproject's version bounds."""
    text = (ROOT / doc).read_text()
    # simreal is not on PyPI: its robot install is a wheel built in a checkout, or the checkout
    no_deps = [ln for ln in text.splitlines() if ln.lstrip().startswith("pip install --no-deps")]
    assert no_deps and all(re.match(r"\s*pip install --no-deps (\S+\.whl|\.|\S*/\S*)(\s|$)", ln) for ln in no_deps), (
        no_deps
    )
    assert "pip wheel --no-deps" in text
    lines = [
        ln for ln in text.splitlines() if ln.startswith("pip install ") and "--no-deps" not in ln and '"numpy' in ln
    ]
    assert len(lines) == 1, lines
    documented = {_dist(r): r for r in re.findall(r'"([^"]+)"', lines[0])}
    bounds = {_dist(r): r.replace(" ", "") for r in _pyproject()["dependencies"]}
    assert sorted(documented) == sorted(_dist(d) for d in ROBOT_RUNTIME)
    assert {d: bounds[d] for d in documented} == documented
    assert not set(documented) & {_dist(h) for h in HEAVY}
