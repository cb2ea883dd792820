"""A user's MJCF or URDF file, adapted to the robot-model contract of :mod:`simreal.sim.robots`.

The file (``model.asset_root`` / ``model.asset_file``) loads with ``MjSpec.from_file``, so
meshes resolve against the file's folder and its ``compiler meshdir``. It is then changed only
where the contract needs it; each change is said once on stderr, as
``simreal: robot 'g1' (g1_29dof.xml): <what>``.

- **floor** (humanoid, arm, quadrotor): a plane at z = 0 (:func:`~simreal.sim.robots.floor.add_floor`,
  sliding friction ``physical.floor_friction``, default 1.0) when the world body has no plane
  or height field;
- **free base** (humanoid): a free joint on the root body when it has no joint (a URDF: MuJoCo
  welds its root link to the world). URDF fixed links stay bodies (``fusestatic`` off), so a
  task or ``model.sites`` can name them;
- **time step**: ``physical.physics_dt_s`` when set, else the file's. Joint robots integrate
  with ``implicitfast`` when the file says Euler, as the built-in models do, so the servos'
  stiff ``kv`` stays stable; ``physical.solver_iterations`` / ``ls_iterations``, when set,
  replace the file's solver caps (as for the built-ins);

Joint robots (humanoid, arm), whose tasks send joint position targets:

- **collisions**: as the built-ins (:mod:`~simreal.sim.robots.articulated`), every colliding
  geom of a moving body gets ``contype=2, conaffinity=1``: it touches the floor and task
  objects but not the robot itself (MJX has no cylinder-mesh or mesh-mesh collisions, which a
  file's self-collisions need). ``model.options: {self_collision: true}`` keeps the file's bits;
- **actuators**: each spec actuator is found in the file by actuator name, else as the
  actuator driving a joint of that name (Unitree names ``left_hip_pitch`` the motor of
  ``left_hip_pitch_joint``), else as a joint of that name with no actuator (a URDF). Each
  becomes a PD position servo in joint (or tendon) units, the built-ins' actuator::

      tau = kp (ctrl - q) - kd qdot,  |tau| <= effort_limit,  ctrl in range

  with ``kp``, ``kd``, ``effort_limit`` and ``range`` from the spec where it sets them (> 0,
  given), else from the file: a ``<position>`` or position-like ``<general>`` actuator's
  gains and limits (its set-point scale ``gain / kp`` and ``gear`` folded in), a ``<motor>``'s
  torque range (``gear * ctrlrange``), the joint's ``actuatorfrcrange`` and range. A torque
  motor or a bare joint has no gains, so the spec must give ``kp``. The actuators are rebuilt
  in the spec's (driver) order under the spec's names; a file actuator no spec actuator
  claims is an error. Actuator dynamics (``timeconst``) are dropped;
- **joints** of those actuators: ``armature``, ``friction`` (friction loss) and ``range``
  from the spec where set, else the file's; ``physical.joint_damping``, when set, on every
  hinge and slide joint (as the built-ins), else each joint keeps the file's damping;
- **keyframe** ``home``: the spec's ``default`` pose when any default is non-zero, else the
  file's ``home`` key, else the file's reference pose (``qpos0``); a free base keeps the
  file's ``home`` position and orientation (if any) and is lowered or raised so its lowest
  collision geom touches z = 0. Every keyframe's ``ctrl`` becomes the servo set-points that
  hold its pose (a ``<motor>`` key's torques mean nothing to a position servo).

Every failure is a one-line :class:`~simreal.errors.ConfigError` naming the spec file, the key
and what to change.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import mujoco
import numpy as np

from simreal.errors import ConfigError
from simreal.robot_spec import ActuatorSpec, RobotSpec
from simreal.sim.robots.articulated import ROBOT_CONAFFINITY, ROBOT_CONTYPE, set_solver_caps
from simreal.sim.robots.floor import add_floor, collision_geoms, has_floor, lowest_z

FLOOR_FAMILIES = ("humanoid", "arm", "quadrotor")
JOINT_FAMILIES = ("humanoid", "arm")
OPTIONS = ("self_collision",)  # model.options a model file takes
_SAID: set[tuple[str, str]] = set()  # (file, note) already said: an env built twice (train, eval) says it once


def model_path(spec: RobotSpec) -> Path | None:
    """The spec's model file ``asset_root / asset_file``, or None for a built-in model. A relative
    path is relative to the spec's folder (so a spec and its model move together); no
    ``asset_root`` means the spec's folder."""
    src = spec.model
    if src.asset_file is None:
        return None
    spec_dir = Path(spec.source).parent if spec.source else Path(".")
    return spec_dir / Path(src.asset_root or ".").expanduser() / Path(src.asset_file).expanduser()


