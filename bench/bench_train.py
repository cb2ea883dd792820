"""Wall-clock to a target success rate: ``simreal train`` versus stable-baselines3 PPO and SAC.

    python bench/bench_train.py                                 # quadrotor-hover, target 0.95
    python bench/bench_train.py --task quadrotor-track --target 0.9 --limit-s 1200
    python bench/bench_train.py --only sb3 --seeds 0 1 2       # SB3 PPO
    python bench/bench_train.py --only sb3-sac --target 0.9    # SB3 SAC

Each method runs in its own process and is timed from that process's start (imports and
compilation included). Success has one definition for both: the deterministic policy's
first episode in each of 128 envs, under domain randomisation, judged by the task's own
``episode/success`` statistic (hover: within 10 cm from 2 s on, held to the end).
stable-baselines3 trains through simreal's ``SB3VecEnv`` adapter on the native backend and
is evaluated every ``--sb3-eval-every`` env steps. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import child

EVAL_ENVS = 128


def sb3_model(algorithm: str, venv: object, seed: int, discount: float) -> object:
    """SB3's PPO (64 envs: n_steps 64, batch 1024, 5 epochs, lr 1e-3, 64x64 policy, 128x128 value) or
    SAC (the hover YAML's ``algorithms.sac`` settings: batch 256, lr 1e-3, 4096 transitions before
    learning, 4 gradient steps per step of the 16 envs, 64x64 actor, 128x128 twin critic, target
    entropy -m/2; rewards normalised by SB3's ``VecNormalize``, as the YAML scales them x30 for
    simreal's SAC), both at the task's discount."""
    if algorithm == "sac":
        from stable_baselines3 import SAC
        from stable_baselines3.common.vec_env import VecNormalize

        m = venv.action_space.shape[0]
        venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=discount)
        return SAC(
            "MlpPolicy",
            venv,
            learning_rate=1e-3,
            buffer_size=1_000_000,
            learning_starts=4096,
            batch_size=256,
            gamma=discount,
            train_freq=1,
            gradient_steps=4,
            target_entropy=-m / 2,
            seed=seed,
            device="cpu",
            verbose=0,
            policy_kwargs={"net_arch": {"pi": [64, 64], "qf": [128, 128]}},
        )
    from stable_baselines3 import PPO

    return PPO(
        "MlpPolicy",
        venv,
        n_steps=64,
        batch_size=1024,
        n_epochs=5,
        learning_rate=1e-3,
        gamma=0.99,
        gae_lambda=0.95,
        ent_coef=0.0,
        clip_range=0.2,
        seed=seed,
        device="cpu",
        verbose=0,
        policy_kwargs={"net_arch": {"pi": [64, 64], "vf": [128, 128]}},
    )


def sb3_worker(task: str, seed: int, target: float, limit_s: float, eval_every: int, algorithm: str = "ppo") -> dict:
    t0 = time.time()
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger

    from simreal.policies.run_config import make_env, resolve
    from simreal.policies.torch_policy import evaluate
    from simreal.sim.adapter_sb3 import SB3VecEnv

    cfg = resolve(task, [f"seed={seed}", "backend=native"])
    env = make_env(cfg)
    eval_env = make_env(cfg)
    venv = SB3VecEnv(env, num_envs=16 if algorithm == "sac" else 64, seed=seed)
    model = sb3_model(algorithm, venv, seed, cfg.train.discounting)
    model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default leaves a folder in /tmp
    method = "sb3" if algorithm == "ppo" else "sb3-sac"
    result = {"method": method, "seed": seed, "reached": False, "success": 0.0}

    class Stop(BaseCallback):
        next_eval = eval_every

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_eval:
                return time.time() - t0 < limit_s
            self.next_eval += eval_every
            r = evaluate(eval_env, lambda o: model.predict(o, deterministic=True)[0], EVAL_ENVS, seed + 1)
            s, c = r["success"], r["crash"]
            result.update(success=s, crash=c, env_steps=self.num_timesteps, wall_s=time.time() - t0)
            print(f"{method} {self.num_timesteps} steps {time.time() - t0:.0f}s success {s:.3f}", file=sys.stderr)
            result["reached"] = s >= target
            return not result["reached"] and time.time() - t0 < limit_s

    model.learn(total_timesteps=10**9, callback=Stop())
    result.setdefault("wall_s", time.time() - t0)
    return result


def simreal_run(task: str, seed: int, target: float, limit_s: float) -> dict:
    t0 = time.time()
    cmd = [
        sys.executable,
        "-m",
        "simreal.cli",
        "train",
        task,
        f"seed={seed}",
        "runs_root=/tmp/simreal-bench-runs",
        f"train.target_success={target}",
        f"train.max_wall_s={limit_s}",
        "--json",
    ]
    r = child.run(cmd)  # its progress stays visible
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return {
        "method": "simreal",
        "seed": seed,
        "reached": out["reached_target"],
        "success": out["eval_success"],
        "crash": out.get("eval_crash", float("nan")),
        "env_steps": out["env_steps"],
        "wall_s": time.time() - t0,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="quadrotor-hover")
    p.add_argument("--target", type=float, default=0.95)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument(
        "--only", choices=("simreal", "sb3", "sb3-sac"), default=None, help="one method (default: simreal and SB3 PPO)"
    )
    p.add_argument("--limit-s", type=float, default=600.0)
    p.add_argument("--sb3-eval-every", type=int, default=200_000)
    p.add_argument("--sb3-worker", choices=("ppo", "sac"), default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.sb3_worker:
        print(json.dumps(sb3_worker(a.task, a.seeds[0], a.target, a.limit_s, a.sb3_eval_every, a.sb3_worker)))
        return
    rows = []
    for seed in a.seeds:
        if a.only in (None, "simreal"):
            rows.append(simreal_run(a.task, seed, a.target, a.limit_s))
        for algorithm, method in (("ppo", "sb3"), ("sac", "sb3-sac")):
            if a.only != method and (a.only is not None or method == "sb3-sac"):
                continue
            t0 = time.time()
            r = child.run(
                [
                    sys.executable,
                    __file__,
                    "--sb3-worker",
                    algorithm,
                    "--task",
                    a.task,
                    "--seeds",
                    str(seed),
                    "--target",
                    str(a.target),
                    "--limit-s",
                    str(a.limit_s),
                    "--sb3-eval-every",
                    str(a.sb3_eval_every),
                ]
            )
            if r.returncode != 0:
                raise RuntimeError(r.stderr[-2000:])
            row = json.loads(r.stdout.strip().splitlines()[-1])
            row["wall_s"] = time.time() - t0
            rows.append(row)
    print(f"\ntask {a.task}, target success {a.target}, limit {a.limit_s:.0f} s\n")
    print("| method | seed | reached | wall-clock [s] | env steps | eval success | eval crash |")
    print("| --- | ---: | :---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['method']} | {r['seed']} | {'yes' if r['reached'] else 'no'} | {r['wall_s']:.1f} | "
            f"{r.get('env_steps', 0):,} | {r['success']:.3f} | {r.get('crash', float('nan')):.3f} |"
        )


if __name__ == "__main__":
    main()
