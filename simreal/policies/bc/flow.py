"""Flow matching over action chunks, as ``f_theta`` of ``simreal train-bc --policy flow``: the
diffusion family's action head (straight-path conditional flow matching, Lipman et al. 2023 and
Liu et al. 2023's rectified flow; the action expert of pi0), written for the BC loop's tensors.

    net = build(env, cfg.train)              # FlowPolicy(n, m, k, cfg.train.flow)
    y = net(x)                               # x (N, n) -> y (N, k, m): S Euler steps from a_0 = 0
    err = flow_matching_error(net, x, y_true, generator)   # (N, k, m), averaged over valid steps

Training, with ``x`` the normalised observation and ``y`` the normalised chunk of the next ``k``
actions (``simreal/policies/bc/cloning.py``'s targets, padded past the episode's end)::

    eps ~ N(0, I) (k, m),   tau ~ U(0, 1)         one of each per sample
    a_tau = (1 - tau) eps + tau y                 the straight path from noise to the chunk
    loss  = mean over valid steps and dimensions of |v_theta(x, a_tau, tau) - (y - eps)|^2

``v_theta`` is an MLP on ``[x, a_tau flattened, phi(tau)]`` (``train.flow.hidden``, SiLU), with
``phi(tau) = [sin(2 pi f tau), cos(2 pi f tau)]`` over :data:`FREQUENCIES` (diffusion policy's
sinusoidal time features).

Deployed: ``a_0 = 0``, then ``a_{i+1} = a_i + v_theta(x, a_i, i / S) / S`` for ``i < S``
(``train.flow.steps``), and ``a_S`` is the chunk, ensembled over steps like ACT's
(:mod:`simreal.action_chunk`). The steps are unrolled into ``policy.onnx``. Starting at the noise's
mean instead of a sample makes the policy deterministic, one chunk per observation, which the
bundle contract (the same action in eval, rehearsal and on the robot) needs. The cost is
diversity: a multimodal demonstration set is followed along the flow of the central noise,
not sampled. Validation scores that deployed chunk: ``simreal/policies/bc/cloning.py`` keeps the epoch whose
sampled chunks have the lowest squared error.

Written here rather than taken from LeRobot's diffusion policy (a U-Net over image features,
DDPM/DDIM schedulers from ``diffusers``) because lerobot does not install beside this torch, and
the state-only head is a few lines over torch.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from simreal.action_chunk import ActionChunk
from simreal.policies.demos.record import state_size

#: Frequencies [cycles per unit tau] of the time features phi(tau).
FREQUENCIES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


class FlowPolicy(nn.Module):
    """Normalised observation (N, n) -> normalised action chunk (N, k, m) (module docstring)."""

    frequencies: torch.Tensor  # a buffer (register_buffer in __init__)

    def __init__(self, obs_size: int, action_size: int, chunk_size: int, cfg: Any):
        super().__init__()
        self.chunk_size, self.action_size, self.steps = chunk_size, action_size, int(cfg.steps)
        self.register_buffer("frequencies", torch.tensor(FREQUENCIES, dtype=torch.float32))
        width = obs_size + chunk_size * action_size + 2 * len(FREQUENCIES)
        layers: list[nn.Module] = []
        for h in cfg.hidden:
            layers += [nn.Linear(width, h), nn.SiLU()]
            width = h
        self.velocity_net = nn.Sequential(*layers, nn.Linear(width, chunk_size * action_size))

    def velocity(self, x: torch.Tensor, a: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """v_theta(x, a, tau): (N, n), (N, k, m), (N,) -> (N, k, m)."""
        angle = 2.0 * math.pi * tau[:, None] * self.frequencies
        h = torch.cat([x, a.flatten(1), torch.sin(angle), torch.cos(angle)], dim=-1)
        return self.velocity_net(h).view(-1, self.chunk_size, self.action_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x.new_zeros(x.shape[0], self.chunk_size, self.action_size)
        for i in range(self.steps):
            a = a + self.velocity(x, a, x.new_full((x.shape[0],), i / self.steps)) / self.steps
        return a


def flow_matching_error(net: FlowPolicy, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The elementwise flow-matching error of a batch (module docstring), ``x`` (N, n), ``y``
    (N, k, m) -> (N, k, m); noise and times from ``generator``. The loss is its mean over the
    chunk steps inside the episode (``bc_actor.masked``)."""
    eps = torch.randn(y.shape, generator=generator)
    tau = torch.rand(y.shape[0], generator=generator)
    a_tau = (1.0 - tau[:, None, None]) * eps + tau[:, None, None] * y
    return torch.square(net.velocity(x, a_tau, tau) - (y - eps))


def action_chunk(env: Any, tc: Any) -> ActionChunk:
    """The chunk ``train.flow`` asks for at ``env``'s control rate (as ACT's: ``chunk_size``, or
    0.4 s of control steps when it is 0)."""
    return ActionChunk.at_rate(tc.flow.chunk_size, tc.flow.temporal_ensemble_coeff, float(env.robot.control_rate_hz))


def build(env: Any, tc: Any) -> FlowPolicy:
    """``f_theta`` of ``train.policy: flow`` for ``env``."""
    return FlowPolicy(state_size(env), int(env.action_size), action_chunk(env, tc).size, tc.flow)