def load_user_model(spec: RobotSpec) -> mujoco.MjSpec:
    """The spec's model file as an ``MjSpec`` meeting the robot-model contract (module docstring)."""
    path = model_path(spec)
    assert path is not None, "load_user_model needs a spec with model.asset_file"
    if not path.is_file():
        raise ConfigError("model.asset_file", f"file not found: {path}", spec.source)
    try:
        s = mujoco.MjSpec.from_file(str(path))
    except ValueError as e:  # MuJoCo's parser raises ValueError with its (multi-line) message
        raise ConfigError("model.asset_file", f"MuJoCo could not load {path}: {one_line(e)}", spec.source) from None
    unknown = sorted(set(spec.model.options) - set(OPTIONS))
    if unknown:
        raise ConfigError(
            "model.options", f"{unknown} are not options of a model file; valid: {', '.join(OPTIONS)}", spec.source
        )
    if path.suffix.lower() == ".urdf":
        s.compiler.fusestatic = False
    notes: list[str] = []
    m = compile_file(s, spec, path)
    if spec.family == "humanoid" and _add_free_joint(s, m):
        notes.append(f"added a free joint to root body '{m.body(1).name}' (a humanoid's base floats)")
    if spec.family in FLOOR_FAMILIES and not has_floor(m):
        friction = float(spec.physical.get("floor_friction", 1.0))
        add_floor(s, friction)
        notes.append(f"added a floor plane at z = 0 (friction {friction:g}): the file has none")
    notes.append(_set_timestep(s, spec))
    if set_solver_caps(s, spec.physical):
        notes.append(
            f"solver caps {s.option.iterations} / {s.option.ls_iterations} iterations from the spec "
            "(physical.solver_iterations / ls_iterations)"
        )
    if spec.family in JOINT_FAMILIES and not spec.model.options.get("self_collision", False):
        for g in s.geoms:
            if g.parent.name != "world" and (g.contype or g.conaffinity):
                g.contype, g.conaffinity = ROBOT_CONTYPE, ROBOT_CONAFFINITY
        notes.append(
            "robot geoms touch the world, not each other (model.options.self_collision: true keeps "
            "the file's contype/conaffinity)"
        )
    if spec.family in JOINT_FAMILIES and spec.actuators:
        if s.option.integrator == mujoco.mjtIntegrator.mjINT_EULER:
            s.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
            notes.append("integrator Euler -> implicitfast (the servos' kd integrated implicitly)")
        servos = [_servo(spec, k, a, m, path) for k, a in enumerate(spec.actuators)]
        _check_all_claimed(spec, servos, m, path)
        notes += _apply_joint_settings(s, spec, servos)
        _replace_actuators(s, servos)
        notes += _describe(servos)
        notes.append(_set_keyframes(s, spec, path))
    for note in notes:
        say(spec, path, note)
    return s


def say(spec: RobotSpec, path: Path, note: str) -> None:
    """Write ``note`` about the robot's model file on stderr, once per file and process."""
    if (str(path), note) not in _SAID:
        _SAID.add((str(path), note))
        print(f"simreal: robot '{spec.name}' ({path.name}): {note}", file=sys.stderr)


def one_line(e: Exception) -> str:
    """MuJoCo's multi-line error message on one line."""
    return "; ".join(part.strip() for part in str(e).splitlines() if part.strip())


