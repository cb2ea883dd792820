"""The robot side of retargeting: model, keypoint frames, limits, feet and collision filter.

:func:`load_robot` accepts a shipped robot (``g1``, ``h1``: the robot spec and its builder,
shared with ``simreal/sim/``), a robot spec YAML, or a user's MJCF / URDF file, and returns a
:class:`RetargetRobot`: a compiled MuJoCo model prepared for retargeting plus everything
the solvers look up by name once:

- keypoint sites from the keypoint map (sites added for ``body`` + ``pos`` targets);
- actuated joints in driver order with position limits [rad] and velocity limits [rad/s]
  (from the robot spec; a user model takes ``velocity_limit_rad_s`` from its map), the position
  limits narrowed by the map's ``joint_ranges``;
- a floor plane and the scene's boxes, and self-collision switched on for robot geoms
  except body pairs that are adjacent in the kinematic tree (geom-less bodies such as a
  waist's yaw/roll links skipped) or already touching in the home pose;
- per foot: the sole site, the site height when the foot rests flat on the ground, and the
  site axis that points up then.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simreal.errors import ConfigError
from simreal.retarget.contacts import HEEL, pinned_edge
from simreal.retarget.keypoint_map import KeypointMap, default_map_path, load_keypoint_map
from simreal.retarget.scene import SCENE_CONAFFINITY, SCENE_CONTYPE, Scene, add_to_spec
from simreal.robot_spec import RobotSpec, available_robots, load_robot_spec

ROBOT_CONTYPE, ROBOT_CONAFFINITY = 2, 3  # robot <-> robot and robot <-> world (contype 1)
TOUCHING_AT_HOME_M = 0.005


@dataclasses.dataclass
class RetargetRobot:
    """A robot prepared for retargeting; see the module docstring.

    Attributes (n actuated joints, K keypoints):
      joint_names: (n,) in driver order; qpos_adr, dof_adr: (n,) addresses in qpos / qvel.
      q_lower, q_upper: (n,) position limits [rad]; v_max: (n,) velocity limits [rad/s].
      q_home: (nq,) standing pose, feet flat on the floor.
      keypoints: (K,) canonical names; site_ids: (K,); pos_weights, rot_weights: (K,).
      foot_sites: (2,) sole sites (left, right); foot_geoms: each foot's collision geoms;
        sole_height: (2,) site z [m] with the foot flat
        on flat ground; foot_up_local: (2, 3) site-frame axis that is world +z then;
        foot_left_local: (2, 3) the one that is world +y then (the sole's lateral axis);
        ball_local, heel_local: (2, 3) site-frame points on the front and back edges of the
        sole's bottom, on the foot's centre line: a stance foot is pinned at one of them (robot
        soles are rigid: :meth:`pinned_local`) and the other may not go below the ground.
      floor_geom: the ground plane; robot_geoms: collision geoms on robot bodies.
      excluded_pairs: body-name pairs whose self-collision is filtered.
    """

    name: str
    model: mujoco.MjModel
    kmap: KeypointMap
    scene: Scene
    joint_names: tuple[str, ...]
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    q_lower: np.ndarray
    q_upper: np.ndarray
    v_max: np.ndarray
    q_home: np.ndarray
    keypoints: tuple[str, ...]
    site_ids: np.ndarray
    pos_weights: np.ndarray
    rot_weights: np.ndarray
    foot_sites: np.ndarray
    foot_geoms: tuple[np.ndarray, np.ndarray]
    sole_height: np.ndarray
    foot_up_local: np.ndarray
    foot_left_local: np.ndarray
    ball_local: np.ndarray
    heel_local: np.ndarray
    floor_geom: int
    robot_geoms: np.ndarray
    excluded_pairs: tuple[tuple[str, str], ...]
    source: dict[str, Any]

    def keypoint_index(self, name: str) -> int:
        return self.keypoints.index(name)

    @property
    def foot_keypoints(self) -> list[int]:
        """The left and right foot's keypoint indices (the order of ``Targets.contacts``)."""
        return [self.keypoint_index("left_foot"), self.keypoint_index("right_foot")]

    def ball_points(self, site_pos: np.ndarray, site_rot: np.ndarray, local: np.ndarray | None = None) -> np.ndarray:
        """(..., 2, 3) world position of a point of each sole (``local`` (2, 3) in the sole sites'
        frames, or (..., 2, 3) per frame; default ``ball_local``), from every site's world
        positions (..., S, 3) and orientations (..., S, 3, 3)."""
        rot = site_rot[..., self.foot_sites, :, :]
        local = self.ball_local if local is None else local
        return site_pos[..., self.foot_sites, :] + np.einsum("...fab,...fb->...fa", rot, local)

    def pinned_local(self, pivot: np.ndarray | int) -> np.ndarray:
        """(..., 2, 3) the sole point each stance foot is pinned at, in its site's frame, from the
        pivot labels (..., 2) (``Targets.pivot``; :func:`~simreal.retarget.contacts.pinned_edge`)."""
        return np.where((pinned_edge(pivot) == HEEL)[..., None], self.heel_local, self.ball_local)

    def free_local(self, pivot: np.ndarray | int) -> np.ndarray:
        """(..., 2, 3) the other edge of each sole (:meth:`pinned_local`): the one that may lift."""
        return np.where((pinned_edge(pivot) == HEEL)[..., None], self.ball_local, self.heel_local)

    @property
    def body_names(self) -> tuple[str, ...]:
        """Every body except the world, in model order."""
        return tuple(self.model.body(i).name for i in range(1, self.model.nbody))


def _mjspec_for(robot: str) -> tuple[mujoco.MjSpec, RobotSpec | None, str, Path | None]:
    """(MjSpec, robot spec or None, robot name, model file or None)."""
    from simreal.sim.robots import build_mjspec

    p = Path(robot).expanduser()
    if p.suffix.lower() in (".xml", ".urdf", ".mjcf"):
        if not p.is_file():
            raise ConfigError("robot", f"model file not found: {p}")
        try:
            spec = mujoco.MjSpec.from_file(str(p))
        except Exception as e:  # MuJoCo's parser raises ValueError with its own message
            raise ConfigError("robot", f"MuJoCo could not load {p}: {e}") from None
        return spec, None, p.stem, p
    if p.suffix.lower() not in (".yaml", ".yml") and robot not in available_robots():
        # only robots with a shipped keypoint map retarget as they are (an arm or a quadrotor has none)
        shipped = [r for r in available_robots() if default_map_path(load_robot_spec(r).keypoint_map or r).is_file()]
        raise ConfigError(
            "robot",
            f"unknown robot {robot!r}; valid: {', '.join(shipped)}, "
            "a robot spec .yaml, or an MJCF (.xml) / URDF (.urdf) file",
        )
    rspec = load_robot_spec(robot)
    if rspec.whole_robot:
        # a spec that drives part of a robot (g1_12dof: g1's legs, the rest held) retargets onto the
        # whole robot: the human moves every limb, and the clip plays on the part's driven joints
        rspec = load_robot_spec(rspec.whole_robot)
    return build_mjspec(rspec), rspec, rspec.name, None


def _ensure_free_root(spec: mujoco.MjSpec) -> None:
    root = spec.worldbody.first_body()
    if root is None:
        raise ConfigError("robot", "the model has no bodies")
    if not any(j.type == mujoco.mjtJoint.mjJNT_FREE for j in root.joints):
        if len(root.joints):
            raise ConfigError(
                "robot", f"root body {root.name!r} has joints but no free joint; retargeting needs a floating base"
            )
        root.add_freejoint(name="floating_base_joint")


def _prepare_spec(spec: mujoco.MjSpec, kmap: KeypointMap, scene: Scene) -> None:
    """Keypoint sites, floor, scene boxes, and collision bits for self-collision."""
    for name, t in kmap.keypoints.items():
        if t.body is not None:
            body = spec.body(t.body)
            if body is None:
                raise ConfigError(f"keypoints.{name}.body", f"no body {t.body!r} in the model", kmap.source)
            body.add_site(name=f"kp_{name}", pos=list(t.pos), size=[0.01, 0, 0], group=4)
    if not any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in spec.worldbody.geoms):
        spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05])
    for g in spec.worldbody.geoms:
        if g.contype or g.conaffinity:
            g.contype, g.conaffinity = SCENE_CONTYPE, SCENE_CONAFFINITY
    add_to_spec(spec, scene)
    for b in spec.worldbody.find_all(mujoco.mjtObj.mjOBJ_BODY):
        for g in b.geoms:
            if g.contype or g.conaffinity:
                g.contype, g.conaffinity = ROBOT_CONTYPE, ROBOT_CONAFFINITY


