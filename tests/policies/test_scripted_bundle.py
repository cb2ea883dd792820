"""An arm task's scripted controller as a bundle (``simreal/policies/demos/scripted_bundle.py``): its kinematics
against MuJoCo's, its IK landing the site on the target, the torch rule against the teachers'
numpy rule, ONNX Runtime against torch, closed loop on arm-reach, and ``residual.base=scripted``
freezing it under a residual whose untrained composition is exactly it."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import torch

from simreal.bundle import OnnxPolicy, load_bundle
from simreal.errors import ConfigError
from simreal.policies.demos.arm_ik import ArmIK
from simreal.policies.demos.scripted_bundle import ScriptedArmGraph, SiteChain, cholesky_solve, export_scripted
from simreal.policies.demos.teachers import PickTeacher, PushTeacher
from simreal.policies.run_config import make_env, resolve

ENV = ["backend=native", "env.episode_length_s=1.0"]


@pytest.fixture(scope="module")
def reach():
    cfg = resolve("arm-reach", ENV)
    return cfg, make_env(cfg)


@pytest.fixture(scope="module")
def scripted(reach, tmp_path_factory):
    """The scripted reach exported once for the module (an ONNX export took 2 s alone and over a
    minute late in the full suite's process)."""
    cfg, env = reach
    return export_scripted(cfg, env, tmp_path_factory.mktemp("scripted") / "scripted")


@pytest.mark.parametrize("robot", ["franka", "so100"])
def test_chain_kinematics_and_jacobian_equal_mujoco(robot):
    env = make_env(resolve("arm-reach", [*ENV, f"robot={robot}"]))
    ik = ArmIK(env)
    chain = SiteChain(env.mj_model, ik)
    rng = np.random.default_rng(0)
    for _ in range(10):
        q = rng.uniform(ik.lo, ik.hi)
        qpos = np.array(env.home_qpos, np.float64)
        qpos[ik.qpos_adr] = q
        p, R = ik.site_pose(qpos)  # MuJoCo: mj_kinematics and mj_jacSite
        pt, Rt, axes, anchors = (t[0].numpy() for t in chain(torch.tensor(q[None], dtype=torch.float32)))
        np.testing.assert_allclose(pt, p, atol=1e-5)
        np.testing.assert_allclose(Rt, R, atol=1e-5)
        np.testing.assert_allclose(np.cross(axes, pt - anchors).T, ik._jacp[:, ik.dof_adr], atol=1e-5)
        np.testing.assert_allclose(axes.T, ik._jacr[:, ik.dof_adr], atol=1e-5)


def test_cholesky_solve_solves_batched_spd_systems():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(5, 7, 7))
    M = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(7)
    b = rng.normal(size=(5, 7))
    x = cholesky_solve(torch.tensor(M), torch.tensor(b)).numpy()
    np.testing.assert_allclose(x, np.linalg.solve(M, b[..., None])[..., 0], rtol=1e-8, atol=1e-8)


def test_the_graph_runs_the_teachers_rules():
    rng = np.random.default_rng(2)
    n = 4000
    cube = np.c_[rng.uniform(-0.1, 0.1, (n, 2)), np.full(n, 0.025)]
    goal = np.c_[rng.uniform(-0.15, 0.15, (n, 2)), np.full(n, 0.025)]
    goal[::5] = cube[::5] + np.c_[rng.uniform(-0.01, 0.01, (n // 5, 2)), np.zeros(n // 5)]  # pushes that are done
    ee = cube + rng.normal(0, 0.04, (n, 3)) * rng.choice([0.2, 1.0, 3.0], (n, 1))
    ee[:, 2] = np.abs(ee[:, 2])
    opening = rng.uniform(0.04, 0.08, n)
    push, pick = PushTeacher.__new__(PushTeacher), PickTeacher.__new__(PickTeacher)
    push.half = pick.half = 0.025
    t = {
        k: torch.tensor(v, dtype=torch.float32) for k, v in (("ee", ee), ("cube", cube), ("goal", goal), ("w", opening))
    }
    batched = PushTeacher.rule(t["ee"], t["cube"], t["goal"], 0.025, torch).numpy()
    single = np.stack([push.target(*x) for x in zip(ee, cube, goal)])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    target, close = PickTeacher.rule(t["ee"], t["cube"], t["goal"], t["w"], 0.025, torch)
    single = [pick.target(*x) for x in zip(ee, cube, goal, opening)]
    np.testing.assert_allclose(target.numpy(), np.stack([s[0] for s in single]), atol=1e-5)
    assert close.numpy().tolist() == [s[1] for s in single]
    assert 0.05 < close.numpy().mean() < 0.95  # both branches exercised


def test_exported_reach_graph_lands_the_site_on_the_goal_and_equals_torch(reach, scripted):
    cfg, env = reach
    bundle = load_bundle(scripted)
    assert bundle.provenance["trainer"] == "scripted" and bundle.task == "arm-reach"
    obs = np.asarray(jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), 16)).obs)
    action = OnnxPolicy(bundle)(obs)
    with torch.no_grad():
        np.testing.assert_allclose(action, ScriptedArmGraph(env, "arm-reach")(torch.tensor(obs)).numpy(), atol=1e-5)
    # the commanded joint targets put the site on each goal (IK from the observed pose, 3 damped steps;
    # the damping leaves the farthest goals a few cm short, and the next control step closes it)
    ik = ArmIK(env)
    at = {t["name"]: sum(u["size"] for u in env.obs_layout[:i]) for i, t in enumerate(env.obs_layout)}
    before, after = [], []
    for a, o in zip(action, obs):
        goal = o[at["target_pos_w"] : at["target_pos_w"] + 3]
        qpos = np.array(env.home_qpos, np.float64)
        qpos[ik.qpos_adr] = np.asarray(env.default_joint_pos)[ik.joints] + o[at["joint_pos_rel"] :][ik.joints]
        before.append(np.linalg.norm(ik.site_pose(qpos)[0] - goal))
        qpos[ik.qpos_adr] = ik.home[ik.joints] + ik.scale * a[ik.joints]
        after.append(np.linalg.norm(ik.site_pose(qpos)[0] - goal))
    assert min(before) > 0.05 and np.median(after) < 1e-3 and np.all(np.array(after) < 0.2 * np.array(before))