def compile_file(s: mujoco.MjSpec, spec: RobotSpec, path: Path) -> mujoco.MjModel:
    """Compile a copy of ``s`` (compiling edits the spec: it fuses static bodies); a failure,
    such as a missing mesh, is a one-line ConfigError."""
    try:
        return s.copy().compile()
    except ValueError as e:
        meshes = (path.parent / s.meshdir).resolve()
        raise ConfigError(
            "model.asset_file",
            f"MuJoCo could not compile {path}: {one_line(e)} (mesh files resolve against {meshes})",
            spec.source,
        ) from None


# -- free base and time step ---------------------------------------------------------------------
def _add_free_joint(s: mujoco.MjSpec, m: mujoco.MjModel) -> bool:
    """A free joint on the first root body if it has no joint; existing keys get its pose prepended."""
    if m.nbody < 2 or m.body_jntnum[1] > 0:
        return False
    root = s.body(m.body(1).name)
    pos, quat = list(root.pos), list(root.quat)
    root.add_freejoint(name="floating_base_joint")
    for key in s.keys:
        if len(key.qpos):
            key.qpos = pos + quat + list(key.qpos)
    return True


def _set_timestep(s: mujoco.MjSpec, spec: RobotSpec) -> str:
    if "physics_dt_s" in spec.physical:
        s.option.timestep = float(spec.physical["physics_dt_s"])
        return f"time step {s.option.timestep:g} s from the spec (physical.physics_dt_s)"
    return f"time step {s.option.timestep:g} s from the file (physical.physics_dt_s unset)"


# -- servos ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Servo:
    """One spec actuator as a PD position servo in joint (or tendon) units: ``tau = kp (ctrl - q) -
    kd qdot`` clamped to ``+-force_limit`` [N m] or [N] (inf: unlimited), ``ctrl`` in ``ctrlrange``."""

    name: str
    trntype: mujoco.mjtTrn
    target: str  # joint or tendon name
    file_actuator: int  # id in the file's model, -1 for a bare joint
    was: str  # what the file had: "<motor>", "<position>", "no actuator", ...
    kp: float
    kd: float
    force_limit: float
    ctrlrange: tuple[float, float]
    source: dict[str, str]  # field -> "spec" | "file"


@dataclasses.dataclass(frozen=True)
class _FileServo:
    """What the file says about a transmission, in joint (or tendon) units; 0 / inf / None: nothing."""

    kp: float = 0.0
    kd: float = 0.0
    force_limit: float = math.inf
    ctrlrange: tuple[float, float] | None = None


def _find(spec: RobotSpec, k: int, a: ActuatorSpec, m: mujoco.MjModel, path: Path) -> tuple[int, mujoco.mjtTrn, int]:
    """(file actuator id or -1, transmission type, joint/tendon id) of spec actuator ``a``: the
    file's actuator of that name, else the one driving the joint (or tendon) of that name, else
    that joint (or tendon) with no actuator."""
    i = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a.name)
    for obj, trn in (
        (mujoco.mjtObj.mjOBJ_JOINT, mujoco.mjtTrn.mjTRN_JOINT),
        (mujoco.mjtObj.mjOBJ_TENDON, mujoco.mjtTrn.mjTRN_TENDON),
    ):
        t = mujoco.mj_name2id(m, obj, a.name)
        if i >= 0 or t < 0:
            continue
        drives = [u for u in range(m.nu) if m.actuator_trntype[u] == trn and m.actuator_trnid[u, 0] == t]
        if not drives:
            return -1, trn, t
        i = drives[0]
    if i < 0:
        joints = ", ".join(m.joint(j).name for j in range(m.njnt) if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE)
        raise ConfigError(
            f"actuators[{k}].name",
            f"'{a.name}' names no actuator, joint or tendon of {path}; its joints: {joints}",
            spec.source,
        )
    trn = mujoco.mjtTrn(m.actuator_trntype[i])
    if trn not in (mujoco.mjtTrn.mjTRN_JOINT, mujoco.mjtTrn.mjTRN_TENDON):
        raise ConfigError(
            f"actuators[{k}].name",
            f"actuator '{m.actuator(i).name}' of {path} has a {trn.name} "
            "transmission; position targets need a joint or tendon",
            spec.source,
        )
    return i, trn, int(m.actuator_trnid[i, 0])


