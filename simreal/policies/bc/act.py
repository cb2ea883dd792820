"""ACT, the action chunking transformer (Zhao et al. 2023, "Learning Fine-Grained Bimanual
Manipulation with Low-Cost Hardware"), as ``f_theta`` of ``simreal train-bc --policy act``:
the normalised observation in, the normalised chunk of the next ``k`` actions out.

    net = build(env, cfg.train)              # ACT(term sizes, m, k, cfg.train.act)
    y = net(x)                               # x (N, n) -> y (N, k, m), y[:, j] the action of step t+j

The computation (``d = dim_model``; LeRobot's ``modeling_act.py`` names in brackets)::

    z_i    = W_i x_i + b_i + e_i             one token per observation term i (joint_pos_rel,
                                             joint_vel, target_pos_w ...) [encoder_*_input_proj],
                                             e_i a learned position [encoder_1d_feature_pos_embed]
    memory = Encoder(z)                      n_encoder_layers post-norm self-attention blocks
    h      = Decoder(q, memory)              k learned queries q_j (DETR's object queries)
                                             [decoder_pos_embed]; n_decoder_layers blocks of
                                             self-attention, cross-attention to memory, feed-forward
    y_j    = W_a h_j + b_a                   [action_head]

fitted by ``simreal/policies/bc/cloning.py`` with ACT's loss, the L1 error averaged over the chunk's steps that
lie inside the episode (LeRobot's ``action_is_pad`` mask), and deployed with the temporal
ensembling of :mod:`simreal.action_chunk`.

What differs from ACT, and why:
- deterministic: no CVAE (LeRobot's ``use_vae: false``). The CVAE's latent style variable models
  the variety of human demonstrations; a scripted teacher has one answer per state. Without
  it ACT's latent token is a constant, so it is left out of the memory.
- state only: ACT's ResNet image tokens are not built (a bundle has no image inputs yet); the
  state is split into one token per observation term where ACT has one per state vector
  (``robot_state``, ``env_state``), so attention can weigh the goal against the joints.
- positions are added to the tokens once, at the input, as ``torch.nn.Transformer`` layers
  take them (ACT adds them to queries and keys in every layer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from simreal.action_chunk import ActionChunk


class ACT(nn.Module):
    """Normalised observation (N, n) -> normalised action chunk (N, k, m) (module docstring)."""

    def __init__(self, term_sizes: Sequence[int], action_size: int, chunk_size: int, cfg: Any):
        super().__init__()
        d = cfg.dim_model
        self.term_sizes = tuple(int(s) for s in term_sizes)
        self.chunk_size = chunk_size
        self.encoder_input_proj = nn.ModuleList(nn.Linear(s, d) for s in self.term_sizes)
        self.encoder_pos_embed = nn.Embedding(len(self.term_sizes), d)
        self.decoder_pos_embed = nn.Embedding(chunk_size, d)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, cfg.n_heads, cfg.dim_feedforward, cfg.dropout, batch_first=True),
            cfg.n_encoder_layers,
            enable_nested_tensor=False,
        )
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d, cfg.n_heads, cfg.dim_feedforward, cfg.dropout, batch_first=True),
            cfg.n_decoder_layers,
            norm=nn.LayerNorm(d),
        )  # ACT's decoder ends with a LayerNorm
        self.action_head = nn.Linear(d, action_size)
        for p in [*self.encoder.parameters(), *self.decoder.parameters()]:
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)  # as ACT's _reset_parameters

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        terms = torch.split(x, self.term_sizes, dim=-1)  # type: ignore[arg-type]  # any int sequence; stub: list
        tokens = torch.stack([proj(t) for proj, t in zip(self.encoder_input_proj, terms)], dim=1)  # (N, T, d)
        memory = self.encoder(tokens + self.encoder_pos_embed.weight)
        queries = self.decoder_pos_embed.weight.unsqueeze(0).expand(x.shape[0], -1, -1)  # (N, k, d)
        return self.action_head(self.decoder(queries, memory))  # (N, k, m)


def action_chunk(env: Any, tc: Any) -> ActionChunk:
    """The chunk ``train.act`` asks for at ``env``'s control rate: ``chunk_size``, or
    ``action_chunk.CHUNK_S`` of control steps when it is 0; with its ensembling coefficient."""
    return ActionChunk.at_rate(tc.act.chunk_size, tc.act.temporal_ensemble_coeff, float(env.robot.control_rate_hz))


def build(env: Any, tc: Any) -> ACT:
    """``f_theta`` of ``train.policy: act`` for ``env``: a token per term of each observation frame."""
    return ACT(
        [t["size"] for t in env.obs_layout] * env.cfg.obs_history_steps,
        int(env.action_size),
        action_chunk(env, tc).size,
        tc.act,
    )
