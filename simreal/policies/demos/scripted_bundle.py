"""An arm task's scripted controller as a bundle: a classical controller that deploys like a policy.

    out = export_scripted(cfg, env, Path("bundles/arm-push-scripted"))   # bundle.yaml + policy.onnx
    simreal train arm-push residual.base=scripted                         # the residual's frozen base

The graph maps the task's raw observation to its normalised action, as every bundle's does,
and runs the scripted teacher's rule (``teachers.SCRIPTED_RULES``: where the end effector goes
next, and whether the gripper closes) on what the robot *observes* (joint positions, the
object's and the goal's positions), not on the simulator's privileged state the teachers of
``simreal demos`` read. Per control step:

    q        = default + joint_pos_rel                 joints of the site's chain [rad]
    p, R     = FK(q)                                   the ``end_effector`` site in world
    p*, grip = rule(p, object, goal)                   the teacher's rule, moved at most step_m
    u        = q, then ITERATIONS times:               damped least squares, fingers down
               A  = [J_p; w_r J_r]    e = [p* - p(u); w_r (z(u) x z*)]
               u <- clip(u + (A^T A + lambda^2 I)^-1 A^T e, lo, hi)
    action   = (u - home) / action_scale on the chain's joints, ``grip`` on the others

with ``lambda`` and ``[lo, hi]`` (the action box) those of ``arm_ik``. ``arm_ik.SiteIK`` solves
the same problem with bounds inside the solve (BVLS); ONNX has no bounded solver, so the graph
clips after each damped step, as most Jacobian controllers do. The forward kinematics are built
from the MuJoCo model's own arrays (body offsets, joint axes and anchors, ``qpos0``), the same
composition ``mj_kinematics`` makes, and the 7x7 solve is an unrolled Cholesky factorisation:
written here because no maintained library turns a MuJoCo chain into ONNX operators
(pytorch_kinematics traces Python objects the TorchScript exporter cannot follow, and ONNX's
standard operators have no linear solve).

Why a bundle: ``trainer: residual`` trains over any bundle (``residual.base``), composes both
graphs into one on export and deploys that like any policy; and the controller alone is a
baseline that runs on the robot through ``simreal deploy`` before anything is trained.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import onnx
import torch

from simreal.errors import ConfigError
from simreal.policies.demos.arm_ik import DAMPING_M, ArmIK, SiteIK
from simreal.policies.demos.teachers import DOWN, SCRIPTED, PickTeacher, PushTeacher
from simreal.rotations import quat_to_rotmat

#: Damped least-squares steps per control step (the teachers' BVLS solve takes ``arm_ik.ITERATIONS``).
ITERATIONS = 3
#: Weight of the pointing error against the position error [m/rad] (``SiteIK.solve``'s ``w_rot``).
W_ROT = 0.3


def _cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a x b over the last axis (3,), written out: the exporter's ``linalg_cross`` is not in opset 17."""
    return torch.stack(
        [
            a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
            a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
            a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
        ],
        -1,
    )