def _joints(m: mujoco.MjModel) -> list[int]:
    """Actuated joint ids in actuator (driver) order, else every hinge/slide joint."""
    ids = [int(m.actuator_trnid[a, 0]) for a in range(m.nu) if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT]
    if not ids:
        kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        ids = [j for j in range(m.njnt) if int(m.jnt_type[j]) in kinds]
    return ids


def _home(m: mujoco.MjModel, rspec: RobotSpec | None, jids: list[int]) -> np.ndarray:
    key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
    q = m.key_qpos[key].copy() if key >= 0 else m.qpos0.copy()
    if key < 0 and rspec is not None:
        for a in rspec.actuators:
            j = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, a.name)
            if j >= 0:
                q[m.jnt_qposadr[j]] = a.default
    return q


def _body_tree_distance(m: mujoco.MjModel, has_geom: np.ndarray) -> np.ndarray:
    """Tree distance between bodies counting only geom-carrying bodies as steps."""
    nb = m.nbody
    chain = []
    for b in range(nb):
        path, x = [], b
        while x > 0:
            path.append(x)
            x = int(m.body_parentid[x])
        chain.append(path)
    dist = np.zeros((nb, nb), dtype=int)
    for a, b in itertools.combinations(range(1, nb), 2):
        pa, pb = chain[a], chain[b]
        common = set(pa) & set(pb)
        between = [x for x in pa if x not in common] + [x for x in pb if x not in common]
        lca = next((x for x in pa if x in common), 0)
        hops = sum(1 for x in between if has_geom[x] and x not in (a, b))
        hops += 1 if has_geom[lca] and lca not in (a, b) else 0
        dist[a, b] = dist[b, a] = hops + 1
    return dist