def _file_servo(m: mujoco.MjModel, i: int, trn: mujoco.mjtTrn, t: int) -> _FileServo:
    """The file's gains and limits for transmission ``t`` (actuator ``i``, or none if -1), in its units.

    A file actuator with gear g, gain G and bias (b0, b1, b2) applies to its transmission
    g (G ctrl + b1 g q + b2 g qdot): a position servo with kp = -b1 g^2, kd = -b2 g^2 and
    set-point G / (-b1 g) ctrl. A motor (no bias) applies g G ctrl, limited by its ctrlrange.
    """
    joint = trn == mujoco.mjtTrn.mjTRN_JOINT
    limit = float(np.max(np.abs(m.jnt_actfrcrange[t]))) if joint and m.jnt_actfrclimited[t] else math.inf
    limited, rng = (m.jnt_limited[t], m.jnt_range[t]) if joint else (m.tendon_limited[t], m.tendon_range[t])
    ctrlrange = (float(rng[0]), float(rng[1])) if limited else None
    if i < 0:
        return _FileServo(force_limit=limit, ctrlrange=ctrlrange)
    g, G, b = float(m.actuator_gear[i, 0]), float(m.actuator_gainprm[i, 0]), m.actuator_biasprm[i]
    if m.actuator_forcelimited[i]:
        limit = min(limit, abs(g) * float(np.max(np.abs(m.actuator_forcerange[i]))))
    cr = m.actuator_ctrlrange[i] if m.actuator_ctrllimited[i] else None
    if m.actuator_biastype[i] == mujoco.mjtBias.mjBIAS_NONE:  # torque motor
        if cr is not None:
            limit = min(limit, abs(g * G) * float(np.max(np.abs(cr))))
        return _FileServo(force_limit=limit, ctrlrange=ctrlrange)
    kp, kd = -float(b[1]) * g * g, -float(b[2]) * g * g
    if kp > 0 and cr is not None:  # file set-points -> transmission units, within the joint's range
        lo, hi = sorted(float(c) * G / (-float(b[1]) * g) for c in cr)
        ctrlrange = (lo, hi) if ctrlrange is None else (max(lo, ctrlrange[0]), min(hi, ctrlrange[1]))
    return _FileServo(kp=max(kp, 0.0), kd=max(kd, 0.0), force_limit=limit, ctrlrange=ctrlrange)


def _kind(m: mujoco.MjModel, i: int) -> str:
    if i < 0:
        return "no actuator"
    if m.actuator_gaintype[i] != mujoco.mjtGain.mjGAIN_FIXED or int(m.actuator_biastype[i]) not in (
        mujoco.mjtBias.mjBIAS_NONE,
        mujoco.mjtBias.mjBIAS_AFFINE,
    ):
        return ""
    return "<motor>" if m.actuator_biastype[i] == mujoco.mjtBias.mjBIAS_NONE else "<position>/<general>"


