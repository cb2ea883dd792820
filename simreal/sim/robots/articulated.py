"""Link/joint tables -> ``mujoco.MjSpec``: the shared builder behind the humanoid and arm models.

A robot is data: a tuple of :class:`Link` rows (body frame, inertial, joint, primitive geoms)
plus the actuated names in *driver order*. :func:`build_articulated` turns that table and a
:class:`~simreal.robot_spec.RobotSpec` into an ``MjSpec``; every number that a real setup tunes
(kp, kd, effort and joint limits, armature, friction, default pose, physics step) is read from
the spec, never repeated here.

What every model gets:
- a ``floor`` plane (friction ``physical.floor_friction``, default 1.0);
- per link a keypoint site named after the body without ``_link`` (``left_knee_link`` ->
  ``left_knee``), for retargeting;
- position actuators in the robot's driver order, named like the spec's actuators, with
  ``kp``, ``kv = kd``, ``forcerange = +-effort_limit`` and ``ctrlrange = range``;
- a ``home`` keyframe at the spec defaults; floating robots stand with the lowest point of
  their ``feet`` geoms on the floor;
- humanoids: ``imu_gyro``, ``imu_acc``, ``imu_quat`` sensors on their ``imu`` site.

Spec keys read: every actuator field but ``velocity_limit`` (MuJoCo has no joint speed limit;
deploy's safety layer enforces it), and ``physical.physics_dt_s`` (default 0.002 s),
``physical.floor_friction`` (1.0), ``physical.joint_damping`` (passive, all joints, 0.0) and
the constraint solver's caps ``physical.solver_iterations`` / ``physical.ls_iterations``
(MuJoCo's ``opt.iterations`` / ``opt.ls_iterations``, default 100 / 50). The caps bound MJX's
cost: its batched solver iterates until the slowest of thousands of envs has converged, or to
the cap, where the C engine stops each env at its own convergence.
The integrator is ``implicitfast`` so stiff ``kv`` stays stable at the spec's time step.

Held joints (a variant driving part of the robot, ``held`` in its spec): ``hold="weld"`` welds
each where the driver holds it (cheapest: no joint at all); ``hold="pd"`` keeps it a joint, pulled
to its target by the driver's PD as a MuJoCo spring and damper, ``tau = kp (target - q) - kd qdot``
(``stiffness = kp``, ``springref = target``, ``damping = kd`` plus ``physical.joint_damping``),
with the armature and range of the whole robot's actuator (``whole_robot``'s spec; no friction loss): the
arms and waist then sway under the gait as on the robot, whose driver holds them that way. The
spring is the PD without its motor's torque limit, which a hold this stiff never reaches.

Collision filtering: robot geoms have ``contype=2, conaffinity=1``, the floor and (by default)
task objects ``contype=conaffinity=1``; so the robot touches the world but not itself unless
``self_collision=True`` (parent/child pairs stay filtered by MuJoCo). ``floor_contact="feet"``
leaves only the ``feet`` geoms touching the world (MuJoCo Playground's "feet only" locomotion
scenes): a fallen robot's limbs then pass through the floor, which early termination hides in
training, and the contact rows MJX solves every step drop from every limb's to the soles'.

Frames follow MuJoCo: positions [m] in the parent body frame, quaternions wxyz.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import overload

import mujoco
import numpy as np

from simreal.errors import ConfigError
from simreal.robot_spec import ActuatorSpec, HeldJointSpec, RobotSpec, load_robot_spec
from simreal.sim.robots.floor import geom_lowest_z

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]

ROBOT_CONTYPE, ROBOT_CONAFFINITY = 2, 1
#: ``floor_contact`` -> whether a geom of that name touches the world (given the robot's feet).
FLOOR_CONTACT = {"all": lambda name, feet: True, "feet": lambda name, feet: name in feet}
#: how a variant models the joints its driver holds (module docstring)
HOLDS = ("weld", "pd")
_GEOM_TYPES = {
    "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE,
    "box": mujoco.mjtGeom.mjGEOM_BOX,
    "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
    "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
}


@dataclasses.dataclass(frozen=True)
class Geom:
    """A primitive collision+visual geom. ``size`` as MuJoCo: half-sizes / radius [m]."""

    type: str
    size: tuple[float, ...]
    pos: Vec3 = (0.0, 0.0, 0.0)
    quat: Quat = (1.0, 0.0, 0.0, 0.0)
    fromto: tuple[float, ...] | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.type not in _GEOM_TYPES:
            raise ValueError(f"geom type {self.type!r} is not a primitive; valid: {', '.join(_GEOM_TYPES)}")


@dataclasses.dataclass(frozen=True)
class Inertial:
    """Mass [kg] at ``com`` [m]; principal moments ``diag`` [kg m^2] along ``quat``, or ``full``
    = (ixx, iyy, izz, ixy, ixz, iyz) [kg m^2] in the body frame."""

    mass: float
    com: Vec3
    diag: Vec3 | None = None
    quat: Quat = (1.0, 0.0, 0.0, 0.0)
    full: tuple[float, float, float, float, float, float] | None = None


@dataclasses.dataclass(frozen=True)
class Link:
    """One body. ``joint`` None welds it to its parent; ``radius`` > 0 adds capsules [m] from the
    body origin to each child's origin (a capsule skeleton), on top of ``geoms``."""

    name: str
    parent: str | None
    pos: Vec3
    inertial: Inertial
    quat: Quat = (1.0, 0.0, 0.0, 0.0)
    joint: str | None = None
    axis: Vec3 = (0.0, 0.0, 1.0)
    slide: bool = False
    radius: float = 0.0
    geoms: tuple[Geom, ...] = ()


