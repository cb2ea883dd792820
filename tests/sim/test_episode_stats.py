"""Episode statistics tell the truth: each is averaged over the episodes it is defined for, a
mean over none is NaN (printed ``-``, ``null`` in JSON), and every trainer's evaluation agrees."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest

from fixtures.episode_samples import fed
from simreal.policies.evaluation import format_eval, jsonable, statistics
from simreal.sim import episode_stats as es
from simreal.sim.episode_stats import EpisodeStat, episode_means


class _Table:
    """A stand-in env with a table of its own (the reductions, apart from any task)."""

    def __init__(self, table):
        self.table = table

    def stat_table(self):
        return self.table

    def init_stats(self):
        return es.init_stats(self.table)


def test_each_reduction_of_the_table():
    """mean, rms, last and all over the counted steps only; below as an outcome; a windowed
    vector's norm per window; kept vs every; terminated / survived need no sample."""
    jnp = jax.numpy
    t = _Table(
        {
            "m": EpisodeStat("mean", sample="x"),
            "r": EpisodeStat("rms", sample="x"),
            "l": EpisodeStat("last", sample="x"),
            "every": EpisodeStat("mean", sample="x", over="every"),
            "ok": EpisodeStat("all", sample="good"),
            "close": EpisodeStat("last", sample="x", below=2.5),
            "pace": EpisodeStat("rms", sample="v", window=2, width=2),
            "fell": EpisodeStat("terminated"),
            "up": EpisodeStat("survived"),
        }
    )
    acc = fed(
        t,
        [
            {"x": (1.0, True), "good": (True, True), "v": [3.0, 0.0]},
            {"x": (9.0, False), "good": (False, False), "v": [1.0, 0.0]},  # not counted; the window of 2 ends
            {"x": (2.0, True), "good": (True, True), "v": [0.0, 1.0]},
            {"x": (4.0, False), "good": (True, True), "v": [0.0, 1.0]},  # the second window ends
        ],
    )
    out = {k: float(v) for k, v in es.final_stats(t.table, acc, jnp.bool_(False)).items()}
    assert out["m"] == pytest.approx(1.5) and out["r"] == pytest.approx(math.sqrt(2.5)) and out["l"] == 2.0
    assert out["ok"] == 1.0 and out["close"] == 1.0 and out["fell"] == 0.0 and out["up"] == 1.0
    assert out["pace"] == pytest.approx(math.sqrt((2.0**2 + 1.0**2) / 2))  # windows' means (2, 0) and (0, 1)
    assert out["m/n"] == 1.0
    lost = {k: float(v) for k, v in es.final_stats(t.table, acc, jnp.bool_(True)).items()}
    assert lost["m/n"] == 0.0 and lost["m"] == 0.0 and lost["every/n"] == 1.0 and lost["every"] == pytest.approx(1.5)
    assert lost["ok"] == 0.0 and lost["close"] == 0.0 and lost["fell"] == 1.0 and lost["up"] == 0.0
    bad = fed(t, [{"x": (3.0, True), "good": (False, True), "v": [0.0, 0.0]}])
    out = {k: float(v) for k, v in es.final_stats(t.table, bad, jnp.bool_(False)).items()}
    assert out["ok"] == 0.0 and out["close"] == 0.0 and out["pace/n"] == 0.0  # no window ended yet


def test_episode_means_divide_by_each_statistics_own_count():
    sums = {
        "episode/done": 4.0,
        "episode/crash": 3.0,
        "episode/pos_rmse_m": 0.06,
        "episode/pos_rmse_m/n": 1.0,
        "episode/return": 10.0,
        "reward/alive": 7.0,
    }
    m = episode_means(sums)
    assert m == pytest.approx({"crash": 0.75, "pos_rmse_m": 0.06, "return": 2.5})


def test_episode_means_over_no_contributing_episode_is_nan():
    m = episode_means(
        {"episode/done": 2.0, "episode/crash": 2.0, "episode/pos_rmse_m": 0.0, "episode/pos_rmse_m/n": 0.0}
    )
    assert m["crash"] == 1.0 and math.isnan(m["pos_rmse_m"])
    assert episode_means({"episode/done": 0.0, "episode/crash": 0.0}) == {}


