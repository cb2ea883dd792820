"""A policy trained elsewhere as a simreal bundle: legged_gym / unitree_rl_gym TorchScript, Isaac
Lab and mjlab ONNX (``simreal import``).

Those frameworks' users deploy a network whose input is their own observation vector and whose
output is their own action; what goes wrong on the robot is the glue (a wrong term order or
scale, a joint order mismatch, other gains). The import writes that glue once, from a spec in the
frameworks' vocabulary, into the bundle's graph, so the runner, safety layer, twins, drivers and
ROS 2 node run the policy exactly as they run one trained here.

The spec (YAML; every key is checked, an unknown one is named)::

    framework: legged_gym            # legged_gym | isaaclab | mjlab (what the names below mean)
    control_rate_hz: 50              # the policy's rate in training (decimation x physics dt)
    physics_rate_hz: 200             # the physics rate it was trained at (1 / sim dt)
    joints: [left_hip_pitch_joint, ...]   # the policy's joint order: its joint observations and actions
    observation:                     # the policy's input terms, in order
      - {term: base_ang_vel, scale: 0.25}
      - {term: projected_gravity, scale: 1.0}
      - {term: velocity_command, scale: [2.0, 2.0, 0.25]}
      - {term: joint_pos, scale: 1.0}      # relative to default_angles
      - {term: joint_vel, scale: 0.05}
      - {term: actions, scale: 1.0}        # the last raw action
      - {term: gait_phase, period_s: 0.8}  # (sin, cos) of 2 pi t / period, t from the hand-over;
                                           # offsets: [0.0, 0.5] gives one (sin, cos) per leg
    history: {length: 1, order: newest_first, layout: frames}   # optional
    action_scale: 0.25               # target = default_angles + action_scale * action (or one per joint)
    clip_actions: 100.0              # |action| bound before scaling (legged_gym's clip_actions)
    default_angles: [...]            # per joint in ``joints`` order, or {joint: angle} [rad]
    kp: [...]                        # per joint, or {joint or legged_gym name fragment: gain} [N m/rad]
    kd: [...]                        # [N m s/rad]

Terms (:data:`TERMS`, the frameworks' names on the left): ``base_lin_vel`` (3, body frame),
``base_ang_vel`` (3, body frame), ``projected_gravity`` (3, the unit gravity vector in the body
frame), ``velocity_command`` (vx, vy, yaw rate), ``joint_pos`` (the joints' positions minus
``default_angles``), ``joint_vel``, ``actions`` (the policy's last output, clipped, before
scaling), ``gait_phase`` (sin, cos of ``2 pi (t / period_s + o)`` for each ``o`` of ``offsets``,
default ``[0]``: legged_gym's G1 one clock, a left/right clock ``[0, 0.5]``). A height scan has no
robot-side source here and is refused. ``scale`` is required on every term but ``gait_phase`` (a
missing one is the usual cause of a robot that shakes), a number or one per element.

``history.length`` k frames: ``layout: frames`` stacks whole observations (legged_gym, HIMLoco),
``layout: terms`` each term's k values together (Isaac Lab's per-term ``history_length``);
``order`` says whether the newest or the oldest comes first.

An mjlab ONNX carries ``joint_names``, ``default_joint_pos``, ``joint_stiffness``,
``joint_damping``, ``action_scale`` and ``observation_names`` in its metadata: those are read
from the file, and the spec needs only the rates, the observation scales where they are not 1,
and whatever the metadata lacks. A value the spec gives too takes precedence (the file writes 3
decimals), except ``joints``: a joint list other than the file's is refused.

What the bundle is, per element (``obs`` the runner's vector: the frames of the terms below,
newest first, ``observation.terms`` in simreal's names over all the robot's actuators)::

    x[i]      = s_i * obs[g_i]                        the policy's input (a Gather and a Mul)
    y         = policy(x)                             (N, m), m = len(joints)
    action[j] = y[h_j] / clip_actions                 for a joint the policy drives
    action[j] = 0                                     for the robot's other actuators
    target[j] = default[j] + action_scale_j * clip_actions * action[j]

so the runner's clip of ``action`` to [-1, 1] is the framework's clip to ``clip_actions``, the
runner's ``last_action`` times ``clip_actions`` is the framework's last action, and a joint the
policy does not drive is held at its default. The embedded robot spec is the robot's with the
policy's joints' ``default``, ``kp`` and ``kd`` from the spec and the physics step of
``physics_rate_hz`` (the rehearsal's and the twin's simulation), so the driver sends the gains the
policy was trained with. A recurrent policy (more than one graph input or output) is refused:
the bundle is one stateless graph.

TorchScript is read with ``torch.jit.load``, which runs no Python pickle (TorchScript's own
archive loader); a ``torch.save`` checkpoint (a pickled state dict) is refused without loading.
"""