@dataclasses.dataclass(frozen=True)
class Site:
    """A named frame on ``body`` at ``pos`` [m] (imu, feet soles, end effector, extra keypoints)."""

    name: str
    body: str
    pos: Vec3 = (0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class Coupled:
    """One actuator driving several joints through a fixed tendon (length = sum coef * q), the
    joints held equal by an equality (a parallel gripper). The spec range is in tendon units."""

    name: str
    joints: tuple[str, ...]
    coefs: tuple[float, ...]

    @property
    def per_joint(self) -> float:
        """Joint position per unit of tendon length when the joints move together."""
        return 1.0 / sum(self.coefs)


@dataclasses.dataclass(frozen=True)
class Robot:
    """A whole robot table. ``actuated``: actuator names in driver order."""

    name: str
    links: tuple[Link, ...]
    actuated: tuple[str, ...]
    floating: bool = False
    sites: tuple[Site, ...] = ()
    feet: tuple[str, ...] = ()
    coupled: tuple[Coupled, ...] = ()
    imu_site: str | None = None


def keypoint_name(body: str) -> str:
    """Retargeting site name of a body: ``left_knee_link`` -> ``left_knee``."""
    return body[: -len("_link")] if body.endswith("_link") else body


@overload
def _mirror_vec(v: Vec3) -> Vec3: ...
@overload
def _mirror_vec(v: Sequence[float]) -> tuple[float, ...]: ...
def _mirror_vec(v: Sequence[float]) -> tuple[float, ...]:
    return tuple(-x if i % 3 == 1 else x for i, x in enumerate(v))  # negate every y


def _mirror_quat(q: Quat) -> Quat:
    w, x, y, z = q  # R -> M R M with M = diag(1, -1, 1)
    return (w, -x, y, -z)


def mirror(links: Iterable[Link], src: str = "left_", dst: str = "right_") -> tuple[Link, ...]:
    """Reflect links through the base's xz plane and rename ``src*`` -> ``dst*``.

    Joint axes are kept: Unitree (and most URDFs) use the same axes on both sides and mirror
    the joint ranges instead, which come from the spec.
    """

    @overload
    def ren(n: str) -> str: ...
    @overload
    def ren(n: str | None) -> str | None: ...
    def ren(n: str | None) -> str | None:
        return dst + n[len(src) :] if n and n.startswith(src) else n

    out = []
    for link in links:
        i = link.inertial
        full = None if i.full is None else (i.full[0], i.full[1], i.full[2], -i.full[3], i.full[4], -i.full[5])
        geoms = tuple(
            dataclasses.replace(
                g,
                pos=_mirror_vec(g.pos),
                quat=_mirror_quat(g.quat),
                name=ren(g.name),
                fromto=None if g.fromto is None else _mirror_vec(g.fromto),
            )
            for g in link.geoms
        )
        out.append(
            dataclasses.replace(
                link,
                name=ren(link.name),
                parent=ren(link.parent),
                joint=ren(link.joint),
                pos=_mirror_vec(link.pos),
                quat=_mirror_quat(link.quat),
                geoms=geoms,
                inertial=dataclasses.replace(i, com=_mirror_vec(i.com), quat=_mirror_quat(i.quat), full=full),
            )
        )
    return tuple(out)


def mirror_sites(sites: Iterable[Site], src: str = "left_", dst: str = "right_") -> tuple[Site, ...]:
    """Sites reflected like :func:`mirror`."""
    return tuple(Site(dst + s.name[len(src) :], dst + s.body[len(src) :], _mirror_vec(s.pos)) for s in sites)


def driver_order(robot: Robot, spec: RobotSpec, locked: Iterable[str] = ()) -> tuple[str, ...]:
    """The actuator names the model will have, in driver order; ConfigError if the spec differs.

    ``locked``: joints of the table that this variant welds (no joint, no actuator).
    """
    locked = set(locked)
    unknown_locked = locked - set(robot.actuated)
    if unknown_locked:
        raise ConfigError(
            "model.options",
            f"cannot lock {sorted(unknown_locked)}: not joints of {robot.name}; valid: {', '.join(robot.actuated)}",
            spec.source,
        )
    order = tuple(a for a in robot.actuated if a not in locked)
    names = spec.actuator_names
    unknown = [n for n in names if n not in order]
    if unknown:
        raise ConfigError(
            "actuators",
            f"{unknown} are not actuators of {robot.name} (this variant); valid, in driver order: {', '.join(order)}",
            spec.source,
        )
    missing = [n for n in order if n not in names]
    if missing:
        raise ConfigError(
            "actuators", f"missing {missing}; {robot.name} needs, in driver order: {', '.join(order)}", spec.source
        )
    if names != order:
        raise ConfigError(
            "actuators", f"order {list(names)} differs from {robot.name}'s driver order {list(order)}", spec.source
        )
    return order


def build_articulated(
    robot: Robot,
    spec: RobotSpec,
    *,
    locked: Iterable[str] = (),
    hold: str = "weld",
    fixed_base: bool = False,
    self_collision: bool = False,
    floor_contact: str = "all",
) -> mujoco.MjSpec:
    """Build the MjSpec of ``robot`` with gains, limits and defaults from ``spec``.

    Args:
      robot: the link table.
      spec: the robot spec (single source of truth for every tuned number).
      locked: joints welded in this variant (e.g. the 23-DoF G1's wrist pitch/yaw), at the spec's
        ``held`` target where it names the joint (the driver holds it there on the robot), else at 0.
      hold: ``weld`` or ``pd``: how the locked joints the spec ``held`` are modelled (module docstring).
      fixed_base: floating robots only: drop the free joint and pin the base at standing height.
      self_collision: let non-adjacent links collide with each other.
      floor_contact: ``all`` geoms or only the ``feet`` touch the floor and task objects.
    """
    if floor_contact not in FLOOR_CONTACT:
        raise ConfigError(
            "model.options.floor_contact",
            f"expected one of {', '.join(FLOOR_CONTACT)}, got {floor_contact!r}",
            spec.source,
        )
    if floor_contact != "all" and not robot.feet:
        raise ConfigError("model.options.floor_contact", f"{robot.name} has no feet geoms", spec.source)
    if hold not in HOLDS:
        raise ConfigError("model.options.hold", f"expected one of {', '.join(HOLDS)}, got {hold!r}", spec.source)
    locked = frozenset(locked)
    order = driver_order(robot, spec, locked)
    springs = held_springs(spec, locked) if hold == "pd" else {}
    locked -= springs.keys()
    act = {a.name: a for a in spec.actuators}
    phys = spec.physical
    s = mujoco.MjSpec()
    s.modelname = robot.name
    s.compiler.degree = False
    s.option.timestep = phys.get("physics_dt_s", 0.002)
    s.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST  # kv damping integrated implicitly
    set_solver_caps(s, phys)
    _add_floor(s, phys.get("floor_friction", 1.0))
    coupled = {c.name for c in robot.coupled}
    drives = {n: (act[n], 1.0) for n in order if n not in coupled}  # joint -> (spec actuator, joint per actuator unit)
    drives.update({j: (act[c.name], c.per_joint) for c in robot.coupled for j in c.joints})
    welded_at = {h.name: h.target for h in spec.held if h.name in locked}
    # armature and range, no actuator, home at the hold's target; no friction loss: 0.1 N m against a
    # hold of >= 20 N m/rad moves a joint 0.005 rad at most, and its 17 constraint rows cost a fifth of
    # the 12-DoF G1's step
    drives.update({n: (dataclasses.replace(a, friction=0.0, default=h.target), 1.0) for n, (a, h) in springs.items()})
    bodies = _add_bodies(
        s,
        robot,
        drives,
        locked,
        welded_at,
        free=robot.floating and not fixed_base,
        self_collision=self_collision,
        damping=phys.get("joint_damping", 0.0),
        touches_world=lambda name: FLOOR_CONTACT[floor_contact](name, robot.feet),
    )
    for name, (_, h) in springs.items():
        j = s.joint(name)
        j.stiffness, j.springref = [h.kp, 0.0, 0.0], h.target
        j.damping = [j.damping[0] + h.kd, 0.0, 0.0]
    _add_actuators(s, robot, [act[n] for n in order])
    if robot.imu_site is not None:
        for name, kind in (
            ("imu_gyro", mujoco.mjtSensor.mjSENS_GYRO),
            ("imu_acc", mujoco.mjtSensor.mjSENS_ACCELEROMETER),
            ("imu_quat", mujoco.mjtSensor.mjSENS_FRAMEQUAT),
        ):
            s.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=robot.imu_site)
    _add_home(
        s,
        robot,
        drives,
        [act[n].default for n in order],
        bodies[robot.links[0].name],
        free=robot.floating and not fixed_base,
    )
    return s