def _exclusions(m: mujoco.MjModel, q_home: np.ndarray, robot_geoms: np.ndarray) -> list[tuple[int, int]]:
    has_geom = np.zeros(m.nbody, dtype=bool)
    has_geom[m.geom_bodyid[robot_geoms]] = True
    tree = _body_tree_distance(m, has_geom)
    d = mujoco.MjData(m)
    d.qpos[:] = q_home
    mujoco.mj_kinematics(m, d)
    out = set()
    for g1, g2 in itertools.combinations(robot_geoms, 2):
        b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
        if b1 == b2:
            continue
        pair = (min(b1, b2), max(b1, b2))
        if pair in out:
            continue
        if tree[b1, b2] <= 2 or mujoco.mj_geomDistance(m, d, g1, g2, 0.1, None) < TOUCHING_AT_HOME_M:
            out.add(pair)
    return sorted(out)


def subtree_geoms(m: mujoco.MjModel, site: int, geoms: np.ndarray) -> np.ndarray:
    """Those of ``geoms`` on the site's body and its descendants (a foot, a forearm, a hand)."""
    body = int(m.site_bodyid[site])
    return np.array(
        [int(g) for g in geoms if int(m.geom_bodyid[g]) == body or _is_descendant(m, int(m.geom_bodyid[g]), body)],
        dtype=int,
    )


