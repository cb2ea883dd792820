"""``trainer=sb3``: stable-baselines3 PPO or SAC on the task through ``SB3VecEnv`` (a CPU baseline).

    simreal train arm-reach trainer=sb3
    simreal train quadrotor-hover trainer=sb3 algorithm=sac
    simreal train --resume RUN_DIR train.num_timesteps=4000000

PPOConfig -> SB3 PPO::

    unroll_length          n_steps                 num_updates_per_batch  n_epochs
    num_envs*unroll_length/num_minibatches  batch_size
    learning_rate          learning_rate (constant) discounting           gamma
    gae_lambda             gae_lambda              clipping_epsilon       clip_range
    entropy_cost           ent_coef                max_grad_norm          max_grad_norm
    policy_hidden/value_hidden  net_arch pi/vf     activation             activation_fn
    init_noise_std         log_std_init = log(std) normalize_observations VecNormalize(norm_obs, clip_obs=10)
    reward_scaling         rewards multiplied before PPO sees them

SACConfig -> SB3 SAC (one training step = one step of every env, as in ``simreal/policies/rl/sac.py``)::

    max_replay_size        buffer_size             min_replay_size        learning_starts
    batch_size, tau        batch_size, tau         discounting            gamma
    grad_updates_per_step  gradient_steps (train_freq 1)  learning_rate   learning_rate
    policy_hidden/q_hidden net_arch pi/qf          (Brax's target entropy) target_entropy = -m/2

Dict observations (a task with cameras, ``arm-push-pixels``: ``state`` plus ``pixels/<camera>``
(H, W, 3) uint8; ``SB3VecEnv`` leaves the critic's ``privileged_state`` out) take SB3's
``MultiInputPolicy``: its ``CombinedExtractor`` runs a NatureCNN (``CNN_FEATURES`` outputs) on each
image, which SB3 scales to [0, 1] and turns channel-first (``VecTransposeImage``), and
concatenates the features with the state before the ``net_arch`` MLPs. ``VecNormalize``
normalises the ``state`` key alone (``norm_obs_keys``): images keep their fixed scale.

SB3 saves a SAC replay buffer only by pickling, so a resumed SB3 SAC run restores networks,
optimisers and temperature but not the buffer: it collects ``min_replay_size`` transitions
again before updating (the ``brax`` trainer's SAC checkpoints its buffer and resumes exactly).

SB3's logger records to memory only (no stdout, no files): its default would create a
``/tmp/SB3-<date>`` folder per run and leave it behind; the loop logs the losses it reports.

Checkpoints: ``checkpoints/step_<env_steps>.zip`` (SB3's own format, with the optimiser) and
``step_<env_steps>.normalizer.npz`` (VecNormalize's running mean/var/count of the flat
observation, or of ``state``, as plain arrays, so nothing here is unpickled). Resume, eval, play
and export rebuild the model from the run's config and load only the zip's tensors
(``set_parameters``: ``torch.load(weights_only=True)``); the env restarts.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import jax
import numpy as np
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecNormalize, VecTransposeImage
from torch import nn

from simreal.errors import DataFileError
from simreal.policies import checkpoint as ckpt
from simreal.policies import torch_policy
from simreal.policies.run_config import RunConfig, make_env
from simreal.policies.trainers.torch_loop import TorchTrainer
from simreal.sim.adapter_core import REWARD_TERMS
from simreal.yaml_io import atomic_write_bytes

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "swish": nn.SiLU}
EXT = "zip"
CLIP_OBS = 10.0
EPS = 1e-8  # VecNormalize's epsilon: std = sqrt(var + EPS)
#: The normalised key of a dict observation (the proprioceptive vector beside the images).
STATE_KEY = "state"
#: Features per image from SB3's NatureCNN (its default, 256, is sized for Atari on a GPU).
CNN_FEATURES = 64


class _ScaledReward(VecEnvWrapper):
    """Rewards times ``scale`` (PPOConfig.reward_scaling)."""

    def __init__(self, venv, scale: float):
        super().__init__(venv)
        self.scale = scale

    def reset(self):
        return self.venv.reset()

    def step_wait(self):
        obs, rew, done, infos = self.venv.step_wait()
        return obs, rew * self.scale, done, infos


class _EpisodeSums(BaseCallback):
    """Sums 'episode/<name>' over the episodes that end, and each reward term over the steps
    (SB3VecEnv puts both in ``infos``); :meth:`metrics` gives the sums and the terms' means."""

    def __init__(self) -> None:
        super().__init__()
        self.sums: dict[str, float] = {}
        self.terms: dict[str, float] = {}
        self.steps = 0

    def metrics(self) -> dict[str, float]:
        """'episode/<name>' sums and 'reward/<name>' means over the steps (as metrics.csv logs them)."""
        return {**self.sums, **{k: v / max(self.steps, 1) for k, v in self.terms.items()}}

    def _on_step(self) -> bool:
        infos = self.locals["infos"]
        if infos and REWARD_TERMS in infos[0]:
            self.steps += 1
            for k, v in infos[0][REWARD_TERMS].items():
                self.terms[k] = self.terms.get(k, 0.0) + v
        for info in infos:
            if "episode" not in info:
                continue
            vals = {k: v for k, v in info.items() if k.startswith("episode/")}
            vals["episode/return"] = info["episode"]["r"]
            vals["episode/length"] = info["episode"]["l"]
            for k, v in vals.items():
                self.sums[k] = self.sums.get(k, 0.0) + float(v)
        return True