def held_springs(spec: RobotSpec, locked: frozenset[str]) -> dict[str, tuple[ActuatorSpec, HeldJointSpec]]:
    """Locked joint -> (the whole robot's actuator of it, its hold) for ``hold="pd"``; ConfigError
    when the spec names no ``whole_robot`` or that robot has no actuator of a held joint."""
    held = [h for h in spec.held if h.name in locked]
    if not held:
        return {}
    if not spec.whole_robot:
        raise ConfigError(
            "model.options.hold",
            "pd keeps the held joints as joints and takes their armature and range "
            "from the whole robot: set whole_robot",
            spec.source,
        )
    whole = {a.name: a for a in load_robot_spec(spec.whole_robot).actuators}
    missing = [h.name for h in held if h.name not in whole]
    if missing:
        raise ConfigError("held", f"{missing} are not actuators of the whole robot {spec.whole_robot!r}", spec.source)
    return {h.name: (whole[h.name], h) for h in held}


def set_solver_caps(s: mujoco.MjSpec, physical: dict[str, float]) -> bool:
    """``opt.iterations`` / ``opt.ls_iterations`` from ``physical.solver_iterations`` /
    ``ls_iterations`` where set (module docstring); whether either was."""
    s.option.iterations = int(physical.get("solver_iterations", s.option.iterations))
    s.option.ls_iterations = int(physical.get("ls_iterations", s.option.ls_iterations))
    return bool({"solver_iterations", "ls_iterations"} & set(physical))


