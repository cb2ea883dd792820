"""The deploy-side sim gate's comparison rules on made-up trajectories (no simulator)."""

from __future__ import annotations

import numpy as np
import pytest

from simreal.deploy.sim_gate import ALIGN_S, RULES, aligned_rms, compare

DT = 0.02  # a 50 Hz arm


def _grasp(t: np.ndarray, close_s: float = 1.5) -> np.ndarray:
    """(T, 3) joints of a reach-close-lift: two joints swing at ``close_s``, one drifts."""
    step = 0.5 * np.tanh((t - close_s) / 0.1)
    return np.stack([step, -0.8 * step, 0.2 * np.sin(t)], axis=1)


def _traj(q: np.ndarray, t: np.ndarray) -> dict[str, np.ndarray]:
    return {"t": t, "joint_pos": q}


def test_aligned_rms_without_a_band_is_the_plain_rms():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(50, 4)), rng.normal(size=(50, 4))
    assert aligned_rms(a, b, 0) == pytest.approx(np.sqrt(np.mean((a - b) ** 2)))


def test_aligned_rms_absorbs_a_shift_inside_the_band_only():
    t = np.arange(0.0, 3.0, DT)
    ref, late = _grasp(t), _grasp(t, close_s=1.7)  # the same motion 0.2 s (10 samples) later
    plain = np.sqrt(np.mean((ref - late) ** 2))
    assert plain > 0.1
    assert aligned_rms(late, ref, 12) < 0.2 * plain
    assert aligned_rms(late, ref, 4) > 0.5 * plain  # a band narrower than the shift cannot absorb it
    # an offset is not a timing difference: warping barely touches it
    assert 0.09 < aligned_rms(ref + 0.1, ref, 12) <= 0.1 + 1e-12
    assert aligned_rms(ref[:40], ref, 12) == float("inf")  # the band cannot join the ends


def test_the_arm_rule_passes_a_late_grasp_and_fails_a_later_or_different_one():
    assert RULES["arm"].align_s == ALIGN_S == 0.25
    t = np.arange(0.0, 3.0, DT)
    ref = _traj(_grasp(t), t)
    late = compare("arm", _traj(_grasp(t, close_s=1.7), t), ref)
    assert late["measure"] == "joint_rms_aligned_rad"
    assert late["unaligned"] > late["tolerance"] and late["passed"], late  # what the plain RMS failed
    too_late = compare("arm", _traj(_grasp(t, close_s=2.1), t), ref)  # 0.6 s: beyond the band
    assert not too_late["passed"], too_late
    other = _grasp(t)
    other[:, 2] += 0.15  # another pose for the whole rehearsal (0.087 rad RMS over the 3 joints)
    assert not compare("arm", _traj(other, t), ref)["passed"]


def test_other_families_compare_sample_by_sample():
    t = np.arange(0.0, 3.0, DT)
    ref = _traj(_grasp(t), t)
    r = compare("classic", _traj(_grasp(t, close_s=1.7), t), ref)
    assert r["measure"] == "joint_rms_rad" and "unaligned" not in r and not r["passed"]


def _pick(t: np.ndarray, close_s: float = 1.5, lift_m: float = 0.15) -> dict[str, np.ndarray]:
    """A pick: the grasp's joints at ``close_s``, the object lifted by ``lift_m`` 0.3 s later."""
    lift = lift_m * 0.5 * (1.0 + np.tanh((t - close_s - 0.3) / 0.1))
    obj = np.stack([np.full_like(t, 0.5), np.zeros_like(t), 0.02 + lift], axis=1)
    return {"t": t, "joint_pos": _grasp(t, close_s), "object_pos_w": obj}