def _policy_name(space: gym.Space) -> str:
    """SB3's policy alias for an observation space: ``MultiInputPolicy`` for a dict, else ``MlpPolicy``."""
    return "MultiInputPolicy" if isinstance(space, gym.spaces.Dict) else "MlpPolicy"


def make_model(cfg: RunConfig, venv: Any) -> PPO | SAC:
    """SB3 PPO or SAC from our config (module docstring), logging to memory only."""
    tc = cfg.train
    policy = _policy_name(venv.observation_space)
    model: PPO | SAC
    if cfg.algorithm == "sac":
        model = SAC(
            policy,
            venv,
            learning_rate=tc.learning_rate,
            buffer_size=tc.max_replay_size,
            learning_starts=tc.min_replay_size,
            batch_size=tc.batch_size,
            tau=tc.tau,
            gamma=tc.discounting,
            train_freq=1,
            gradient_steps=tc.grad_updates_per_step,
            target_entropy=-0.5 * venv.action_space.shape[0],
            seed=cfg.seed,
            device="cpu",
            verbose=0,
            policy_kwargs=_sac_net(tc, policy),
        )
    else:
        model = PPO(
            policy,
            venv,
            n_steps=tc.unroll_length,
            batch_size=tc.num_envs * tc.unroll_length // tc.num_minibatches,
            n_epochs=tc.num_updates_per_batch,
            learning_rate=tc.learning_rate,
            gamma=tc.discounting,
            gae_lambda=tc.gae_lambda,
            clip_range=tc.clipping_epsilon,
            ent_coef=tc.entropy_cost,
            max_grad_norm=tc.max_grad_norm,
            seed=cfg.seed,
            device="cpu",
            verbose=0,
            policy_kwargs={**_ppo_net(tc, policy), "log_std_init": float(np.log(max(tc.init_noise_std, 1e-3)))},
        )
    model.set_logger(Logger(folder=None, output_formats=[]))  # a custom logger: learn() keeps it
    return model


def _features(policy: str) -> dict[str, Any]:
    """Feature-extractor settings: a small CNN per image for ``MultiInputPolicy``."""
    return {"features_extractor_kwargs": {"cnn_output_dim": CNN_FEATURES}} if policy == "MultiInputPolicy" else {}


def _ppo_net(tc: Any, policy: str) -> dict[str, Any]:
    return {
        "net_arch": {"pi": list(tc.policy_hidden), "vf": list(tc.value_hidden)},
        "activation_fn": ACTIVATIONS[tc.activation],
        **_features(policy),
    }


def _sac_net(tc: Any, policy: str) -> dict[str, Any]:
    return {
        "net_arch": {"pi": list(tc.policy_hidden), "qf": list(tc.q_hidden)},
        "activation_fn": ACTIVATIONS[tc.activation],
        **_features(policy),
    }


def _actor(policy: Any, obs_mean: np.ndarray, obs_std: np.ndarray, obs_clip: float) -> torch_policy.DeployedActor:
    """The deterministic actor: PPO's Gaussian mean; SAC's squashed mean, tanh(mu(latent))."""
    import copy

    if hasattr(policy, "actor"):  # SAC
        body = nn.Sequential(copy.deepcopy(policy.actor.latent_pi), copy.deepcopy(policy.actor.mu), nn.Tanh())
    else:
        body = nn.Sequential(copy.deepcopy(policy.mlp_extractor.policy_net), copy.deepcopy(policy.action_net))
    return torch_policy.DeployedActor(body, obs_mean, obs_std, obs_clip).eval()