def _add_bodies(
    s: mujoco.MjSpec,
    robot: Robot,
    drives: dict[str, tuple[ActuatorSpec, float]],
    locked: frozenset[str],
    welded_at: dict[str, float],
    *,
    free: bool,
    self_collision: bool,
    damping: float,
    touches_world: Callable[[str | None], bool],
) -> dict[str, mujoco.MjsBody]:
    """Bodies with inertials, joints, primitive geoms, keypoint sites and the extra sites; a
    locked hinge welds its body turned by ``welded_at`` [rad] about the joint's axis (the body's
    frame is the parent's times ``quat`` times that turn, as the joint would have put it).
    A geom that does not ``touches_world`` keeps only its self-collision bit (if any)."""
    children: dict[str, list[Link]] = {}
    for link in robot.links:
        children.setdefault(link.parent or "", []).append(link)
    bodies: dict[str, mujoco.MjsBody] = {}
    self_bit = ROBOT_CONTYPE if self_collision else 0
    for link in robot.links:  # tables list parents before children
        parent = s.worldbody if link.parent is None else bodies[link.parent]
        quat: Quat | np.ndarray = link.quat
        if link.joint in welded_at and not link.slide:
            turn = np.zeros(4)
            mujoco.mju_axisAngle2Quat(turn, np.asarray(link.axis, np.float64), welded_at[link.joint])
            quat = np.zeros(4)
            mujoco.mju_mulQuat(quat, np.asarray(link.quat, np.float64), turn)
        b = bodies[link.name] = parent.add_body(name=link.name, pos=link.pos, quat=quat)
        _set_inertial(b, link.inertial)
        if link.parent is None and free:
            b.add_freejoint(name="floating_base_joint")
        if link.joint is not None and link.joint not in locked:
            _add_joint(b, link, drives.get(link.joint), damping)
        segments = [
            Geom("capsule", (link.radius,), fromto=(0.0, 0.0, 0.0, *c.pos))
            for c in children.get(link.name, ())
            if link.radius > 0 and np.linalg.norm(c.pos) > 1e-3
        ]
        for g in (*link.geoms, *segments):
            world = touches_world(g.name)
            b.add_geom(
                name=g.name,
                type=_GEOM_TYPES[g.type],
                size=[*g.size, *[0.0] * (3 - len(g.size))],
                pos=g.pos,
                quat=g.quat,
                contype=ROBOT_CONTYPE if world else self_bit,
                conaffinity=(ROBOT_CONAFFINITY if world else 0) | self_bit,
                group=1,
                rgba=[0.55, 0.57, 0.6, 1.0],
                **({"fromto": g.fromto} if g.fromto is not None else {}),
            )
        b.add_site(name=keypoint_name(link.name), size=[0.01, 0, 0], group=4)
    for site in robot.sites:
        bodies[site.body].add_site(name=site.name, pos=site.pos, size=[0.01, 0, 0], group=4)
    return bodies