from __future__ import annotations

import dataclasses
import io
import math
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simreal.errors import ConfigError
from simreal.robot_spec import RobotSpec

FRAMEWORKS = ("legged_gym", "isaaclab", "mjlab")


@dataclasses.dataclass(frozen=True)
class Term:
    """A framework's observation term: simreal's term, and whether it is per joint."""

    simreal: str
    size: int | None  # None: one value per policy joint


#: The frameworks' observation terms (their names, aliases included) -> simreal's.
TERMS: dict[str, Term] = {
    "base_lin_vel": Term("lin_vel_b", 3),
    "base_ang_vel": Term("ang_vel_b", 3),
    "projected_gravity": Term("gravity_b", 3),
    "velocity_command": Term("command", 3),
    "joint_pos": Term("joint_pos_rel", None),
    "joint_vel": Term("joint_vel", None),
    "actions": Term("last_action", None),
    "gait_phase": Term("gait_phase", 2),
}
ALIASES = {
    "ang_vel": "base_ang_vel",
    "lin_vel": "base_lin_vel",
    "gravity": "projected_gravity",
    "gravity_vec": "projected_gravity",
    "commands": "velocity_command",
    "command": "velocity_command",
    "twist": "velocity_command",
    "dof_pos": "joint_pos",
    "joint_pos_rel": "joint_pos",
    "dof_vel": "joint_vel",
    "joint_vel_rel": "joint_vel",
    "last_action": "actions",
    "action": "actions",
    "phase": "gait_phase",
    "g1_phase": "gait_phase",
}
#: Terms no robot-side source gives: refused with the reason.
ABSENT = {"height_scan": "simreal has no height map on the robot side", "height_map": "as height_scan"}
#: The fastest state stream a robot family's drivers give [Hz]: a policy faster sees stale state.
MAX_CONTROL_RATE_HZ = {"humanoid": 500.0, "quadrotor": 500.0, "arm": 1000.0, "classic": 1000.0}
SPEC_KEYS = (
    "framework",
    "control_rate_hz",
    "physics_rate_hz",
    "joints",
    "observation",
    "history",
    "action_scale",
    "clip_actions",
    "default_angles",
    "kp",
    "kd",
)
HISTORY_KEYS = ("length", "order", "layout")
#: mjlab's ONNX metadata keys -> the spec key each one gives.
MJLAB_METADATA = {
    "joint_names": "joints",
    "default_joint_pos": "default_angles",
    "joint_stiffness": "kp",
    "joint_damping": "kd",
    "action_scale": "action_scale",
    "observation_names": "observation",
}


@dataclasses.dataclass(frozen=True)
class ObsItem:
    """One term of the policy's input: its framework name, simreal term, size and scale."""

    name: str
    simreal: str
    size: int
    scale: np.ndarray  # (size,)
    period_s: float | None = None
    offsets: tuple[float, ...] = ()  # gait_phase: each clock's phase offset [periods]


@dataclasses.dataclass(frozen=True)
class ImportSpec:
    """A validated import spec (module docstring), joint-indexed in the policy's order."""

    framework: str
    control_rate_hz: float
    physics_rate_hz: float
    joints: tuple[str, ...]
    observation: tuple[ObsItem, ...]
    history: int
    newest_first: bool
    term_layout: bool
    action_scale: np.ndarray  # (m,)
    clip_actions: float
    default_angles: np.ndarray  # (m,)
    kp: np.ndarray  # (m,)
    kd: np.ndarray  # (m,)

    @property
    def frame_size(self) -> int:
        return sum(t.size for t in self.observation)


