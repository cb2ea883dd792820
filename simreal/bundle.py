"""The policy bundle: ``policy.onnx`` plus ``bundle.yaml``, everything deploy needs.

``bundle.yaml`` (format_version 1)::

    format_version: 1
    robot: crazyflie2                 # robot spec name
    robot_spec: {...}                 # the full robot spec, so deploy needs no configs/
    task: quadrotor-hover
    control_rate_hz: 100.0
    observation:
      size: 22
      terms: [{name: pos_error_w, size: 3}, {name: rot_mat_wb, size: 9}, ...]
      normalization: {mean: [...], std: [...], baked_into_onnx: true}
    action:
      mode: rotor_thrust              # rotor_thrust | ctbr | joint_position | ...
      size: 4
      names: [m1, m2, m3, m4]         # motor or joint names, driver order
      units: [N, N, N, N]
      scale: [...]                    # physical = offset + scale * a, a in [-1, 1]
      offset: [...]
      low: [...]                      # physical limits; deploy clamps to them
      high: [...]
    latency: {action_delay_steps: 0, obs_history: 1}
    task_params: {target_pos_w: [0.0, 0.0, 1.0]}   # the task's fixed inputs on the robot
    task_config: {...}                # the env config it was trained with (the rehearsal rebuilds it)
    task_topics: {goal: {topic: /simreal/goal_pose, type: geometry_msgs/msg/PoseStamped, role: target}}
    reference: {file: reference.npz, rate_hz: 100.0, loop: true}   # optional: a time-varying
                                      # task input played back from the hand-over (simreal/reference.py)
    onnx: {file: policy.onnx, input: obs, output: action, opset: 17}
    provenance: {run_dir: ..., config_hash: ..., git_commit: ..., created_utc: ..., simreal_version: ...}

The ONNX graph maps a raw observation ``obs`` (1, size) float32 to the deterministic
normalised action ``action`` (1, action.size) in [-1, 1]; observation normalisation is
baked into the graph. :func:`load_bundle` validates all of it and raises
:class:`BundleError` naming the field. Imports: numpy, yaml, onnxruntime only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simreal.errors import BundleError
from simreal.reference import Reference, read_reference
from simreal.yaml_io import dump_yaml, load_yaml

FORMAT_VERSION = 1
BUNDLE_YAML = "bundle.yaml"


@dataclasses.dataclass(frozen=True)
class ObsTerm:
    """One named slice of the observation vector."""

    name: str
    size: int


@dataclasses.dataclass(frozen=True)
class ActionLayout:
    """How the normalised action maps to physical commands: ``offset + scale * a``, clamped."""

    mode: str
    names: tuple[str, ...]
    units: tuple[str, ...]
    scale: np.ndarray
    offset: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def size(self) -> int:
        return len(self.names)

    def to_physical(self, a: np.ndarray) -> np.ndarray:
        """Map a normalised action a in [-1, 1] to clamped physical units."""
        a = np.clip(np.asarray(a, dtype=np.float64), -1.0, 1.0)
        return np.clip(self.offset + self.scale * a, self.low, self.high)


@dataclasses.dataclass(frozen=True)
class Bundle:
    """A validated policy bundle (see module docstring)."""

    path: Path
    robot: str
    robot_spec: dict[str, Any]
    task: str
    control_rate_hz: float
    obs_terms: tuple[ObsTerm, ...]
    obs_mean: np.ndarray
    obs_std: np.ndarray
    action: ActionLayout
    latency: dict[str, Any]
    task_params: dict[str, Any]
    task_config: dict[str, Any]
    task_topics: dict[str, Any]
    reference: Reference | None
    onnx_file: Path
    onnx_input: str
    onnx_output: str
    provenance: dict[str, Any]
    raw: dict[str, Any]

    @property
    def obs_size(self) -> int:
        return sum(t.size for t in self.obs_terms)

    @property
    def obs_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.obs_terms)

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file of the bundle (what a copy of it must carry)."""
        ref = self.raw.get("reference")
        return (self.path / BUNDLE_YAML, self.onnx_file) + ((self.path / str(ref["file"]),) if ref else ())


def _req(d: Mapping[str, Any], key: str, prefix: str, path: str) -> Any:
    if not isinstance(d, Mapping) or key not in d:
        raise BundleError(f"{prefix}{key}", "missing", path)
    return d[key]