def _add_actuators(s: mujoco.MjSpec, robot: Robot, acts: list[ActuatorSpec]) -> None:
    """Position actuators (kp, kv = kd, +-effort, ctrlrange = range) in driver order; tendons for coupled ones."""
    coupled = {c.name: c for c in robot.coupled}
    for c in robot.coupled:
        t = s.add_tendon(name=c.name)
        for j, k in zip(c.joints, c.coefs):
            t.wrap_joint(j, k)
        for j in c.joints[1:]:  # polycoef (0, 1, 0, 0, 0): q_j = q_0
            s.add_equality(type=mujoco.mjtEq.mjEQ_JOINT, name1=c.joints[0], name2=j, data=[0, 1] + [0] * 10)
    for a in acts:
        trn = mujoco.mjtTrn.mjTRN_TENDON if a.name in coupled else mujoco.mjtTrn.mjTRN_JOINT
        m = s.add_actuator(name=a.name, target=a.name, trntype=trn)
        m.set_to_position(kp=a.kp, kv=a.kd)
        m.forcelimited, m.forcerange = mujoco.mjtLimited.mjLIMITED_TRUE, [-a.effort_limit, a.effort_limit]
        if a.range is not None:
            m.ctrllimited, m.ctrlrange = mujoco.mjtLimited.mjLIMITED_TRUE, list(a.range)


def _add_floor(s: mujoco.MjSpec, friction: float) -> None:
    s.add_texture(
        name="grid",
        type=mujoco.mjtTexture.mjTEXTURE_2D,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        rgb1=[0.2, 0.3, 0.4],
        rgb2=[0.1, 0.2, 0.3],
        width=300,
        height=300,
    )
    s.add_material(name="grid", textures=["", "grid"], texrepeat=[5, 5], texuniform=True)
    s.worldbody.add_geom(
        name="floor",
        type=mujoco.mjtGeom.mjGEOM_PLANE,
        size=[0, 0, 0.05],
        material="grid",
        friction=[friction, 0.005, 0.0001],
        contype=1,
        conaffinity=1,
    )
    s.worldbody.add_light(name="sun", pos=[0, 0, 4], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)


def _set_inertial(b: mujoco.MjsBody, i: Inertial) -> None:
    b.explicitinertial = True
    b.mass, b.ipos = i.mass, i.com
    if i.full is not None:
        b.fullinertia = i.full
    else:
        b.inertia, b.iquat = i.diag, i.quat


def _add_joint(b: mujoco.MjsBody, link: Link, drive: tuple[ActuatorSpec, float] | None, damping: float) -> None:
    """Hinge/slide joint; range, armature and friction from the spec actuator driving it."""
    kind = mujoco.mjtJoint.mjJNT_SLIDE if link.slide else mujoco.mjtJoint.mjJNT_HINGE
    j = b.add_joint(name=link.joint, axis=link.axis, type=kind)
    j.damping = [damping, 0.0, 0.0]
    if drive is None:
        return
    a, scale = drive
    j.armature, j.frictionloss = a.armature, a.friction
    if a.range is not None:
        j.limited, j.range = mujoco.mjtLimited.mjLIMITED_TRUE, [a.range[0] * scale, a.range[1] * scale]


def _add_home(
    s: mujoco.MjSpec,
    robot: Robot,
    drives: dict[str, tuple[ActuatorSpec, float]],
    ctrl: list[float],
    root: mujoco.MjsBody,
    *,
    free: bool,
) -> None:
    """Keyframe ``home`` at the spec defaults; a robot with feet is lifted so they touch the floor."""
    if robot.feet:
        root.pos = [0.0, 0.0, 0.0]
    m = s.compile()
    d = mujoco.MjData(m)
    for joint, (a, scale) in drives.items():
        d.qpos[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)]] = a.default * scale
    if robot.feet:
        mujoco.mj_kinematics(m, d)
        height = -min(geom_lowest_z(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, g)) for g in robot.feet)
        root.pos = [0.0, 0.0, height]
        if free:
            d.qpos[2] = height
    s.add_key(name="home", qpos=d.qpos.tolist(), ctrl=ctrl)
