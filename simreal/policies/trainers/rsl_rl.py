"""``trainer=rsl_rl``: rsl_rl's PPO (the legged-robotics standard) through ``RslRlVecEnv``.

    simreal train g1-velocity trainer=rsl_rl
    simreal train --resume RUN_DIR train.num_timesteps=200000000

The algorithm, models and checkpoint dict are rsl_rl's (``OnPolicyRunner`` builds them); this
module runs the runner's rollout/update loop one iteration at a time so the shared loop
(``trainers.loop``) can log, evaluate and stop between iterations. PPOConfig -> rsl_rl::

    unroll_length       num_steps_per_env     num_updates_per_batch  num_learning_epochs
    num_minibatches     num_mini_batches      clipping_epsilon       clip_param
    discounting         gamma                 gae_lambda             lam
    entropy_cost        entropy_coef          max_grad_norm          max_grad_norm
    learning_rate       learning_rate (schedule 'fixed', as Brax)
    desired_kl          desired_kl, schedule 'adaptive' (rsl_rl's: the rate follows the KL)
    symmetry            symmetry_cfg: data augmentation with the env's left-right mirror
                        (:mod:`simreal.sim.symmetry`; rsl_rl's ``Symmetry`` extension)
    policy_hidden / value_hidden / activation   actor / critic MLPModel
    init_noise_std      GaussianDistribution init_std
    estimate / estimator_hidden  the actor an ``estimator.EstimatorModel``: an MLP estimating those
                        critic terms from the actor's observation, fitted by regression on each
                        rollout before PPO's update (:mod:`simreal.policies.trainers.estimator`)
    normalize_observations  obs_normalization (EmpiricalNormalization, actor and critic)
    reward_scaling      rewards multiplied before PPO sees them

The critic reads the ``critic`` observation group (noise-free ``critic_obs_terms``).
Checkpoints: ``checkpoints/step_<env_steps>.pt``, rsl_rl's dict (actor, critic, optimiser
state dicts, iteration; the estimator's optimiser as ``estimator_optimizer_state_dict``), loaded
with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import torch

from simreal.policies import checkpoint as ckpt
from simreal.policies import torch_policy
from simreal.policies.run_config import RunConfig, make_env
from simreal.policies.trainers import check_observations
from simreal.policies.trainers import estimator as est
from simreal.policies.trainers.torch_loop import TorchTrainer
from simreal.sim.adapter_core import REWARD_TERMS
from simreal.yaml_io import atomic_write_bytes

EXT = "pt"


def runner_cfg(cfg: RunConfig, estimate_dim: int = 0) -> dict[str, Any]:
    """rsl_rl's train config from our PPOConfig (see module docstring); ``estimate_dim``: the size
    of the critic terms ``train.estimate`` names (0: none)."""
    tc = cfg.train
    actor: dict[str, Any] = {"class_name": "MLPModel"}
    if estimate_dim:
        actor = {
            "class_name": f"{est.__name__}:EstimatorModel",
            "estimate_dim": estimate_dim,
            "estimator_hidden": list(tc.estimator_hidden),
        }
    return {
        "num_steps_per_env": tc.unroll_length,
        "save_interval": 10**9,
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": tc.num_updates_per_batch,
            "num_mini_batches": tc.num_minibatches,
            "clip_param": tc.clipping_epsilon,
            "gamma": tc.discounting,
            "lam": tc.gae_lambda,
            "entropy_coef": tc.entropy_cost,
            "learning_rate": tc.learning_rate,
            "max_grad_norm": tc.max_grad_norm,
            **(
                {"schedule": "fixed"}
                if tc.desired_kl is None
                else {"schedule": "adaptive", "desired_kl": tc.desired_kl}
            ),
            "symmetry_cfg": {"use_data_augmentation": True, "data_augmentation_func": mirrored_batch}
            if tc.symmetry
            else None,
        },
        "actor": {
            **actor,
            "hidden_dims": list(tc.policy_hidden),
            "activation": tc.activation,
            "obs_normalization": tc.normalize_observations,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": max(tc.init_noise_std, 1e-3)},
        },
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": list(tc.value_hidden),
            "activation": tc.activation,
            "obs_normalization": tc.normalize_observations,
        },
    }


def mirrored_batch(env: Any, obs: Any = None, actions: torch.Tensor | None = None) -> tuple[Any, Any]:
    """rsl_rl's symmetry augmentation function: each batch followed by its mirror (``env.mirror``, a
    :class:`~simreal.sim.symmetry.Mirror`): observation groups ``policy`` and ``critic``, and actions."""
    m = env.mirror

    def mirrored(x: torch.Tensor, perm_sign: tuple[Any, Any]) -> torch.Tensor:
        perm, sign = perm_sign
        return x[..., torch.as_tensor(perm)] * torch.as_tensor(sign, dtype=x.dtype)

    out_obs = out_act = None
    if obs is not None:
        twin = obs.clone()
        for group, perm_sign in (("policy", m.policy), ("critic", m.critic)):
            twin[group] = mirrored(obs[group], perm_sign)
        out_obs = torch.cat([obs, twin], dim=0)
    if actions is not None:
        out_act = torch.cat([actions, mirrored(actions, m.action)], dim=0)
    return out_obs, out_act


def _runner(cfg: RunConfig, venv: Any, estimate_dim: int):
    import contextlib
    import os

    from rsl_rl.runners import OnPolicyRunner

    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):  # it prints both models
        return OnPolicyRunner(venv, runner_cfg(cfg, estimate_dim), log_dir=None, device="cpu")


def _estimate_dim(slices: list[slice]) -> int:
    return sum(s.stop - s.start for s in slices)


def _load(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True)


def _actor(actor: Any) -> torch_policy.DeployedActor:
    """rsl_rl's MLPModel -> DeployedActor: mean/(std + eps) normaliser, the MLP (Gaussian mean); an
    estimator's actor with ``pi([x, E(x)])`` as its body."""
    if actor.obs_normalization:
        norm = actor.obs_normalizer
        mean, std = norm.mean.numpy(), (norm.std + norm.eps).numpy()
    else:
        mean, std = torch.zeros(actor.obs_dim).numpy(), torch.ones(actor.obs_dim).numpy()
    body = copy.deepcopy(actor.mlp)
    if isinstance(actor, est.EstimatorModel):
        body = est.EstimatedBody(copy.deepcopy(actor.estimator), body)
    return torch_policy.DeployedActor(body, mean, std).eval()