def test_format_eval_prints_nan_as_dash_success_first_and_json_has_null():
    r = {
        "crash": 1.0,
        "length": 30.0,
        "pos_rmse_m": math.nan,
        "return": -2.0,
        "success": 0.0,
        "episodes": 8,
        "backend": "native",
    }
    assert list(statistics(r)) == ["success", "crash", "pos_rmse_m", "return", "length"]
    line = format_eval(r)
    assert line.startswith("success 0  crash 1  pos_rmse_m -") and "nan" not in line and "episodes" not in line
    assert line.endswith("length 30 steps")  # control steps, said
    assert json.loads(json.dumps(jsonable({"native": r})))["native"]["pos_rmse_m"] is None


# -- end to end: every episode crashes -------------------------------------------------------------
N = 4
# Rotors cut from the start, 0.4-0.6 m up: every drone hits the floor well before the settle time.
CRASHING = [
    "backend=native",
    "env.randomize=false",
    "env.obs_noise_scale=0",
    "env.action_delay_steps=[0,0]",
    "env.target_pos_w=[0,0,0.5]",
    "env.spawn_radius_m=0.1",
    "env.episode_length_s=1.0",
    "env.settle_time_s=0.8",
]


@pytest.fixture(scope="module")
def hover_env():
    from simreal.policies.run_config import make_env, resolve

    return make_env(resolve("quadrotor-hover", CRASHING))


def _check_all_crashed(r: dict) -> None:
    assert r["episodes"] == N and r["crash"] == 1.0 and r["success"] == 0.0, r
    assert math.isnan(r["pos_rmse_m"]), r  # not 0.000: no episode flew to the settle time
    assert "pos_rmse_m -" in format_eval(r) and not any(k.endswith("/n") for k in r)


def test_brax_evaluate_all_crashed_reports_no_rmse(hover_env):
    import jax.numpy as jnp

    from simreal.policies.rl.ppo import evaluate

    def make_policy(params, deterministic=True):
        return lambda obs, key: (-jnp.ones((obs.shape[0], hover_env.action_size)), {})

    _check_all_crashed(evaluate(hover_env, make_policy, (None, None), N, seed=0))