# -- the policy file -------------------------------------------------------------------------------
def load_policy_onnx(path: Path) -> tuple[Any, str]:
    """The policy as an ONNX model and what it was (``torchscript`` or ``onnx``); a ConfigError
    naming the file for anything else, a pickled ``torch.save`` checkpoint included (not loaded)."""
    import onnx

    if not path.is_file():
        raise ConfigError("POLICY", f"{path}: no such file")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        if not any("/code/" in n or n.endswith("constants.pkl") for n in names):
            raise ConfigError(
                "POLICY",
                f"{path} is a torch.save checkpoint (a pickle), not TorchScript; export the policy "
                "with torch.jit.script or torch.jit.trace (legged_gym: export_policy_as_jit), or as ONNX",
            )
        return _torchscript_to_onnx(path), "torchscript"
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as e:  # protobuf's DecodeError, onnx's ValidationError: not an ONNX model
        raise ConfigError("POLICY", f"{path} is neither TorchScript nor ONNX ({type(e).__name__})") from None
    return model, "onnx"


def _torchscript_to_onnx(path: Path) -> Any:
    """The TorchScript module at ``path`` exported to ONNX (TorchScript's exporter), its input
    width found from its first Linear layer's weights."""
    import warnings

    import onnx
    import torch

    try:
        module = torch.jit.load(str(path), map_location="cpu").eval()
    except Exception as e:  # RuntimeError from TorchScript's loader
        raise ConfigError("POLICY", f"{path}: TorchScript could not load it ({str(e).splitlines()[0][:120]})") from None
    weights = [p for p in module.parameters() if p.dim() == 2]
    if not weights:
        raise ConfigError("POLICY", f"{path}: no linear layer found to tell the input size")
    width = int(weights[0].shape[1])
    buf = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            torch.onnx.export(
                module,
                (torch.zeros(1, width),),
                buf,  # type: ignore[arg-type]  # a file-like object works; the stub says path
                dynamo=False,
                input_names=["obs"],
                output_names=["actions"],
                opset_version=17,
                dynamic_axes={"obs": {0: "N"}, "actions": {0: "N"}},
            )
    except Exception as e:  # torch's RuntimeError / OnnxExporterError: not a plain (N, width) -> actions net
        raise ConfigError(
            "POLICY",
            f"{path}: exporting it to ONNX with an input of width {width} (its first linear layer's) failed: "
            f"{str(e).splitlines()[0][:160]}",
        ) from None
    return onnx.load_from_string(buf.getvalue())


def mjlab_metadata(model: Any) -> dict[str, Any]:
    """The spec keys an mjlab ONNX gives in its ``metadata_props`` (CSV strings), parsed."""
    props = {p.key: p.value for p in model.metadata_props}
    out: dict[str, Any] = {}
    for key, spec_key in MJLAB_METADATA.items():
        if key not in props:
            continue
        items = [v.strip() for v in props[key].split(",") if v.strip()]
        if spec_key in ("joints", "observation"):
            out[spec_key] = items
        else:
            vals = [float(v) for v in items]
            out[spec_key] = vals[0] if spec_key == "action_scale" and len(vals) == 1 else vals
    return out