class DictActor:
    """The deterministic policy of a ``MultiInputPolicy`` on dict observations (eval and play;
    the bundle has no image inputs, so it is not exported).

    ``act(obs)``: ``obs`` a dict of (n,)/(H, W, 3) arrays, or of (N, ...) batches, as the env gives
    them (keys the policy does not read, ``privileged_state``, are dropped); ``state`` is
    normalised as VecNormalize did, x = clip((state - mean) / std, -c, c), then SB3's ``predict``
    (images channel-first and scaled to [0, 1], the Gaussian's mean, or SAC's squashed mean,
    clipped to the action space [-1, 1]).
    """

    def __init__(self, policy: Any, obs_mean: np.ndarray, obs_std: np.ndarray, obs_clip: float):
        self.policy, self.obs_mean, self.obs_std, self.obs_clip = policy, obs_mean, obs_std, obs_clip

    def act(self, obs: Any) -> np.ndarray:
        obs = {k: np.asarray(v) for k, v in obs.items() if k in self.policy.observation_space.spaces}
        obs[STATE_KEY] = np.clip((obs[STATE_KEY] - self.obs_mean) / self.obs_std, -self.obs_clip, self.obs_clip).astype(
            np.float32
        )
        return self.policy.predict(obs, deterministic=True)[0]


def _policy_space(space: gym.Space) -> gym.Space:
    """The observation space SB3 builds a policy on: channel-last images turned channel-first, as
    by the ``VecTransposeImage`` SB3 wraps such an env in while training."""
    if not isinstance(space, gym.spaces.Dict):
        return space
    return gym.spaces.Dict(
        {
            k: VecTransposeImage.transpose_space(s, k)
            if isinstance(s, gym.spaces.Box) and is_image_space(s) and not is_image_space_channels_first(s)
            else s
            for k, s in space.spaces.items()
        }
    )


def _state_rms(norm: VecNormalize) -> RunningMeanStd:
    """VecNormalize's running statistics of the flat observation, or of ``state`` in a dict."""
    rms = norm.obs_rms
    return rms[STATE_KEY] if isinstance(rms, Mapping) else rms


def _normalizer_path(ckpt: Path) -> Path:
    return ckpt.with_suffix(".normalizer.npz")


def _normalizer(ckpt: Path) -> dict[str, np.ndarray]:
    """The checkpoint's VecNormalize statistics (its side file); DataFileError naming the file
    when it is missing (the checkpoint is unusable without it: the policy saw normalised input)."""
    path = _normalizer_path(ckpt)
    if not path.is_file():
        raise DataFileError(
            str(path),
            f"missing: {ckpt.name} was trained on normalised observations and needs "
            "this side file (restore it, or remove the checkpoint to use an older one)",
        )
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


