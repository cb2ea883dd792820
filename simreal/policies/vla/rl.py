"""RL fine-tuning of a cloned VLA in simulation (``simreal finetune-vla``): PPO on the action
bins' log-probabilities with the sparse success reward.

Per round: ``train.vla.rl.num_envs`` episodes are rolled out with actions sampled from the
policy's per-dimension categorical distributions at temperature tau (``simreal/policies/vla/rollout.py``:
reward 1 on each step the task's success criterion holds, else 0). Then, over
``epochs`` passes of minibatches (PPO, Schulman et al. 2017; VLA-RL's objective on the action
tokens)::

    log pi(a | o)  = sum_j log softmax(logits_j(o) / tau)[b_j]
    rho            = exp(log pi_theta(a | o) - log pi_old(a | o))
    L_pi           = - mean min(rho A, clip(rho, 1 - eps, 1 + eps) A)  - c_H mean H(pi_theta(. | o))
    A              = GAE(gamma, lambda) of the critic V_phi, standardised per round

The episode's end is terminal (the task is judged there). The critic ``V_phi`` is an MLP on the
state and the task's noise-free scene state, which the simulator has and the robot does not (an
asymmetric critic: the policy never reads it, so the bundle does not need it). A round's
updates stop once the approximate KL of the policy as updated so far, mean(log pi_old -
log pi_theta) on the next minibatch, exceeds ``target_kl`` (stable-baselines3's early stop),
with a small learning rate: both keep the policy near the cloned one, which is
what VLA-RL's users lose when performance degrades during RL.

The run directory is a new one: ``config.yaml`` (the cloned run's, ``train.vla.rl`` as given,
``train.vla.finetuned_from``), ``checkpoints/policy.safetensors`` and ``tokenizer.json`` (the
policy after the latest round, as :func:`~simreal.policies.vla.model.save_vla` writes them),
``checkpoints/critic.safetensors``, and ``metrics.csv`` (a row per round: sampled success,
return, KL, clipped share, updates, wall time; the deterministic evaluation before the first
round and after the last; ``success_reward``, the mean per episode of the reward PPO optimises;
``task_return``, the task's own shaped return, for reference). ``simreal eval`` and
``simreal export`` take it as any run. An
interrupted fine-tuning keeps the latest finished round's policy; it does not resume (the
optimiser's moments are not saved).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from simreal.policies.vla.model import CHECKPOINT, VLA, save_vla
from simreal.policies.vla.rollout import Rollout, evaluate, rollout

CRITIC = Path("checkpoints") / "critic.safetensors"
CRITIC_FORMAT = "simreal-vla-critic/1"


class Critic(nn.Module):
    """V_phi(x) on the standardised privileged input (state and scene state)."""

    mean: torch.Tensor  # buffers (register_buffer in __init__)
    std: torch.Tensor

    def __init__(self, mean: np.ndarray, std: np.ndarray, hidden: tuple[int, ...]):
        super().__init__()
        sizes = (len(mean), *hidden)
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ELU()]
        self.net = nn.Sequential(*layers, nn.Linear(sizes[-1], 1))
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(np.maximum(std, 1e-2), dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)[..., 0]


def gae(
    reward: np.ndarray, value: np.ndarray, done: np.ndarray, alive: np.ndarray, gamma: float, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """(advantages, returns), each (T, N): generalised advantage estimation over each env's first
    episode, its last step terminal (no bootstrap past ``done`` or the rollout's end)."""
    T = reward.shape[0]
    adv = np.zeros_like(reward)
    last = np.zeros(reward.shape[1], np.float32)
    for t in reversed(range(T)):
        nonterminal = (~done[t]) & (t + 1 < T)
        v_next = value[t + 1] if t + 1 < T else np.zeros_like(last)
        delta = reward[t] + gamma * v_next * nonterminal - value[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = np.where(alive[t], last, 0.0)
    return adv, adv + value


@dataclasses.dataclass(frozen=True)
class FinetuneResult:
    before: dict[str, float]  # the cloned policy's deterministic evaluation
    after: dict[str, float]  # the fine-tuned policy's
    rounds: int
    wall_s: float


def _frames(ro: Rollout) -> dict[str, torch.Tensor]:
    """The rollout's alive frames, flattened: what a PPO minibatch indexes."""
    keep = ro.alive.reshape(-1)
    env_of = np.broadcast_to(np.arange(ro.alive.shape[1]), ro.alive.shape).reshape(-1)[keep]
    flat = {
        "state": ro.state,
        "bins": ro.bins,
        "logp": ro.logp,
        "privileged": ro.privileged,
        **{f"image/{c}": im for c, im in ro.images.items()},
    }
    out = {k: torch.from_numpy(np.ascontiguousarray(v.reshape(-1, *v.shape[2:])[keep])) for k, v in flat.items()}
    out["ids"], out["mask"] = torch.from_numpy(ro.ids[env_of]), torch.from_numpy(ro.mask[env_of])
    return out


def finetune(
    run_dir: Path,
    cfg: Any,
    model: VLA,
    tok: Any,
    env: Any,
    on_round: Callable[[int, dict[str, float]], None] | None = None,
) -> FinetuneResult:
    """PPO rounds on ``model`` in ``env`` (module docstring), checkpoints and metrics in ``run_dir``."""
    from simreal.rundir import MetricsCsv
    from simreal.safetensors_io import save_tensors

    t0 = time.time()
    rc = cfg.train.vla.rl
    tau = rc.temperature
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    metrics = MetricsCsv(run_dir / "metrics.csv")
    before = evaluate(env, cfg.task, model, tok, rc.eval_episodes, seed=cfg.seed + 1)
    metrics.append({"round": 0, "wall_s": time.time() - t0, **{f"eval_{k}": v for k, v in before.items()}})
    metrics.flush()
    critic: Critic | None = None
    opt = torch.optim.Adam(model.parameters(), lr=rc.learning_rate)
    for it in range(1, rc.iterations + 1):
        ro = rollout(
            env,
            cfg.task,
            model,
            tok,
            rc.num_envs,
            seed=cfg.seed + 1000 * it,
            sample=True,
            generator=gen,
            temperature=tau,
        )
        if critic is None:  # its input's standardisation: the first round's states
            live = ro.privileged[ro.alive]
            critic = Critic(live.mean(0), live.std(0), rc.critic_hidden)
            critic_opt = torch.optim.Adam(critic.parameters(), lr=rc.critic_learning_rate)
        with torch.no_grad():
            value = critic(torch.from_numpy(ro.privileged)).numpy()
        adv, ret = gae(ro.reward, value, ro.done, ro.alive, rc.discounting, rc.gae_lambda)
        data = _frames(ro)
        keep = ro.alive.reshape(-1)
        a = torch.from_numpy(adv.reshape(-1)[keep])
        data["adv"] = (a - a.mean()) / (a.std() + 1e-8)
        data["ret"] = torch.from_numpy(ret.reshape(-1)[keep])
        model.train()
        kls, clipped, updates, stop = [], [], 0, False
        for _ in range(rc.epochs):
            for b in torch.randperm(len(a), generator=gen).split(rc.batch_size):
                logits = (
                    model(
                        data["state"][b],
                        data["ids"][b],
                        data["mask"][b],
                        *(data[f"image/{c}"][b] for c in model.spec.cameras),
                    )
                    / tau
                )
                logp_all = F.log_softmax(logits, -1)
                logp = torch.gather(logp_all, 2, data["bins"][b][..., None])[..., 0].sum(-1)
                ratio = torch.exp(logp - data["logp"][b])
                adv_b = data["adv"][b]
                loss_pi = -torch.min(
                    ratio * adv_b, torch.clamp(ratio, 1 - rc.clipping_epsilon, 1 + rc.clipping_epsilon) * adv_b
                ).mean()
                entropy = -(logp_all.exp() * logp_all).sum(-1).sum(-1).mean()
                opt.zero_grad()
                (loss_pi - rc.entropy_cost * entropy).backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                v = critic(data["privileged"][b])
                critic_opt.zero_grad()
                F.mse_loss(v, data["ret"][b]).backward()
                critic_opt.step()
                updates += 1
                with torch.no_grad():
                    kls.append(float((data["logp"][b] - logp).mean()))
                    clipped.append(float(((ratio - 1).abs() > rc.clipping_epsilon).float().mean()))
                if rc.target_kl > 0 and kls[-1] > rc.target_kl:
                    stop = True
                    break
            if stop:
                break
        model.eval()
        save_vla(run_dir / CHECKPOINT, model, tok, {"round": it, "finetuned_from": cfg.train.vla.finetuned_from})
        save_tensors(run_dir / CRITIC, critic.state_dict(), CRITIC_FORMAT, {"round": str(it)})
        row = {
            "round": it,
            "wall_s": time.time() - t0,
            "success_sampled": ro.stats.get("success", float("nan")),
            "success_reward": float(ro.reward[ro.alive].sum() / ro.alive.shape[1]),
            "task_return": ro.stats.get("return", float("nan")),
            "approx_kl": float(np.mean(kls)),
            "clip_fraction": float(np.mean(clipped)),
            "updates": updates,
            "kl_stop": float(stop),
        }
        metrics.append(row)
        metrics.flush()
        if on_round is not None:
            on_round(it, row)
    after = evaluate(env, cfg.task, model, tok, rc.eval_episodes, seed=cfg.seed + 1)
    metrics.rows[-1].update({f"eval_{k}": v for k, v in after.items()})
    metrics.flush()
    return FinetuneResult(before=before, after=after, rounds=rc.iterations, wall_s=time.time() - t0)