# -- the spec --------------------------------------------------------------------------------------
def parse_spec(raw: Mapping[str, Any], robot: RobotSpec, metadata: Mapping[str, Any], where: str) -> ImportSpec:
    """Validate ``raw`` (the spec YAML) with ``metadata`` (an mjlab ONNX's) filling what it
    lacks, against ``robot``; a ConfigError naming the key for anything that cannot match."""
    if not isinstance(raw, Mapping):
        raise ConfigError("(top level)", "expected a mapping of the import spec's keys", where)
    unknown = sorted(set(raw) - set(SPEC_KEYS))
    if unknown:
        raise ConfigError(unknown[0], f"no such key; keys: {', '.join(SPEC_KEYS)}", where)
    spec = dict(raw)
    for key, value in metadata.items():
        if key not in spec:
            spec[key] = value
        elif key == "joints" and list(spec[key]) != list(value):
            raise ConfigError(key, f"the spec says {list(spec[key])}, the ONNX metadata {list(value)}", where)
    framework = str(spec.get("framework", "mjlab" if metadata else "legged_gym"))
    if framework not in FRAMEWORKS:
        raise ConfigError("framework", f"expected one of {', '.join(FRAMEWORKS)}, got {framework!r}", where)
    control, physics = _rates(spec, robot, where)
    joints = _joints(spec, robot, where)
    m = len(joints)
    observation = tuple(_obs_items(spec, m, where))
    hist = spec.get("history", {}) or {}
    if not isinstance(hist, Mapping) or set(hist) - set(HISTORY_KEYS):
        raise ConfigError("history", f"expected a mapping of {', '.join(HISTORY_KEYS)}", where)
    length = hist.get("length", 1)
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ConfigError("history.length", f"expected an integer >= 1, got {length!r}", where)
    order, layout = hist.get("order", "newest_first"), hist.get("layout", "frames")
    if order not in ("newest_first", "oldest_first"):
        raise ConfigError("history.order", f"expected newest_first or oldest_first, got {order!r}", where)
    if layout not in ("frames", "terms"):
        raise ConfigError("history.layout", f"expected frames or terms, got {layout!r}", where)
    clip = _number(spec, "clip_actions", 100.0, where)
    if clip <= 0:
        raise ConfigError("clip_actions", f"expected a bound > 0, got {clip}", where)
    return ImportSpec(
        framework=framework,
        control_rate_hz=control,
        physics_rate_hz=physics,
        joints=joints,
        observation=observation,
        history=length,
        newest_first=order == "newest_first",
        term_layout=layout == "terms",
        action_scale=_per_joint(spec, "action_scale", joints, where, positive=True),
        clip_actions=clip,
        default_angles=_per_joint(spec, "default_angles", joints, where),
        kp=_per_joint(spec, "kp", joints, where, positive=True, fragments=True),
        kd=_per_joint(spec, "kd", joints, where, positive=True, fragments=True, zero_ok=True),
    )


def _number(spec: Mapping[str, Any], key: str, default: float | None, where: str) -> float:
    v = spec.get(key, default)
    if v is None:
        raise ConfigError(key, "missing", where)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(key, f"expected a finite number, got {v!r}", where)
    return float(v)


def _rates(spec: Mapping[str, Any], robot: RobotSpec, where: str) -> tuple[float, float]:
    control, physics = _number(spec, "control_rate_hz", None, where), _number(spec, "physics_rate_hz", None, where)
    top = MAX_CONTROL_RATE_HZ[robot.family]
    if not 0 < control <= top:
        raise ConfigError(
            "control_rate_hz",
            f"{control:g} Hz: {robot.name}'s drivers give state at most at {top:g} Hz; expected (0, {top:g}]",
            where,
        )
    ratio = physics / control
    if physics < control or abs(ratio - round(ratio)) > 1e-6:
        raise ConfigError(
            "physics_rate_hz",
            f"{physics:g} Hz is no whole multiple of control_rate_hz {control:g} (the decimation)",
            where,
        )
    return control, physics


def _joints(spec: Mapping[str, Any], robot: RobotSpec, where: str) -> tuple[str, ...]:
    joints = spec.get("joints")
    if not isinstance(joints, list) or not joints or not all(isinstance(j, str) for j in joints):
        raise ConfigError("joints", "expected the policy's joint names, in its order", where)
    actuated, held = set(robot.actuator_names), set(robot.held_names)
    for i, name in enumerate(joints):
        if name in held:
            raise ConfigError(
                f"joints[{i}]",
                f"'{name}' is held by the driver in robot {robot.name}; use a robot whose actuators include it "
                f"(the whole robot: {robot.whole_robot or robot.name})",
                where,
            )
        if name not in actuated:
            raise ConfigError(f"joints[{i}]", f"'{name}' is no actuator of robot {robot.name}", where)
    if len(set(joints)) != len(joints):
        raise ConfigError("joints", "a joint is listed twice", where)
    return tuple(joints)