def test_with_an_object_the_arm_rule_judges_the_outcome():
    t = np.arange(0.0, 4.0, DT)
    ref = _pick(t)
    # 0.5 s late in the grasp (beyond the band), same lift and final pose: the same outcome
    late = compare("arm", _pick(t, close_s=2.0), ref)
    assert late["measure"] == "object_final_m" and late["tolerance"] == 0.02
    assert late["passed"], late
    assert late["value"] < 1e-3 and late["final_pose_rad"] < 1e-3 and late["path_aligned_rad"] > 0.05
    # the cube left behind: the outcome differs
    missed = compare("arm", _pick(t, lift_m=0.0), ref)
    assert not missed["passed"] and "the object ended 15.0 cm from the reference's" in missed["reason"], missed
    # the object where the reference left it, the arm elsewhere at the end
    other = _pick(t)
    other["joint_pos"] = other["joint_pos"] + np.array([0.0, 0.0, 0.1]) * (t[:, None] > 3.0)
    r = compare("arm", other, ref)
    assert not r["passed"] and "final pose" in r["reason"], r
    # a path far from the reference's (a swing beyond three tolerances) fails though the end agrees
    swing = _pick(t)
    swing["joint_pos"] = swing["joint_pos"] + 0.5 * np.sin(np.pi * t / 3.0)[:, None] * (t[:, None] < 3.0)
    r = compare("arm", swing, ref)
    assert not r["passed"] and r["reason"].startswith("the path is"), r
    # judged before the task's episode ends: nothing is decided yet, so no pass
    assert compare("arm", _pick(t), ref, outcome_s=3.9)["passed"]
    early = compare("arm", _pick(t[t < 1.0]), ref, outcome_s=6.0)
    assert not early["passed"] and early["reason"].startswith("only 1.0 s compared"), early


def test_with_the_hand_measured_the_final_pose_is_the_hand_s_place():
    """With ``ee_pos_w`` (the arms' models have the site) the end is judged where the hand is: a
    wrist rolled about the gripper's axis, which no arm task constrains, moves joints and not the
    hand (an ideal rehearsal of a residual pick ended 0.18 rad off on joint 7, the cube 0.2 mm and
    the hand 0.6 cm from the reference's, and failed the joint measure)."""
    t = np.arange(0.0, 4.0, DT)

    def with_hand(p: dict[str, np.ndarray], shift_m: float = 0.0) -> dict[str, np.ndarray]:
        """The hand 5 cm above the object (``shift_m`` more from 3 s on)."""
        return {
            **p,
            "ee_pos_w": p["object_pos_w"]
            + np.array([0.0, 0.0, 0.05])
            + np.array([shift_m, 0.0, 0.0]) * (t[:, None] > 3.0),
        }

    ref = with_hand(_pick(t))
    rolled = with_hand(_pick(t))
    rolled["joint_pos"] = rolled["joint_pos"] + np.array([0.0, 0.0, 0.15]) * (t[:, None] > 3.0)
    r = compare("arm", rolled, ref)
    assert r["passed"] and r["final_pose_rad"] > RULES["arm"].tolerance and r["final_hand_m"] < 1e-9, r
    away = compare("arm", with_hand(_pick(t), shift_m=0.03), ref)
    assert not away["passed"] and "the hand ended 3.0 cm from the reference's" in away["reason"], away


def test_a_bundle_whose_task_is_no_task_here_is_refused_not_ungated(tmp_path, capsys):
    """A typo in bundle.yaml's ``task`` once dropped the sim-to-sim gate without a word and the
    rehearsal said PASS; now one line naming the field, exit 2, before any robot starts."""
    import shutil

    import yaml

    from fixtures.task_data import data_overrides
    from simreal.cli import main
    from simreal.sim.tasks import TASKS

    runs = tmp_path / "runs"
    assert (
        main(
            [
                "train",
                "arm-reach",
                f"runs_root={runs}",
                "train.num_envs=4",
                "train.num_timesteps=64",
                "train.unroll_length=8",
                "train.num_minibatches=2",
                "train.num_updates_per_batch=1",
                "train.num_eval_envs=2",
                "train.eval_every_steps=0",
                "train.policy_hidden=[16,16]",
                "train.value_hidden=[16,16]",
                "env.episode_length_s=0.5",
                *data_overrides("arm-reach", tmp_path),
            ]
        )
        == 0
    )
    run_dir = next((runs / "arm-reach").iterdir())
    assert main(["export", str(run_dir)]) == 0
    bad = tmp_path / "bad"
    shutil.copytree(run_dir / "bundle", bad)
    data = yaml.safe_load((bad / "bundle.yaml").read_text())
    data["task"] = "arm-reech"
    (bad / "bundle.yaml").write_text(yaml.safe_dump(data))
    assert "arm-reech" not in TASKS
    capsys.readouterr()
    assert main(["deploy", "sim", str(bad), "--duration", "0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bundle field 'task': 'arm-reech' is no task of this simreal" in err[0], err