def _foot_geoms(m: mujoco.MjModel, site: int, robot_geoms: np.ndarray) -> np.ndarray:
    """Collision geoms on the foot site's body and its descendants."""
    feet = subtree_geoms(m, site, robot_geoms)
    if not len(feet):
        raise ConfigError("keypoints", f"the body of foot site {m.site(site).name!r} has no collision geom")
    return feet


def _foot_geometry(m: mujoco.MjModel, q: np.ndarray, site: int, floor: int, feet: np.ndarray):
    """(site height [m], gap from the foot's lowest collision geom to the floor [m], the site-frame
    axis that points up) in pose ``q``."""
    d = mujoco.MjData(m)
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    gap = min(mujoco.mj_geomDistance(m, d, int(g), floor, 1.0, None) for g in feet)
    up = d.site_xmat[site].reshape(3, 3).T @ np.array([0.0, 0.0, 1.0])
    return float(d.site_xpos[site, 2]), float(gap), up


def _sole_edges(
    m: mujoco.MjModel, q: np.ndarray, site: int, geoms: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the sole's front-edge point, its back-edge point, the world +y axis) in the site's frame, in
    pose ``q`` (the home pose, facing +x, feet flat): the corners of the foot geoms' bounding boxes
    that lie at the bottom, the foremost and the rearmost of them, brought onto the site's centre
    line."""
    d = mujoco.MjData(m)
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    corners = []
    for g in geoms:
        centre, half = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
        local = centre + half * np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T
        corners.append(d.geom_xpos[g] + local @ d.geom_xmat[g].reshape(3, 3).T)
    c = np.concatenate(corners)
    bottom = c[c[:, 2] < c[:, 2].min() + 0.002]
    p, rot = d.site_xpos[site], d.site_xmat[site].reshape(3, 3)
    edge = [np.array([x, p[1], bottom[:, 2].min()]) for x in (bottom[:, 0].max(), bottom[:, 0].min())]
    return rot.T @ (edge[0] - p), rot.T @ (edge[1] - p), rot.T @ np.array([0.0, 1.0, 0.0])


def _is_descendant(m: mujoco.MjModel, b: int, ancestor: int) -> bool:
    while b > 0:
        b = int(m.body_parentid[b])
        if b == ancestor:
            return True
    return False


def load_robot(
    robot: str, keypoint_map: str | Path | None = None, scene: Scene | None = None, overrides: dict | None = None
) -> RetargetRobot:
    """Load a robot for retargeting.

    Args:
      robot: ``g1``, ``h1`` (any shipped robot spec), a robot spec ``.yaml``, or an MJCF
        ``.xml`` / URDF ``.urdf`` file. A spec with a ``whole_robot`` (``g1_12dof``) retargets
        onto that robot: its clip plays on the variant (``Motion.robot_columns``).
      keypoint_map: the map YAML; default ``configs/retarget/<name>.yaml``, the name the robot
        spec's ``keypoint_map`` gives, else the robot's.
      scene: boxes to add; default flat ground only.
      overrides: nested mapping merged over the map (solver settings: ``{"interaction": {...}}``).
    """
    scene = scene or Scene()
    spec, rspec, name, model_file = _mjspec_for(robot)
    kmap = load_keypoint_map(keypoint_map or default_map_path(rspec.keypoint_map or name if rspec else name), overrides)
    _ensure_free_root(spec)
    _prepare_spec(spec, kmap, scene)
    m = spec.compile()
    jids = _joints(m)
    v_default = kmap.velocity_limit_rad_s if kmap.velocity_limit_rad_s is not None else np.inf
    jnames, v_max, lo, hi = [], [], [], []
    for j in jids:
        jn = m.joint(j).name
        jnames.append(jn)
        v = v_default
        if rspec is not None and jn in rspec.actuator_names and np.isfinite(rspec.actuator(jn).velocity_limit):
            v = rspec.actuator(jn).velocity_limit
        v_max.append(v)
        limited = bool(m.jnt_limited[j])
        narrow = kmap.joint_ranges.get(jn, (-np.inf, np.inf))
        lo.append(max(m.jnt_range[j, 0] if limited else -np.inf, narrow[0]))
        hi.append(min(m.jnt_range[j, 1] if limited else np.inf, narrow[1]))
        if lo[-1] >= hi[-1]:
            own = m.jnt_range[j].tolist() if limited else [-np.inf, np.inf]
            raise ConfigError(
                f"joint_ranges.{jn}", f"{list(narrow)} leaves nothing of the robot's range {own} [rad]", kmap.source
            )
    unknown = sorted(set(kmap.joint_ranges) - set(jnames))
    if unknown:
        raise ConfigError(
            f"joint_ranges.{unknown[0]}", f"no actuated joint of that name; valid: {', '.join(jnames)}", kmap.source
        )
    q_home = _home(m, rspec, jids)
    q_home[m.jnt_qposadr[jids]] = np.clip(q_home[m.jnt_qposadr[jids]], lo, hi)
    floor = next(g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE)
    robot_geoms = np.array([g for g in range(m.ngeom) if m.geom_bodyid[g] > 0 and m.geom_contype[g]], dtype=int)
    pairs = _exclusions(m, q_home, robot_geoms)
    for b1, b2 in pairs:
        spec.add_exclude(bodyname1=m.body(b1).name, bodyname2=m.body(b2).name)
    m = spec.compile()

    site_ids, keypoints = [], []
    for kp, t in kmap.keypoints.items():
        sname = t.site if t.site is not None else f"kp_{kp}"
        sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, sname)
        if sid < 0:
            valid = [m.site(i).name for i in range(m.nsite) if not m.site(i).name.startswith("kp_")]
            raise ConfigError(
                f"keypoints.{kp}.site", f"no site {sname!r} in the model; valid: {', '.join(valid)}", kmap.source
            )
        site_ids.append(sid)
        keypoints.append(kp)
    feet = np.array([site_ids[keypoints.index("left_foot")], site_ids[keypoints.index("right_foot")]])
    foot_geoms = (_foot_geoms(m, int(feet[0]), robot_geoms), _foot_geoms(m, int(feet[1]), robot_geoms))
    # Stand the home pose on the floor (lowest foot touching), then read the soles' flat-foot height.
    q_home[2] -= min(_foot_geometry(m, q_home, int(f), floor, g)[1] for f, g in zip(feet, foot_geoms))
    info = [_foot_geometry(m, q_home, int(f), floor, g) for f, g in zip(feet, foot_geoms)]
    edges = [_sole_edges(m, q_home, int(f), g) for f, g in zip(feet, foot_geoms)]
    pw = np.array([kmap.keypoints[k].position_weight for k in keypoints])
    rw = np.array([kmap.keypoints[k].orientation_weight for k in keypoints])
    source = {
        "robot": name,
        "robot_spec": rspec.source if rspec else None,
        "model_file": str(model_file) if model_file else None,
        "keypoint_map": kmap.source,
    }
    return RetargetRobot(
        name=name,
        model=m,
        kmap=kmap,
        scene=scene,
        joint_names=tuple(jnames),
        qpos_adr=m.jnt_qposadr[jids].astype(int),
        dof_adr=m.jnt_dofadr[jids].astype(int),
        q_lower=np.array(lo),
        q_upper=np.array(hi),
        v_max=np.array(v_max, dtype=float),
        q_home=q_home,
        keypoints=tuple(keypoints),
        site_ids=np.array(site_ids),
        pos_weights=pw,
        rot_weights=rw,
        foot_sites=feet,
        foot_geoms=foot_geoms,
        sole_height=np.array([z - gap for z, gap, _ in info]),
        foot_up_local=np.array([up for _, _, up in info]),
        foot_left_local=np.array([e[2] for e in edges]),
        ball_local=np.array([e[0] for e in edges]),
        heel_local=np.array([e[1] for e in edges]),
        floor_geom=floor,
        robot_geoms=robot_geoms,
        excluded_pairs=tuple((m.body(a).name, m.body(b).name) for a, b in pairs),
        source=source,
    )