def _obs_items(spec: Mapping[str, Any], m: int, where: str) -> list[ObsItem]:
    obs = spec.get("observation")
    if not isinstance(obs, list) or not obs:
        raise ConfigError("observation", "expected the policy's observation terms, in order", where)
    from_metadata = all(isinstance(t, str) for t in obs)  # mjlab's observation_names: scales are 1
    items = []
    for i, t in enumerate(obs):
        key = f"observation[{i}]"
        t = {"term": t, "scale": 1.0} if from_metadata else t
        if not isinstance(t, Mapping) or "term" not in t:
            raise ConfigError(key, "expected {term: NAME, scale: ...}", where)
        extra = set(t) - {"term", "scale", "period_s", "offsets"}
        if extra:
            raise ConfigError(f"{key}.{sorted(extra)[0]}", "no such key; keys: term, scale, period_s, offsets", where)
        name = ALIASES.get(str(t["term"]), str(t["term"]))
        if name in ABSENT:
            raise ConfigError(f"{key}.term", f"'{t['term']}': {ABSENT[name]}", where)
        if name not in TERMS:
            names = ", ".join([*TERMS, *ALIASES])
            raise ConfigError(f"{key}.term", f"unknown term '{t['term']}'; terms: {names}", where)
        term = TERMS[name]
        size = m if term.size is None else term.size
        if name == "gait_phase":
            period = t.get("period_s")
            if isinstance(period, bool) or not isinstance(period, (int, float)) or not period > 0:
                raise ConfigError(f"{key}.period_s", f"the gait clock's period [s] > 0, got {period!r}", where)
            offsets = t.get("offsets", [0.0])
            if not isinstance(offsets, list) or not offsets or not all(isinstance(o, (int, float)) for o in offsets):
                raise ConfigError(
                    f"{key}.offsets", f"expected the clocks' phase offsets [periods], got {offsets!r}", where
                )
            size = 2 * len(offsets)
            items.append(ObsItem(name, term.simreal, size, np.ones(size), float(period), tuple(map(float, offsets))))
            continue
        if "scale" not in t:
            raise ConfigError(
                f"{key}.scale", f"missing: the scale the policy saw '{t['term']}' with (1.0 if none)", where
            )
        scale = np.asarray(t["scale"], np.float64).reshape(-1)
        if scale.size == 1:
            scale = np.full(size, float(scale[0]))
        if scale.size != size or not np.all(np.isfinite(scale)):
            raise ConfigError(f"{key}.scale", f"expected a number or {size} numbers, got {t['scale']!r}", where)
        items.append(ObsItem(name, term.simreal, size, scale))
    if len({it.name for it in items}) != len(items):
        raise ConfigError("observation", "a term is listed twice", where)
    return items


def _per_joint(
    spec: Mapping[str, Any],
    key: str,
    joints: Sequence[str],
    where: str,
    positive: bool = False,
    fragments: bool = False,
    zero_ok: bool = False,
) -> np.ndarray:
    """A per-joint value in the policy's joint order: one number, a list in that order, or a
    mapping by joint name (``fragments``: legged_gym's, a fragment of the name matching once)."""
    if key not in spec:
        raise ConfigError(key, f"missing: one value per joint of 'joints' ({len(joints)})", where)
    v = spec[key]
    if isinstance(v, Mapping):
        out = []
        for j in joints:
            hits = [k for k in v if k == j] or ([k for k in v if str(k) in j] if fragments else [])
            if len(hits) != 1:
                said = "no entry" if not hits else f"{len(hits)} entries ({', '.join(map(str, hits))})"
                raise ConfigError(f"{key}", f"joint '{j}' has {said}; expected one", where)
            out.append(v[hits[0]])
        v = out
    arr = np.asarray(v, np.float64).reshape(-1) if not isinstance(v, str) else np.array([])
    if arr.size == 1 and not isinstance(v, list):
        arr = np.full(len(joints), float(arr[0]))
    if arr.size != len(joints) or not np.all(np.isfinite(arr)):
        raise ConfigError(key, f"expected {len(joints)} numbers (one per joint of 'joints'), got {v!r:.80}", where)
    if positive and np.any(arr < 0 if zero_ok else arr <= 0):
        raise ConfigError(key, f"expected values {'>= 0' if zero_ok else '> 0'}, got {arr.tolist()}", where)
    return arr


