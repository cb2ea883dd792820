"""Inverse kinematics of an arm's ``end_effector`` site inside the policy's action box.

A scripted teacher (``simreal/policies/demos/teachers.py``) commands what a policy commands: joint position
targets ``u = home + action_scale * a`` for ``a`` in [-1, 1], clipped to the control range
(``JointRobotTask``). :meth:`ArmIK.solve` finds the targets ``u`` of the arm's joint actuators
(hinge and slide, driver order) that put the site at a world position ``p*`` [m], optionally
with its z axis along a unit direction ``z*``, by a few Gauss-Newton steps from the measured
pose, each a bounded, damped linear least-squares problem::

    min_du  |J_p du - (p* - p(u))|^2 + w_r^2 |J_r du - z(u) x z*|^2 + lambda^2 |du|^2
    s.t.    lo - u <= du <= hi - u

``J_p``, ``J_r`` (3, n): the site's translational and rotational Jacobians over the actuated
joints (``mj_jacSite``); ``z(u) x z*`` is the small-angle rotation turning the site's z axis
onto ``z*`` (the rotation about ``z*`` stays free); ``lambda`` [m] damps the step near
singularities (damped least squares, Wampler 1986); ``[lo, hi]`` is the action box in joint
space, so every solution is an action in [-1, 1] (:meth:`ArmIK.action`).

Written here rather than with mink (the project's IK library, ``simreal/retarget/ik.py``): mink's QP
spans the whole model's configuration (a task cube's free joint too) and would need the action
box as a custom limit; one bounded least-squares problem over the arm's joints per step (scipy's
BVLS) is the whole job. A bound matters: clipping a plain damped step instead stalls a joint at
its bound while the others do not take over its share.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np
from scipy.optimize import lsq_linear

#: Damping lambda [m]: steps shrink where the Jacobian's singular values fall below it.
DAMPING_M = 0.05
#: Gauss-Newton steps per solve (warm-started at the measured pose).
ITERATIONS = 4


class SiteIK:
    """Position and orientation IK of one site over the joint actuators that move it.

    The problem of the module docstring, with the orientation term either the site's z axis
    onto ``z*`` (pointing) or its whole frame onto ``R*``: ``e_r = 1/2 sum_i R[:, i] x R*[:, i]``,
    the small-angle rotation turning the frame onto the target's (world frame, as ``J_r``).

    Args:
      model: the robot's (or task's) model; it must have the site.
      site: the site's name.
      lo, hi: bounds (n,) of the variables' targets (joint actuators moving the site, driver
        order); default their control ranges.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        site: str = "end_effector",
        lo: np.ndarray | None = None,
        hi: np.ndarray | None = None,
    ):
        m = model
        self.model, self.data = m, mujoco.MjData(m)
        self.site = m.site(site).id
        #: actuators that drive one hinge or slide joint on the site's branch: the IK's variables
        #: (a tendon, such as Franka's gripper width, and a jaw beside the site are not)
        branch = set()
        b = int(m.site_bodyid[self.site])
        while b > 0:
            branch.add(b)
            b = int(m.body_parentid[b])
        joint = m.actuator_trntype == mujoco.mjtTrn.mjTRN_JOINT
        self.joints = np.array(
            [i for i in range(m.nu) if joint[i] and int(m.jnt_bodyid[m.actuator_trnid[i, 0]]) in branch], int
        )
        jnt = m.actuator_trnid[self.joints, 0]
        self.qpos_adr, self.dof_adr = m.jnt_qposadr[jnt], m.jnt_dofadr[jnt]
        self.lo = np.asarray(lo if lo is not None else m.actuator_ctrlrange[self.joints, 0], np.float64)
        self.hi = np.asarray(hi if hi is not None else m.actuator_ctrlrange[self.joints, 1], np.float64)
        self._jacp, self._jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))

    def site_pose(self, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position [m], rotation matrix (3, 3), columns the site's axes) of the site in world
        at ``qpos`` (nq,); fills the Jacobians."""
        d = self.data
        d.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, d)
        mujoco.mj_comPos(self.model, d)  # cdof, which the Jacobian reads
        mujoco.mj_jacSite(self.model, d, self._jacp, self._jacr, self.site)
        return d.site_xpos[self.site].copy(), d.site_xmat[self.site].reshape(3, 3).copy()

    def solve(
        self,
        qpos: np.ndarray,
        pos: np.ndarray,
        z_axis: np.ndarray | None = None,
        w_rot: float = 0.3,
        *,
        rot: np.ndarray | None = None,
        lo: np.ndarray | None = None,
        hi: np.ndarray | None = None,
    ) -> np.ndarray:
        """Joint targets (n,) [rad or m] putting the site at ``pos`` [m] with its z axis along
        ``z_axis`` or its frame at ``rot`` (3, 3) (weighted by ``w_rot`` [m/rad]; neither: position
        only), from the measured ``qpos`` (nq,), within ``[lo, hi]`` (default the bounds given at
        construction): the module docstring's problem, :data:`ITERATIONS` steps."""
        lo = self.lo if lo is None else np.maximum(lo, self.lo)
        hi = self.hi if hi is None else np.minimum(hi, self.hi)
        q = np.array(qpos, np.float64)
        u = np.clip(q[self.qpos_adr], lo, hi)
        n = len(u)
        for _ in range(ITERATIONS):
            q[self.qpos_adr] = u
            p, R = self.site_pose(q)
            rows = [self._jacp[:, self.dof_adr]]
            rhs = [np.asarray(pos) - p]
            if z_axis is not None or rot is not None:
                if rot is not None:
                    err = 0.5 * np.cross(R.T, np.asarray(rot).T).sum(0)
                else:
                    assert z_axis is not None  # the branch is taken with z_axis or rot
                    err = np.cross(R[:, 2], z_axis)
                rows.append(w_rot * self._jacr[:, self.dof_adr])
                rhs.append(w_rot * err)
            A = np.vstack(rows + [DAMPING_M * np.eye(n)])
            b = np.concatenate(rhs + [np.zeros(n)])
            # bounds a hair wider than the box: BVLS needs lo < hi, and u sits on a bound often
            du = lsq_linear(A, b, bounds=(lo - u - 1e-9, hi - u + 1e-9), method="bvls").x
            u = np.clip(u + du, lo, hi)
        return u


class ArmIK(SiteIK):
    """:class:`SiteIK` of a task's ``end_effector`` site within the policy's action box.

    Args:
      env: a ``JointRobotTask`` (``home_ctrl``, ``ctrl_lo``, ``ctrl_hi``, ``cfg.action_scale``,
        ``mj_model``); its model must have the site.
      site: the site's name.
    """

    def __init__(self, env: Any, site: str = "end_effector"):
        if env.cfg.action_scale <= 0:
            from simreal.errors import ConfigError

            raise ConfigError(
                "env.action_scale", "a scripted teacher needs an action_scale > 0 (the action moves no joint otherwise)"
            )
        super().__init__(env.mj_model, site)
        self.scale = float(env.cfg.action_scale)
        self.home = np.asarray(env.home_ctrl, np.float64)
        lo = np.maximum(self.home - self.scale, np.asarray(env.ctrl_lo, np.float64))
        hi = np.minimum(self.home + self.scale, np.asarray(env.ctrl_hi, np.float64))
        self.lo, self.hi = lo[self.joints], hi[self.joints]

    def action(self, targets: np.ndarray, others: float | np.ndarray = 0.0) -> np.ndarray:
        """The normalised action (nu,) commanding joint ``targets`` (n,); the actuators that are
        not IK variables (a gripper) get ``others``."""
        a = np.full(self.model.nu, others, np.float64) if np.ndim(others) == 0 else np.array(others, np.float64)
        a[self.joints] = (targets - self.home[self.joints]) / self.scale
        return np.clip(a, -1.0, 1.0)