def _vec(d: Mapping[str, Any], key: str, n: int, prefix: str, path: str) -> np.ndarray:
    v = _req(d, key, prefix, path)
    try:
        arr = np.asarray(v, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise BundleError(f"{prefix}{key}", f"expected a list of {n} numbers", path) from None
    if arr.shape != (n,):
        raise BundleError(f"{prefix}{key}", f"expected {n} values, got {arr.size}", path)
    if not np.all(np.isfinite(arr)):
        raise BundleError(f"{prefix}{key}", "contains NaN or Inf", path)
    return arr


def parse_bundle(raw: Mapping[str, Any], bundle_dir: Path) -> Bundle:
    """Validate a ``bundle.yaml`` mapping; every error names its field."""
    path = str(bundle_dir / BUNDLE_YAML)
    version = _req(raw, "format_version", "", path)
    if version != FORMAT_VERSION:
        raise BundleError("format_version", f"this simreal reads version {FORMAT_VERSION}, bundle has {version!r}", path)
    obs = _req(raw, "observation", "", path)
    terms_raw = _req(obs, "terms", "observation.", path)
    try:
        terms = tuple(ObsTerm(str(t["name"]), int(t["size"])) for t in terms_raw)
    except (TypeError, KeyError, ValueError):
        raise BundleError("observation.terms", "expected a list of {name, size}", path) from None
    size = int(_req(obs, "size", "observation.", path))
    if size != sum(t.size for t in terms):
        raise BundleError("observation.size", f"{size} != sum of term sizes {sum(t.size for t in terms)}", path)
    norm = _req(obs, "normalization", "observation.", path)
    mean = _vec(norm, "mean", size, "observation.normalization.", path)
    std = _vec(norm, "std", size, "observation.normalization.", path)
    act = _req(raw, "action", "", path)
    names = tuple(str(n) for n in _req(act, "names", "action.", path))
    n = int(_req(act, "size", "action.", path))
    if n != len(names):
        raise BundleError("action.size", f"{n} != number of action.names {len(names)}", path)
    units = tuple(str(u) for u in act.get("units", [""] * n))
    layout = ActionLayout(
        mode=str(_req(act, "mode", "action.", path)), names=names, units=units,
        scale=_vec(act, "scale", n, "action.", path), offset=_vec(act, "offset", n, "action.", path),
        low=_vec(act, "low", n, "action.", path), high=_vec(act, "high", n, "action.", path))
    if np.any(layout.low > layout.high):
        raise BundleError("action.low", "some lower limits exceed action.high", path)
    onnx = _req(raw, "onnx", "", path)
    onnx_file = bundle_dir / str(_req(onnx, "file", "onnx.", path))
    if not onnx_file.is_file():
        raise BundleError("onnx.file", f"file not found: {onnx_file}", path)
    rate = float(_req(raw, "control_rate_hz", "", path))
    if not rate > 0:
        raise BundleError("control_rate_hz", f"must be > 0, got {rate}", path)
    return Bundle(
        path=bundle_dir, robot=str(_req(raw, "robot", "", path)), robot_spec=dict(raw.get("robot_spec") or {}),
        task=str(_req(raw, "task", "", path)), control_rate_hz=rate, obs_terms=terms, obs_mean=mean,
        obs_std=std, action=layout, latency=dict(raw.get("latency") or {}),
        task_params=dict(raw.get("task_params") or {}), task_config=dict(raw.get("task_config") or {}),
        task_topics=dict(raw.get("task_topics") or {}),
        reference=read_reference(raw.get("reference"), bundle_dir, path),
        onnx_file=onnx_file,
        onnx_input=str(onnx.get("input", "obs")), onnx_output=str(onnx.get("output", "action")),
        provenance=dict(raw.get("provenance") or {}), raw=dict(raw))


def load_bundle(bundle_dir: str | Path, *, robot: str | None = None, obs_size: int | None = None,
                action_size: int | None = None) -> Bundle:
    """Load and validate a bundle folder; optional expectations are checked and named on mismatch."""
    d = Path(bundle_dir)
    if d.is_file() and d.name == BUNDLE_YAML:
        d = d.parent
    if not (d / BUNDLE_YAML).is_file():
        raise BundleError(BUNDLE_YAML, f"no {BUNDLE_YAML} in {d}", str(d))
    b = parse_bundle(load_yaml(d / BUNDLE_YAML), d)
    where = str(d / BUNDLE_YAML)
    if robot is not None and b.robot != robot:
        raise BundleError("robot", f"bundle is for robot '{b.robot}', expected '{robot}'", where)
    if obs_size is not None and b.obs_size != obs_size:
        raise BundleError("observation.size", f"bundle has {b.obs_size}, expected {obs_size}", where)
    if action_size is not None and b.action.size != action_size:
        raise BundleError("action.size", f"bundle has {b.action.size}, expected {action_size}", where)
    return b


def write_bundle_yaml(bundle_dir: str | Path, data: Mapping[str, Any]) -> None:
    """Atomically write ``bundle.yaml`` (after validating it parses)."""
    d = Path(bundle_dir)
    parse_bundle(data, d)
    dump_yaml(d / BUNDLE_YAML, dict(data))


class OnnxPolicy:
    """ONNX Runtime inference of a bundle's policy: raw observation -> normalised action.

    Checks at load that the graph's input and output widths equal the bundle's sizes.
    """

    def __init__(self, bundle: Bundle, *, intra_op_threads: int = 1):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = intra_op_threads
        so.inter_op_num_threads = 1
        self.bundle = bundle
        self.session = ort.InferenceSession(str(bundle.onnx_file), so, providers=["CPUExecutionProvider"])
        inp = {i.name: i for i in self.session.get_inputs()}
        out = {o.name: o for o in self.session.get_outputs()}
        where = str(bundle.path / BUNDLE_YAML)
        if bundle.onnx_input not in inp:
            raise BundleError("onnx.input", f"graph has inputs {sorted(inp)}, not '{bundle.onnx_input}'", where)
        if bundle.onnx_output not in out:
            raise BundleError("onnx.output", f"graph has outputs {sorted(out)}, not '{bundle.onnx_output}'", where)
        width = inp[bundle.onnx_input].shape[-1]
        if isinstance(width, int) and width != bundle.obs_size:
            raise BundleError("observation.size", f"ONNX input width {width} != bundle {bundle.obs_size}", where)
        width = out[bundle.onnx_output].shape[-1]
        if isinstance(width, int) and width != bundle.action.size:
            raise BundleError("action.size", f"ONNX output width {width} != bundle {bundle.action.size}", where)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """obs (obs_size,) or (B, obs_size) -> action in [-1, 1], same leading shape."""
        x = np.asarray(obs, dtype=np.float32)
        single = x.ndim == 1
        x = x.reshape(1, -1) if single else x
        (y,) = self.session.run([self.bundle.onnx_output], {self.bundle.onnx_input: x})
        return y[0] if single else y