def cholesky_solve(M: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x with ``M x = b`` for symmetric positive definite ``M`` (..., n, n), ``b`` (..., n): the
    Cholesky factor ``L L^T = M`` column by column, then forward and back substitution, each loop
    unrolled at trace time into elementwise operators."""
    n = M.shape[-1]
    L: list[list[Any]] = [[None] * n for _ in range(n)]
    for j in range(n):
        d = M[..., j, j] - sum((L[j][k] * L[j][k] for k in range(j)), torch.zeros_like(M[..., j, j]))
        L[j][j] = torch.sqrt(d)
        for i in range(j + 1, n):
            s = M[..., i, j] - sum((L[i][k] * L[j][k] for k in range(j)), torch.zeros_like(M[..., i, j]))
            L[i][j] = s / L[j][j]
    y: list[Any] = []
    for i in range(n):
        y.append((b[..., i] - sum((L[i][k] * y[k] for k in range(i)), torch.zeros_like(b[..., i]))) / L[i][i])
    x: list[Any] = [None] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum((L[k][i] * x[k] for k in range(i + 1, n)), torch.zeros_like(b[..., i]))) / L[i][i]
    return torch.stack(x, -1)


class SiteChain(torch.nn.Module):
    """Forward kinematics of a site over the hinge joints of its body chain, batched (torch).

    ``forward(q)`` with ``q`` (B, n) the chain's joint positions (``SiteIK.joints`` order) gives
    the site's position (B, 3) and rotation (B, 3, 3), and each joint's world axis and anchor
    (B, n, 3), from which the Jacobian columns are ``J_p = a x (p - x)``, ``J_r = a``. Bodies
    compose as MuJoCo's ``mj_kinematics`` does: ``R = R_parent R_body``, ``x = x_parent + R_parent
    pos_body``, then each hinge turns the frame by ``q - qpos0`` about its axis through its anchor.
    """

    def __init__(self, model: mujoco.MjModel, ik: SiteIK):
        super().__init__()
        m = model
        chain, b = [], int(m.site_bodyid[ik.site])
        while b > 0:
            chain.append(b)
            b = int(m.body_parentid[b])
        var = {int(m.actuator_trnid[a, 0]): k for k, a in enumerate(ik.joints)}

        def f32(v: Any) -> torch.Tensor:
            return torch.tensor(np.asarray(v), dtype=torch.float32)

        #: ("body", (offset, rotation)) and ("hinge", (variable, axis, anchor offset, K, qpos0)) from the root
        self.steps: list[tuple[str, tuple[Any, ...]]] = []
        for b in reversed(chain):
            self.steps.append(
                ("body", (f32(m.body_pos[b]), f32(quat_to_rotmat(np.asarray(m.body_quat[b], np.float64), np))))
            )
            for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
                if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE or j not in var:
                    raise ConfigError(
                        "robot",
                        f"joint {m.joint(j).name!r} on the end effector's chain is not an actuated "
                        "hinge: the scripted controller's kinematics take hinges only",
                    )
                a = m.jnt_axis[j]
                K = [[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]]  # K v = axis x v
                self.steps.append(
                    ("hinge", (var[j], f32(a), f32(m.jnt_pos[j]), f32(K), float(m.qpos0[m.jnt_qposadr[j]])))
                )
        self.site_pos = f32(m.site_pos[ik.site])
        self.site_rot = f32(quat_to_rotmat(np.asarray(m.site_quat[ik.site], np.float64), np))
        self.n = len(ik.joints)

    def forward(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        B = q.shape[0]
        R = torch.eye(3).expand(B, 3, 3)
        x = torch.zeros(B, 3)
        axes: list[Any] = [None] * self.n  # each joint's, set at its hinge below
        anchors: list[Any] = [None] * self.n
        for kind, p in self.steps:
            if kind == "body":
                x = x + R @ p[0]
                R = R @ p[1]
                continue
            k, axis, jpos, K, q0 = p
            anchor = x + R @ jpos
            axes[k], anchors[k] = R @ axis, anchor
            angle = (q[:, k] - q0)[:, None, None]
            R = R @ (torch.eye(3) + torch.sin(angle) * K + (1.0 - torch.cos(angle)) * (K @ K))  # Rodrigues
            x = anchor - R @ jpos
        return x + R @ self.site_pos, R @ self.site_rot, torch.stack(axes, 1), torch.stack(anchors, 1)


@dataclasses.dataclass(frozen=True)
class GraphRule:
    """A task's scripted rule as the graph runs it.

    Attributes:
      target: ``(ee, object, goal, opening, half) -> (site target (B, 3), gripper command (B,))``
        on torch tensors: the teacher's own rule (``teachers``), the gripper -1 closed, 1 open.
      pointing: keep the site's z axis down (the fingers vertical), as the teacher does.
      step_m: largest move of the site's target per control step [m]; None: the target itself.
      uses_object: the rule reads ``object_pos_w``.
    """

    target: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    pointing: bool
    step_m: float | None
    uses_object: bool


def _pick(ee, obj, goal, opening, half):
    target, close = PickTeacher.rule(ee, obj, goal, opening, half, torch)
    return target, torch.where(close, -1.0, 1.0)


#: task -> the rule its graph runs (``teachers.SCRIPTED``'s controllers on the observation).
RULES: dict[str, GraphRule] = {
    "arm-reach": GraphRule(
        lambda ee, obj, goal, opening, half: (goal, torch.zeros_like(goal[:, 0])),
        pointing=False,
        step_m=None,
        uses_object=False,
    ),
    "arm-push": GraphRule(
        lambda ee, obj, goal, opening, half: (
            PushTeacher.rule(ee, obj, goal, half, torch),
            -torch.ones_like(goal[:, 0]),
        ),
        pointing=True,
        step_m=PushTeacher.STEP_M,
        uses_object=True,
    ),
    "arm-pick": GraphRule(_pick, pointing=True, step_m=PickTeacher.STEP_M, uses_object=True),
}


class ScriptedArmGraph(torch.nn.Module):
    """``forward(obs) -> action``: the module docstring's controller for ``env`` of ``task``.

    ConfigError naming ``task`` for a task without a graph rule (listing those with one), and the
    teacher's own ConfigErrors (``env.action_scale`` when the fingers cannot reach the table,
    ``robot`` for a gripper the pick cannot use).
    """

    def __init__(self, env: Any, task: str):
        super().__init__()
        if task not in RULES:
            raise ConfigError("task", f"no scripted controller graph for {task}; tasks with one: {', '.join(RULES)}")
        SCRIPTED[task](env)  # the teacher's checks of the robot and the action box
        self.rule = RULES[task]
        ik = ArmIK(env)
        self.chain = SiteChain(env.mj_model, ik)
        at, off = {}, 0
        for term in env.obs_layout:
            at[term["name"]] = slice(off, off + int(term["size"]))
            off += int(term["size"])
        need = ("joint_pos_rel", "target_pos_w") + (("object_pos_w",) if self.rule.uses_object else ())
        missing = [n for n in need if n not in at]
        if missing:
            raise ConfigError(
                "env", f"{task}'s observation has no {', '.join(missing)}, which its scripted controller reads"
            )
        # the newest frame leads a stacked observation: the controller reads it, the graph takes all
        self.at, self.obs_size = at, off * env.cfg.obs_history_steps
        self.nu = nu = int(env.mj_model.nu)
        self.joints = [int(j) for j in ik.joints]
        self.others = [i for i in range(nu) if i not in self.joints]
        f32: dict[str, Any] = dict(dtype=torch.float32)
        self.default = torch.tensor(np.asarray(env.default_joint_pos), **f32)
        self.home = torch.tensor(np.asarray(ik.home), **f32)
        self.lo, self.hi = torch.tensor(ik.lo, **f32), torch.tensor(ik.hi, **f32)
        # half_size, not half: that name is nn.Module.half(), the cast to float16
        self.scale, self.half_size = float(ik.scale), float(getattr(env.cfg, "object_half_size_m", 0.0))
        self.down = torch.tensor(DOWN, **f32)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        jp = self.default + obs[:, self.at["joint_pos_rel"]]
        q = jp[:, self.joints]
        ee = self.chain(q)[0]
        obj = obs[:, self.at["object_pos_w"]] if self.rule.uses_object else ee
        opening = jp[:, self.others].sum(-1) if self.others else torch.zeros_like(ee[:, 0])
        target, grip = self.rule.target(ee, obj, obs[:, self.at["target_pos_w"]], opening, self.half_size)
        if self.rule.step_m is not None:
            step = target - ee
            n = torch.sqrt((step * step).sum(-1, keepdim=True))
            target = ee + step * torch.clamp(self.rule.step_m / torch.clamp(n, min=1e-9), max=1.0)
        u = torch.maximum(torch.minimum(q, self.hi), self.lo)
        eye = torch.eye(len(self.joints)) * DAMPING_M**2
        for _ in range(ITERATIONS):
            p, R, axes, anchors = self.chain(u)
            cols = [_cross(axes, p[:, None, :] - anchors)]  # (B, n, 3): J_p^T
            err = [target - p]
            if self.rule.pointing:
                cols.append(W_ROT * axes)
                err.append(W_ROT * _cross(R[:, :, 2], self.down))
            At, e = torch.cat(cols, -1), torch.cat(err, -1)  # A^T (B, n, k), e (B, k)
            du = cholesky_solve(At @ At.transpose(1, 2) + eye, (At @ e[:, :, None])[:, :, 0])
            u = torch.maximum(torch.minimum(u + du, self.hi), self.lo)
        k = {j: i for i, j in enumerate(self.joints)}
        a = [(u[:, k[i]] - self.home[i]) / self.scale if i in k else grip for i in range(self.nu)]
        return torch.clamp(torch.stack(a, -1), -1.0, 1.0)


def scripted_onnx(env: Any, task: str) -> onnx.ModelProto:
    """:class:`ScriptedArmGraph` for ``env`` of ``task`` as an ONNX graph ``obs`` (N, n) -> ``action``
    (N, m), the IR and opset of every bundle."""
    from simreal.policies.export import IR_VERSION, OPSET

    graph = ScriptedArmGraph(env, task).eval()
    buf = io.BytesIO()
    with torch.no_grad():
        # The TorchScript exporter (dynamo=False), as torch_policy's: the loops above unroll into plain operators.
        torch.onnx.export(
            graph,
            (torch.zeros(2, graph.obs_size),),
            buf,  # type: ignore[arg-type]  # a file-like object works; the stub says path
            input_names=["obs"],
            output_names=["action"],
            opset_version=OPSET,
            dynamo=False,
            dynamic_axes={"obs": {0: "N"}, "action": {0: "N"}},
        )
    model = onnx.load_from_string(buf.getvalue())
    model.ir_version = IR_VERSION
    return model


def export_scripted(cfg: Any, env: Any, out_dir: Path) -> Path:
    """Write the scripted controller of ``cfg.task`` on ``env`` as a bundle at ``out_dir``
    (atomically, as every export): the graph, no normalisation, ``provenance.trainer: scripted``."""
    from simreal.policies.export import write_bundle

    n = int(env.observation_size)
    return write_bundle(
        Path(out_dir),
        dataclasses.replace(cfg, trainer="scripted"),
        env,
        scripted_onnx(env, cfg.task),
        np.zeros(n),
        np.ones(n),
        Path(out_dir),
    )