class Driver:
    """One SB3 PPO iteration (SAC: ``steps_per_iteration`` training steps) per ``iterate()``
    (see ``trainers.torch_loop``)."""

    ext = EXT

    @staticmethod
    def prepare(cfg: RunConfig, env: Any) -> None:
        """Nothing beyond the shared observation check (``TorchTrainer.prepare``)."""

    def __init__(self, cfg: RunConfig, env: Any, resume_from: Path | None):
        from simreal.sim.adapter_sb3 import SB3VecEnv

        tc = cfg.train
        venv: VecEnv = SB3VecEnv(env, tc.num_envs, seed=cfg.seed)
        if tc.reward_scaling != 1.0:
            venv = _ScaledReward(venv, tc.reward_scaling)
        keys = [STATE_KEY] if isinstance(venv.observation_space, gym.spaces.Dict) else None
        self.norm = (
            VecNormalize(
                venv,
                norm_obs=True,
                norm_reward=False,
                clip_obs=CLIP_OBS,
                epsilon=EPS,
                gamma=tc.discounting,
                norm_obs_keys=keys,
            )
            if tc.normalize_observations
            else None
        )
        self.model = make_model(cfg, self.norm or venv)
        self.steps_per_iteration = tc.num_envs * (
            tc.steps_per_iteration if cfg.algorithm == "sac" else tc.unroll_length
        )
        if resume_from is not None:
            self.model.set_parameters(str(resume_from), device="cpu")  # tensors only, weights_only load
            self.model.num_timesteps = ckpt.checkpoint_steps(resume_from)
            if cfg.algorithm == "sac":  # the buffer is not restored: refill it before updating
                assert isinstance(self.model, SAC)  # make_model's for algorithm=sac
                self.model.learning_starts = self.model.num_timesteps + tc.min_replay_size
            if cfg.algorithm == "sac":  # said where the user sees the resume
                print(
                    "resume: SAC's replay buffer is not restored; the first "
                    f"{tc.min_replay_size} steps refill it before updates go on",
                    file=sys.stderr,
                )
            if self.norm is not None:
                z = _normalizer(resume_from)
                rms = _state_rms(self.norm)
                rms.mean, rms.var, rms.count = z["mean"], z["var"], float(z["count"])

    @property
    def env_steps(self) -> int:
        return int(self.model.num_timesteps)

    def iterate(self) -> dict[str, float]:
        cb = _EpisodeSums()
        self.model.learn(self.steps_per_iteration, callback=cb, reset_num_timesteps=False, log_interval=10**9)
        losses = {
            f"loss/{k.split('/', 1)[1]}": float(v)
            for k, v in self.model.logger.name_to_value.items()
            if k.startswith("train/")
        }
        return {**cb.metrics(), **losses}

    def save(self, ckpt_dir: Path) -> Path:
        path = ckpt.checkpoint_path(ckpt_dir, self.env_steps, EXT)
        if self.norm is not None:
            rms, buf = _state_rms(self.norm), io.BytesIO()
            np.savez(buf, mean=rms.mean, var=rms.var, count=np.asarray(rms.count))
            atomic_write_bytes(_normalizer_path(path), buf.getvalue())
        zbuf = io.BytesIO()
        self.model.save(zbuf)
        atomic_write_bytes(path, zbuf.getvalue())  # the zip last: it is what marks a checkpoint complete
        return path

    def _normalizer(self) -> tuple[np.ndarray, np.ndarray, float]:
        n = _state_size(self.model.observation_space)
        if self.norm is None:
            return np.zeros(n), np.ones(n), float("inf")
        rms = _state_rms(self.norm)
        return rms.mean, np.sqrt(rms.var + EPS), CLIP_OBS

    def actor(self) -> torch_policy.DeployedActor | DictActor:
        return _deterministic(self.model.policy, *self._normalizer())


def _state_size(space: gym.Space) -> int:
    """Length of the normalised vector: the flat observation, or a dict's ``state``."""
    shape = (space[STATE_KEY] if isinstance(space, gym.spaces.Dict) else space).shape
    assert shape is not None  # a Box's (SB3VecEnv's spaces)
    return int(shape[0])


def _deterministic(
    policy: Any, obs_mean: np.ndarray, obs_std: np.ndarray, obs_clip: float
) -> torch_policy.DeployedActor | DictActor:
    """The policy's deterministic actor: a ``DictActor`` on dict observations, else the exportable MLP."""
    if isinstance(policy.observation_space, gym.spaces.Dict):
        return DictActor(policy, obs_mean, obs_std, obs_clip)
    return _actor(policy, obs_mean, obs_std, obs_clip)


def load_actor(
    run_dir: Path, cfg: RunConfig, backend: str | None = None, env: Any | None = None, **env_overrides: Any
) -> tuple[Any, torch_policy.DeployedActor | DictActor]:
    """(env, deterministic actor) from the run's policy checkpoint (``checkpoint.policy_checkpoint``), for export,
    eval and play."""
    from stable_baselines3.common.save_util import load_from_zip_file

    from simreal.sim.adapter_sb3 import SB3_HIDDEN_KEYS, action_space, observation_space

    env = env if env is not None else make_env(cfg, backend=backend, **env_overrides)
    path = ckpt.policy_checkpoint(run_dir, cfg.train.keep_best, EXT)
    spec = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs  # traced: nothing is stepped or rendered
    obs_space = _policy_space(observation_space(spec, SB3_HIDDEN_KEYS))  # as SB3VecEnv gave it to training
    tc = cfg.train
    name = _policy_name(obs_space)
    algo, net = (SAC, _sac_net(tc, name)) if cfg.algorithm == "sac" else (PPO, _ppo_net(tc, name))
    policy = algo.policy_aliases[name](obs_space, action_space(env), lambda _: tc.learning_rate, **net)
    _, params, _ = load_from_zip_file(str(path), device="cpu", load_data=False)  # torch.load(weights_only=True)
    policy.load_state_dict(params["policy"])  # type: ignore[arg-type]  # a state dict; SB3 types params' values Tensor
    n = _state_size(obs_space)
    mean, std, clip = np.zeros(n), np.ones(n), float("inf")
    if tc.normalize_observations:
        z = _normalizer(path)
        mean, std, clip = z["mean"], np.sqrt(z["var"] + EPS), CLIP_OBS
    return env, _deterministic(policy, mean, std, clip)


TRAINER = TorchTrainer("sb3", Driver, load_actor)