# -- the bundle ------------------------------------------------------------------------------------
def bundle_layout(spec: ImportSpec, robot: RobotSpec) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """(the bundle's observation terms over the robot's actuators, gather indices g, scales s) of
    the module docstring: ``x = s * obs[g]`` is the policy's input from the runner's vector."""
    names = robot.actuator_names
    n = len(names)
    col = np.array([names.index(j) for j in spec.joints])
    terms = [{"name": it.simreal, "size": n if _per_joint_term(it) else it.size} for it in spec.observation]
    offsets = np.cumsum([0] + [t["size"] for t in terms])
    frame = int(offsets[-1])
    per_term: list[tuple[np.ndarray, np.ndarray]] = []
    for it, off in zip(spec.observation, offsets):
        idx = off + (col if _per_joint_term(it) else np.arange(it.size))
        scale = it.scale * (spec.clip_actions if it.simreal == "last_action" else 1.0)
        per_term.append((idx, scale))
    ages = range(spec.history) if spec.newest_first else range(spec.history - 1, -1, -1)
    if spec.term_layout:  # each term's k values together, the terms in order
        g = np.concatenate([idx + age * frame for idx, _ in per_term for age in ages])
        s = np.concatenate([sc for _, sc in per_term for _ in ages])
    else:  # whole frames, one after the other
        g = np.concatenate([idx + age * frame for age in ages for idx, _ in per_term])
        s = np.concatenate([sc for _ in ages for _, sc in per_term])
    return terms, g.astype(np.int64), s


def _per_joint_term(it: ObsItem) -> bool:
    return TERMS[it.name].size is None


def embedded_spec(spec: ImportSpec, robot: RobotSpec) -> RobotSpec:
    """``robot`` with the policy's joints' default, kp and kd, and the physics step of
    ``physics_rate_hz`` (the rehearsal's model)."""
    by = {j: i for i, j in enumerate(spec.joints)}
    acts = tuple(
        dataclasses.replace(
            a,
            default=float(spec.default_angles[by[a.name]]),
            kp=float(spec.kp[by[a.name]]),
            kd=float(spec.kd[by[a.name]]),
        )
        if a.name in by
        else a
        for a in robot.actuators
    )
    physical = {**robot.physical, "physics_dt_s": 1.0 / spec.physics_rate_hz}
    return dataclasses.replace(robot, actuators=acts, physical=physical, control_rate_hz=spec.control_rate_hz)


def action_layout(spec: ImportSpec, embedded: RobotSpec) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """(the bundle's joint-position action over the actuators of ``embedded`` (the robot with the
    policy's defaults, :func:`embedded_spec`), the policy's output column h_j of each (m: the zero
    column), weight w_j): ``action = w * concat(y, 0)[h]``."""
    names = embedded.actuator_names
    by = {j: i for i, j in enumerate(spec.joints)}
    m = len(spec.joints)
    h = np.array([by.get(a, m) for a in names], np.int64)
    w = np.array([1.0 / spec.clip_actions if a in by else 0.0 for a in names])
    scale = [float(spec.action_scale[by[a]] * spec.clip_actions) if a in by else 1.0 for a in names]
    low = [a.range[0] if a.range else -math.inf for a in embedded.actuators]
    high = [a.range[1] if a.range else math.inf for a in embedded.actuators]
    layout = {
        "mode": "joint_position",
        "size": len(names),
        "names": list(names),
        "units": ["rad"] * len(names),
        "scale": scale,
        "offset": [a.default for a in embedded.actuators],
        "low": low,
        "high": high,
    }
    return layout, h, w