def _servo(spec: RobotSpec, k: int, a: ActuatorSpec, m: mujoco.MjModel, path: Path) -> Servo:
    """Spec actuator ``a`` merged with what the file says (spec wins where it sets a value)."""
    i, trn, t = _find(spec, k, a, m, path)
    if trn == mujoco.mjtTrn.mjTRN_JOINT and int(m.jnt_type[t]) not in (
        mujoco.mjtJoint.mjJNT_HINGE,
        mujoco.mjtJoint.mjJNT_SLIDE,
    ):
        raise ConfigError(
            f"actuators[{k}].name",
            f"joint '{m.joint(t).name}' of {path} is a "
            f"{mujoco.mjtJoint(m.jnt_type[t]).name}; position targets need a "
            "hinge or slide joint",
            spec.source,
        )
    was = _kind(m, i)
    if not was:
        raise ConfigError(
            f"actuators[{k}]",
            f"actuator '{m.actuator(i).name}' of {path} is neither a torque motor "
            "nor a position servo (gain fixed, bias none/affine); replace it with "
            "<motor> or <position>",
            spec.source,
        )
    f = _file_servo(m, i, trn, t)
    src: dict[str, str] = {}

    def pick(field: str, spec_value, file_value):
        src[field] = "spec" if spec_value else "file"
        return spec_value if spec_value else file_value

    kp = pick("kp", a.kp, f.kp)
    if kp <= 0:
        raise ConfigError(
            f"actuators[{k}].kp",
            f"'{a.name}' has {was} in {path} (no position gain); set kp "
            "[N m/rad or N/m] (and kd) so it can follow position targets",
            spec.source,
        )
    ctrlrange = pick("range", tuple(a.range) if a.range else None, f.ctrlrange)
    if ctrlrange is None:
        raise ConfigError(
            f"actuators[{k}].range",
            f"'{a.name}': neither the spec nor {path} limits it; set range: [lower, upper] for its position targets",
            spec.source,
        )
    target = m.joint(t).name if trn == mujoco.mjtTrn.mjTRN_JOINT else m.tendon(t).name
    return Servo(
        name=a.name,
        trntype=trn,
        target=target,
        file_actuator=i,
        was=was,
        kp=kp,
        kd=pick("kd", a.kd, f.kd),
        force_limit=pick("effort_limit", a.effort_limit, f.force_limit),
        ctrlrange=(float(ctrlrange[0]), float(ctrlrange[1])),
        source=src,
    )


def _check_all_claimed(spec: RobotSpec, servos: list[Servo], m: mujoco.MjModel, path: Path) -> None:
    claimed = [sv.file_actuator for sv in servos if sv.file_actuator >= 0]
    twice = {m.actuator(i).name for i in claimed if claimed.count(i) > 1}
    if twice:
        raise ConfigError(
            "actuators",
            f"several spec actuators name {path.name}'s actuator(s) {sorted(twice)} (by actuator or joint name)",
            spec.source,
        )
    left = [m.actuator(i).name for i in range(m.nu) if i not in claimed]
    if left:
        raise ConfigError(
            "actuators",
            f"{path} has actuators {left} that no spec actuator names (by actuator or "
            "joint name); add them to the spec's actuators in driver order, or remove "
            "them from the file",
            spec.source,
        )


def _apply_joint_settings(s: mujoco.MjSpec, spec: RobotSpec, servos: list[Servo]) -> list[str]:
    """Spec armature, friction loss and range on the servos' joints; ``physical.joint_damping`` on all."""
    notes = []
    act = {a.name: a for a in spec.actuators}
    for sv in servos:
        if sv.trntype != mujoco.mjtTrn.mjTRN_JOINT:
            continue
        a, j = act[sv.name], s.joint(sv.target)
        if a.armature > 0:
            j.armature = a.armature
        if a.friction > 0:
            j.frictionloss = a.friction
        if a.range is not None:  # MJCF's default angle unit is degrees: the spec's radians are converted
            deg = s.compiler.degree and j.type == mujoco.mjtJoint.mjJNT_HINGE
            j.limited = mujoco.mjtLimited.mjLIMITED_TRUE
            j.range = [r * (180 / math.pi if deg else 1.0) for r in a.range]
    joints = [act[sv.name] for sv in servos if sv.trntype == mujoco.mjtTrn.mjTRN_JOINT]
    notes.append(
        f"joint armature from the {_origin(sum(a.armature > 0 for a in joints), len(joints))}, "
        f"friction loss from the {_origin(sum(a.friction > 0 for a in joints), len(joints))}"
    )
    if "joint_damping" in spec.physical:
        d = float(spec.physical["joint_damping"])
        for j in s.joints:
            if j.type in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
                j.damping = [d, *list(j.damping)[1:]]
        notes.append(f"joint damping {d:g} on every joint from the spec (physical.joint_damping)")
    else:
        notes.append("joint damping from the file (physical.joint_damping unset)")
    return notes