class Driver:
    """One rsl_rl PPO iteration per ``iterate()`` (the body of ``OnPolicyRunner.learn``)."""

    ext = EXT

    @staticmethod
    def prepare(cfg: RunConfig, env: Any) -> None:
        """ConfigError naming ``train.estimate`` for a term the critic does not observe or the actor does."""
        est.estimate_slices(env, cfg.train.estimate)

    def __init__(self, cfg: RunConfig, env: Any, resume_from: Path | None):
        from simreal.sim.adapter_torch import RslRlVecEnv

        check_observations(cfg, env)
        tc = cfg.train
        torch.manual_seed(cfg.seed)
        self.venv = RslRlVecEnv(env, tc.num_envs, seed=cfg.seed)
        if tc.symmetry:
            from simreal.sim.symmetry import Mirror

            self.venv.mirror = Mirror(env)
        slices = est.estimate_slices(env, tc.estimate)
        self.runner = _runner(cfg, self.venv, _estimate_dim(slices))
        self.alg = self.runner.alg
        self.estimator = None
        if tc.estimate:
            venv = self.venv
            self.estimator = est.EstimatorFit(
                self.alg.actor,
                slices,
                tc.num_updates_per_batch,
                tc.num_minibatches,
                tc.learning_rate,
                mirror=(lambda obs: mirrored_batch(venv, obs)[0]) if tc.symmetry else None,
            )
        self.reward_scale = tc.reward_scaling
        self.steps_per_iteration = tc.num_envs * tc.unroll_length
        self.iteration = 0
        if resume_from is not None:
            d = _load(resume_from)
            self.alg.load(d, None, True)
            self.iteration = int(d.get("iter", 0))
            if self.estimator is not None and "estimator_optimizer_state_dict" in d:
                self.estimator.load_state_dict(d["estimator_optimizer_state_dict"])

    @property
    def env_steps(self) -> int:
        return self.iteration * self.steps_per_iteration

    def iterate(self) -> dict[str, float]:
        alg, venv = self.alg, self.venv
        sums: dict[str, float] = {}
        terms: dict[str, float] = {}  # each reward term summed over the steps' batch means
        obs = venv.get_observations()
        alg.train_mode()
        with torch.inference_mode():
            for _ in range(self.runner.cfg["num_steps_per_env"]):
                actions = alg.act(obs)
                obs, rewards, dones, extras = venv.step(actions)
                alg.process_env_step(obs, rewards * self.reward_scale, dones, extras)
                for k, v in extras[REWARD_TERMS].items():
                    terms[k] = terms.get(k, 0.0) + v
                n = int(dones.sum())
                if n:
                    for k, v in extras["log"].items():  # means over the n envs that finished
                        key = k.lstrip("/")
                        sums[key] = sums.get(key, 0.0) + float(v) * n
                    sums["episode/done"] = sums.get("episode/done", 0.0) + n
            alg.compute_returns(obs)
        fit = self.estimator.fit(alg.storage.observations) if self.estimator is not None else {}
        losses = {**alg.update(), **fit}
        self.iteration += 1
        steps = self.runner.cfg["num_steps_per_env"]
        return {
            **sums,
            **{k: v / steps for k, v in terms.items()},
            **{f"loss/{k}": float(v) for k, v in losses.items()},
        }

    def save(self, ckpt_dir: Path) -> Path:
        d = self.alg.save()
        d["iter"] = self.iteration
        d["infos"] = None
        if self.estimator is not None:
            d["estimator_optimizer_state_dict"] = self.estimator.state_dict()
        buf = io.BytesIO()
        torch.save(d, buf)
        path = ckpt.checkpoint_path(ckpt_dir, self.env_steps, EXT)
        atomic_write_bytes(path, buf.getvalue())
        return path

    def actor(self) -> torch_policy.DeployedActor:
        return _actor(self.alg.get_policy())


def load_actor(
    run_dir: Path, cfg: RunConfig, backend: str | None = None, env: Any | None = None, **env_overrides: Any
) -> tuple[Any, torch_policy.DeployedActor]:
    """(env, deterministic actor) from the run's policy checkpoint (``checkpoint.policy_checkpoint``), for export,
    eval and play."""
    from rsl_rl.utils import resolve_class
    from tensordict import TensorDict

    env = env if env is not None else make_env(cfg, backend=backend, **env_overrides)
    check_observations(cfg, env)
    path = ckpt.policy_checkpoint(run_dir, cfg.train.keep_best, EXT)
    model, kwargs = resolve_class(runner_cfg(cfg, _estimate_dim(est.estimate_slices(env, cfg.train.estimate)))["actor"])
    obs = TensorDict({"policy": torch.zeros(1, env.observation_size)}, batch_size=[1])
    actor = model(obs, {"actor": ["policy"]}, "actor", env.action_size, **kwargs)
    actor.load_state_dict(_load(path)["actor_state_dict"])
    return env, _actor(actor.eval())


TRAINER = TorchTrainer("rsl_rl", Driver, load_actor)