def wrap_policy(model: Any, g: np.ndarray, s: np.ndarray, h: np.ndarray, w: np.ndarray, where: str) -> Any:
    """The bundle's graph: ``obs`` (N, size) -> ``action`` (N, n), the policy between the gather
    of its input and the spread of its output (module docstring). A ConfigError naming
    ``observation`` when the policy's input width is not the spec's."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    inits = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise ConfigError(
            "POLICY",
            f"{where}: the graph has {len(inputs)} inputs and {len(graph.output)} outputs; a bundle "
            "takes one observation and gives one action (a recurrent policy's state is not supported)",
        )
    width = _last_dim(inputs[0])
    if width is not None and width != g.size:
        raise ConfigError(
            "observation",
            f"the terms and history give {g.size} inputs, the policy takes {width} ({where})",
        )
    outputs = _last_dim(graph.output[0])
    if outputs is not None and outputs != int(np.sum(w != 0)):
        raise ConfigError(
            "joints", f"the spec names {int(np.sum(w != 0))} joints, the policy gives {outputs} actions ({where})"
        )
    p_in, p_out = inputs[0].name, graph.output[0].name
    wrapped = onnx.ModelProto()
    wrapped.CopyFrom(model)  # the policy's own opset and IR version
    model = _renamed(wrapped, {p_in: "policy_in", p_out: "policy_out"})
    graph = model.graph
    del graph.input[:]
    del graph.output[:]
    graph.input.append(helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["N", None]))
    graph.output.append(helper.make_tensor_value_info("action", TensorProto.FLOAT, ["N", int(h.size)]))
    graph.initializer.extend(
        [
            numpy_helper.from_array(g, "import_gather"),
            numpy_helper.from_array(s.astype(np.float32)[None], "import_scale"),
            numpy_helper.from_array(h, "import_spread"),
            numpy_helper.from_array(w.astype(np.float32)[None], "import_weight"),
            numpy_helper.from_array(np.array([0], np.int64), "import_start"),
            numpy_helper.from_array(np.array([1], np.int64), "import_end"),
            numpy_helper.from_array(np.array([1], np.int64), "import_axis"),
            numpy_helper.from_array(np.zeros((1, 1), np.float32), "import_zero"),
        ]
    )
    pre = [
        helper.make_node("Gather", ["obs", "import_gather"], ["import_x"], axis=1),
        helper.make_node("Mul", ["import_x", "import_scale"], ["policy_in"]),
    ]
    post = [  # a zero column (N, 1) beside y, then one column per actuator
        helper.make_node("Slice", ["policy_out", "import_start", "import_end", "import_axis"], ["import_y0"]),
        helper.make_node("Mul", ["import_y0", "import_zero"], ["import_zeros"]),
        helper.make_node("Concat", ["policy_out", "import_zeros"], ["import_y"], axis=1),
        helper.make_node("Gather", ["import_y", "import_spread"], ["import_a"], axis=1),
        helper.make_node("Mul", ["import_a", "import_weight"], ["action"]),
    ]
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(pre + nodes + post)
    del graph.value_info[:]
    onnx.checker.check_model(model)
    return model


def _renamed(model: Any, names: Mapping[str, str]) -> Any:
    for node in model.graph.node:
        node.input[:] = [names.get(x, x) for x in node.input]
        node.output[:] = [names.get(x, x) for x in node.output]
    return model


def _last_dim(value_info: Any) -> int | None:
    dims = value_info.type.tensor_type.shape.dim
    return int(dims[-1].dim_value) if dims and dims[-1].HasField("dim_value") else None


def import_policy(policy: Path, spec_path: Path, robot_name: str, out: Path) -> Path:
    """Write the bundle of ``policy`` (TorchScript or ONNX) described by the spec at
    ``spec_path`` for robot ``robot_name`` into ``out`` (atomically); every refusal comes before
    anything is written."""
    import datetime

    import onnxruntime as ort

    import simreal
    from simreal.bundle import FORMAT_VERSION, write_bundle_yaml
    from simreal.config import to_dict
    from simreal.reference import REFERENCE_NPZ, Reference, write_reference
    from simreal.robot_spec import load_robot_spec
    from simreal.yaml_io import atomic_folder, atomic_write_bytes, load_yaml

    robot = load_robot_spec(robot_name)
    model, kind = load_policy_onnx(policy)
    spec = parse_spec(load_yaml(spec_path), robot, mjlab_metadata(model), str(spec_path))
    embedded = embedded_spec(spec, robot)
    for a in embedded.actuators:
        if a.name in spec.joints and a.range and not a.range[0] <= a.default <= a.range[1]:
            raise ConfigError(
                "default_angles",
                f"{a.name}: {a.default:g} is outside its range [{a.range[0]:g}, {a.range[1]:g}] on {robot.name}",
                str(spec_path),
            )
    terms, g, s = bundle_layout(spec, robot)
    action, h, w = action_layout(spec, embedded)
    if not all(np.isfinite(action["low"]) & np.isfinite(action["high"])):
        raise ConfigError("--robot", f"robot {robot.name} gives no position range for every actuator")
    graph = wrap_policy(model, g, s, h, w, str(policy))
    size = spec.history * sum(int(t["size"]) for t in terms)
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    try:  # a width the graph leaves symbolic is only found by running it
        session.run(None, {"obs": np.zeros((2, size), np.float32)})
    except Exception as e:  # onnxruntime's InvalidArgument / Fail: the policy's width disagrees
        raise ConfigError(
            "observation", f"the terms and history give {g.size} inputs; the policy refused them ({policy}): {e}"
        ) from None
    reference = None
    clock = next((it for it in spec.observation if it.simreal == "gait_phase"), None)
    if clock is not None and clock.period_s is not None:
        rows = clock.period_s * spec.control_rate_hz
        if abs(rows - round(rows)) > 1e-6 or round(rows) < 2:
            raise ConfigError(
                "observation.gait_phase.period_s",
                f"{clock.period_s} s is no whole number of control periods ({1 / spec.control_rate_hz:g} s)",
                str(spec_path),
            )
        phase = np.arange(round(rows)) / round(rows)
        angles = 2 * np.pi * (phase[:, None] + np.array(clock.offsets)[None])  # (N, clocks)
        table = np.stack([np.sin(angles), np.cos(angles)], -1).reshape(len(phase), -1)  # sin, cos of each
        reference = Reference(spec.control_rate_hz, {"gait_phase": table}, True)
    data: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "robot": robot.name,
        "robot_spec": {k: v for k, v in to_dict(embedded).items() if k != "source"},
        "task": f"imported-{spec.framework}",
        "control_rate_hz": spec.control_rate_hz,
        "observation": {
            "size": size,
            "terms": terms,
            "normalization": {"mean": [0.0] * size, "std": [1.0] * size, "baked_into_onnx": True},
        },
        "action": action,
        "latency": {"action_delay_steps": [0.0, 0.0], "obs_history": spec.history},
        "task_params": {"command": [0.0, 0.0, 0.0]} if any(t["name"] == "command" for t in terms) else {},
        "onnx": {"file": "policy.onnx", "input": "obs", "output": "action", "opset": _opset(graph)},
        "provenance": {
            "imported_from": str(policy),
            "policy_format": kind,
            "framework": spec.framework,
            "import_spec": str(spec_path),
            "physics_rate_hz": spec.physics_rate_hz,
            "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "simreal_version": simreal.__version__,
        },
    }

    def fill(tmp: Path) -> None:
        atomic_write_bytes(tmp / "policy.onnx", graph.SerializeToString())
        if reference is not None:
            write_reference(tmp / REFERENCE_NPZ, reference)
            data["reference"] = {"file": REFERENCE_NPZ, "rate_hz": reference.rate_hz, "loop": True}
        write_bundle_yaml(tmp, data)

    return atomic_folder(out, fill)


def _opset(model: Any) -> int:
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=17)