def _replace_actuators(s: mujoco.MjSpec, servos: list[Servo]) -> None:
    """The file's actuators out; the servos in, in spec order. Every field set here, so none
    comes from the file's default classes."""
    for a in list(s.actuators):
        s.delete(a)
    for sv in servos:
        a = s.add_actuator(name=sv.name, target=sv.target, trntype=sv.trntype)
        a.set_to_position(kp=sv.kp, kv=sv.kd)
        a.gear = [1.0, 0, 0, 0, 0, 0]
        a.ctrllimited, a.ctrlrange = mujoco.mjtLimited.mjLIMITED_TRUE, list(sv.ctrlrange)
        limited = math.isfinite(sv.force_limit)
        a.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE if limited else mujoco.mjtLimited.mjLIMITED_FALSE
        if limited:
            a.forcerange = [-sv.force_limit, sv.force_limit]
        a.armature, a.damping = 0.0, [0.0, 0.0, 0.0]
    for key in s.keys:  # the file's ctrl fits the file's actuators; _set_keyframes recomputes it
        key.ctrl = []


def _origin(n_spec: int, n: int) -> str:
    """Where n values came from, n_spec of them from the spec."""
    return "spec" if n_spec == n else "file" if n_spec == 0 else f"spec for {n_spec}, file for {n - n_spec}"


def _describe(servos: list[Servo]) -> list[str]:
    kinds: dict[str, int] = {}
    for sv in servos:
        kinds[sv.was] = kinds.get(sv.was, 0) + 1
    had = ", ".join(f"{n} {w}" for w, n in kinds.items())
    fields = ", ".join(
        f"{f} from the {_origin(sum(sv.source[f] == 'spec' for sv in servos), len(servos))}"
        for f in ("kp", "kd", "effort_limit", "range")
    )
    return [
        f"{len(servos)} actuators rebuilt as PD position servos in the spec's order (the file had: {had})",
        f"servo {fields} (spec values where set)",
    ]


# -- keyframes ------------------------------------------------------------------------------------
def _root_free_qpos(m: mujoco.MjModel) -> int:
    """qpos address of the free joint of a body hanging from the world, or -1."""
    for j in range(m.njnt):
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE and m.body_parentid[m.jnt_bodyid[j]] == 0:
            return int(m.jnt_qposadr[j])
    return -1


def _set_keyframes(s: mujoco.MjSpec, spec: RobotSpec, path: Path) -> str:
    """Build or keep ``home`` (module docstring) and give every key the set-points holding its pose."""
    m = compile_file(s, spec, path)
    d = mujoco.MjData(m)
    home = s.key("home")
    spec_pose = any(a.default != 0 for a in spec.actuators)
    if home is not None and not spec_pose:
        note = "keyframe 'home' from the file (the spec's defaults are all 0)"
    else:
        qpos = np.array(home.qpos if home is not None and len(home.qpos) else m.qpos0, float)
        for i, a in enumerate(spec.actuators):  # joint: q = default; tendon: its joints equal, sum c q = default
            t = m.actuator_trnid[i, 0]
            if m.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT:
                qpos[m.jnt_qposadr[t]] = a.default
            else:
                wraps = range(m.tendon_adr[t], m.tendon_adr[t] + m.tendon_num[t])
                for w in wraps:
                    qpos[m.jnt_qposadr[m.wrap_objid[w]]] = a.default / sum(m.wrap_prm[v] for v in wraps)
        pose = "the spec's default pose" if spec_pose else "the file's reference pose (spec defaults all 0)"
        z = _root_free_qpos(m)
        geoms = collision_geoms(m)
        if z >= 0 and len(geoms):
            d.qpos[:] = qpos
            mujoco.mj_kinematics(m, d)
            qpos[z + 2] -= lowest_z(m, d, geoms)
            pose += f", base at z = {qpos[z + 2]:.3f} m (lowest collision geom on the floor)"
        if home is None:
            home = s.add_key(name="home")
        home.qpos = qpos.tolist()
        note = f"keyframe 'home' built from {pose}"
    for key in s.keys:
        d.qpos[:] = key.qpos if len(key.qpos) else m.qpos0
        mujoco.mj_fwdPosition(m, d)
        key.ctrl = d.actuator_length.tolist()  # gear 1 servos: the length is the set-point
    return note