def test_scripted_reach_bundle_succeeds_in_closed_loop(reach, scripted):
    from simreal.policies.rl.ppo import evaluate
    from simreal.policies.trainers.residual_env import onnx_base

    cfg, env = reach
    act = onnx_base(OnnxPolicy(load_bundle(scripted)))
    result = evaluate(env, lambda _p, deterministic=True: lambda obs, _k: (act(obs), {}), None, 8, seed=3)
    assert result["success"] >= 0.875, result


def test_residual_over_the_scripted_base_starts_as_exactly_it(reach, tmp_path):
    from simreal.policies.trainers.residual import BASE_DIR, TRAINER, freeze_base

    cfg0, env = reach
    cfg = resolve("arm-reach", [*ENV, "train.num_envs=4", "residual.base=scripted"])
    frozen = freeze_base("scripted", tmp_path / BASE_DIR, cfg, env)
    renv, algo = TRAINER.build(tmp_path, cfg)
    obs = np.asarray(jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(4), 8)).obs)
    np.testing.assert_array_equal(
        np.asarray(TRAINER.composed(renv, algo, algo.init())(obs)), np.clip(OnnxPolicy(load_bundle(frozen))(obs), -1, 1)
    )


def test_a_task_without_a_scripted_controller_is_one_clear_error(tmp_path):
    from simreal.policies.trainers.residual import freeze_base

    cfg = resolve("cartpole-balance", ["residual.base=scripted"])
    with pytest.raises(ConfigError, match="residual.base.*cartpole-balance has no scripted controller; tasks with one"):
        freeze_base("scripted", tmp_path / "base", cfg, make_env(cfg))
    assert not (tmp_path / "base").exists()


def test_the_rehearsal_gate_repeats_the_start_ramp(scripted):
    """An arm bundle that moves at once (the scripted reach) through ``deploy sim``'s loop with the
    arm's default 1 s start ramp: the gate's reference blends from the held pose as the safety
    layer does, so an ideal link matches the training simulator (it once read 0.08 rad > 0.05)."""
    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    bundle = load_bundle(scripted)
    report = run_offline(bundle, SimLoopConfig(duration_s=2.0, noise_scale=0.0, settle_s=0.0))
    gate = report["gate"]
    assert gate["measure"] == "joint_rms_aligned_rad" and gate["passed"] and gate["value"] < 0.02, gate
    assert gate["unaligned"] < 0.02, gate  # sample by sample too: the ramp is repeated, not aligned away


def test_the_rehearsal_judges_the_task_where_it_ended(reach, scripted):
    """`deploy sim` passes an arm only when the task is done where the rehearsal ended: the
    scripted reach's hand within the task's radius of its goal; the same controller sent to a
    goal out of the arm's reach fails there, though the deploy pipeline reproduces it (the gate)."""
    import dataclasses

    from simreal.deploy.sim_loop import SimLoopConfig, run_offline

    cfg, _ = reach
    bundle = load_bundle(scripted)
    done = run_offline(bundle, SimLoopConfig(duration_s=2.0, noise_scale=0.0, settle_s=0.0))
    assert done["task"]["passed"] and done["task"]["final_distance_m"] < cfg.env.success_radius_m, done["task"]
    assert done["passed"]

    far = dataclasses.replace(bundle, task_params={"target_pos_w": [0.0, 2.0, 0.3]})
    missed = run_offline(far, SimLoopConfig(duration_s=2.0, noise_scale=0.0, settle_s=0.0))
    assert not missed["task"]["passed"] and missed["task"]["final_distance_m"] > 1.0, missed["task"]
    assert not missed["passed"] and missed["envelope"]["left_s"] is None