def test_brax_evaluate_in_batches_reuses_the_batch_program_and_counts_every_episode(hover_env):
    import jax.numpy as jnp

    from simreal.policies.rl.ppo import _episode_program, evaluate

    def hover_thrust(params, deterministic=True):  # params is the thrust: a traced argument, not a constant
        return lambda obs, key: (jnp.full((obs.shape[0], hover_env.action_size), params), {})

    one = evaluate(hover_env, hover_thrust, 0.0, N, seed=0)
    compiled = _episode_program.cache_info().misses
    three = evaluate(hover_env, hover_thrust, 0.0, 3 * N, seed=0, batch=N)
    assert _episode_program.cache_info().misses == compiled  # no new program for 3 N episodes
    assert three["episodes"] == 3 * N and one["episodes"] == N
    cut = evaluate(hover_env, hover_thrust, -1.0, 3 * N, seed=0, batch=N)  # same program, other params
    assert _episode_program.cache_info().misses == compiled
    _check_all_crashed({**cut, "episodes": cut["episodes"] // 3})
    assert three["crash"] < 1.0  # hover thrust keeps some up: the params reached the program


def test_the_evaluation_compiles_ahead_on_its_own_thread_and_not_again(hover_env):
    """A training run calls compile_evaluation after its first iteration: the episode program
    compiles on a background thread, and the evaluation that follows compiles it no more (the
    main job's first periodic evaluation stalled training about 15 s for that compile)."""
    import jax.numpy as jnp

    from fixtures.jax_compiles import compiles_of
    from simreal.policies.rl.ppo import compile_evaluation, evaluate

    def thrust(params, deterministic=True):  # a new policy function: a program no other test compiled
        return lambda obs, key: (jnp.full((obs.shape[0], hover_env.action_size), params[0]), {})

    params = (jnp.float32(0.0), jnp.zeros(3))
    with compiles_of("evaluation_episodes") as compiled_on:
        compile_evaluation(hover_env, thrust, params, 2 * N, batch=N)
        r = evaluate(hover_env, thrust, params, 2 * N, seed=0, batch=N)
    assert compiled_on == ["simreal-eval-compile"], compiled_on
    assert r["episodes"] == 2 * N


def test_torch_evaluate_all_crashed_reports_no_rmse(hover_env):
    from simreal.policies.torch_policy import evaluate

    _check_all_crashed(
        evaluate(hover_env, lambda obs: -np.ones((len(obs), hover_env.action_size), np.float32), N, seed=0)
    )


# -- each task's statistics: a count only where some episodes leave the statistic undefined --------
def test_error_statistics_are_undefined_for_episodes_that_ended_early(hover_env):
    """Quadrotor: a crashed episode has no position RMSE (even one that flew past the settle
    time); one that ran to the time limit with settled steps has."""
    env = hover_env
    settled = fed(env, [{"distance": (0.02, True), "within": (True, True)}] * 5)
    crashed = env.final_stats(settled, jax.numpy.bool_(True))
    flew = env.final_stats(settled, jax.numpy.bool_(False))
    assert float(crashed["pos_rmse_m/n"]) == 0.0 and float(crashed["pos_rmse_m"]) == 0.0
    assert float(flew["pos_rmse_m/n"]) == 1.0 and float(flew["pos_rmse_m"]) == pytest.approx(0.02)
    never_settled = env.final_stats(env.init_stats(), jax.numpy.bool_(False))
    assert float(never_settled["pos_rmse_m/n"]) == 0.0


def test_eval_sim_to_sim_gap_covers_every_statistic_and_prints_no_nan(monkeypatch, capsys, tmp_path):
    """The gap line lists each statistic both backends report (a humanoid's fall rate too), '-'
    where a side has no value; --json carries null, valid JSON."""
    from types import SimpleNamespace

    import simreal.cli.eval_ as cmd_eval
    import simreal.policies.evaluation as evaluation
    import simreal.policies.run_dir as train

    cfg = SimpleNamespace(backend="native", eval=SimpleNamespace(randomize=True, sim_to_sim_max_gap=0.05))
    results = {
        "native": {"success": 0.5, "fall": 0.5, "vel_rmse_m_s": 0.2, "return": 3.0, "episodes": 4},
        "mjx": {"success": 0.0, "fall": 1.0, "vel_rmse_m_s": math.nan, "return": 1.0, "episodes": 4},
    }
    monkeypatch.setattr(train, "load_config", lambda run_dir, reward=True: cfg)
    monkeypatch.setattr(
        evaluation,
        "evaluate_run",
        lambda run_dir, cfg, backend, episodes, randomize: {**results[backend], "backend": backend},
    )
    monkeypatch.setattr(
        evaluation,
        "evaluated_checkpoint",
        lambda run_dir, cfg: {
            "checkpoint": "checkpoints/step_000000000400.safetensors",
            "env_steps": 400,
            "skipped": [],
        },
    )
    args = SimpleNamespace(run_dir=str(tmp_path), backend="mjx", episodes=None, no_randomize=False, json=False)
    assert cmd_eval.run(args) == 1  # success dropped by 0.5 > 0.05
    out = capsys.readouterr().out
    assert "[mjx] episodes 4: success 0  fall 1  vel_rmse_m_s -  return 1" in out, out
    assert "checkpoint checkpoints/step_000000000400.safetensors (400 env steps)" in out, out
    assert "gap (mjx - native): success -0.5000  fall +0.5000  vel_rmse_m_s -  return -2.0000" in out, out
    assert "nan" not in out.lower() and "FAIL" in out
    assert cmd_eval.run(SimpleNamespace(**{**vars(args), "json": True})) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["mjx"]["vel_rmse_m_s"] is None and report["gap"]["vel_rmse_m_s"] is None
    assert report["gap"]["fall"] == pytest.approx(0.5) and report["sim_to_sim_passed"] is False
