"""SAC on Brax's building blocks, in one readable loop with resumable state.

The algorithm is Brax's (Haarnoja et al. 2018, with the learned temperature of the
"applications" paper): its losses (``sac.losses.make_losses``: twin-Q critic with a target
network, the tanh-Gaussian actor maximising ``min(Q1, Q2) - alpha log pi``, the temperature
driven to the target entropy ``-m/2``), its networks (``networks.make_policy_network``,
``make_q_network``), its uniform replay buffer (``replay_buffers.UniformSamplingQueue``), its
actor step and its running observation statistics. What this module adds is what Brax's
``sac.train`` keeps to itself, as in ``ppo.py``:

- the *whole* training state (networks, target networks, Adam moments, temperature,
  normaliser, env states, the replay buffer and its sampling key, the PRNG key) is one
  pytree, checkpointed atomically, so ``--resume`` continues bit for bit;
- a callback after every iteration (progress, metrics.csv, early stop);
- separate actor and critic widths, and no ``pmap``: with ``train.devices`` the envs are
  split over a device mesh (``devices.py``; the replay buffer is replicated).

One iteration: ``steps_per_iteration`` times, every env takes one step of the stochastic
policy (its transition goes into the buffer, its observation into the normaliser) and then
``grad_updates_per_step`` gradient steps each update the temperature, the critic and the
actor on a fresh minibatch of ``batch_size`` transitions, and move the target critic by
Polyak averaging, ``theta' <- (1 - tau) theta' + tau theta``. The update-to-data ratio is
``grad_updates_per_step * batch_size / num_envs`` sampled transitions per collected one.
Before the first update the buffer is filled with ``min_replay_size`` transitions of the
initial policy (counted as env steps).

Episodes end by auto-reset inside ``env.step``: ``discount = 1 - done`` drops the bootstrap
at a failure, and Brax's critic loss masks transitions whose episode hit its time limit
(``info['truncation']``), where the next observation is already the reset one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import optax
from brax.envs.wrappers.training import VmapWrapper
from brax.training import acting, distribution, gradients, networks, replay_buffers, types
from brax.training.acme import running_statistics
from brax.training.agents.sac import losses as sac_losses
from brax.training.agents.sac import networks as sac_networks
from flax import struct

from simreal.errors import ConfigError
from simreal.policies import devices
from simreal.policies.rl.ppo import ACTIVATIONS
from simreal.policies.run_config import SACConfig


@struct.dataclass
class SACState:
    """Everything that defines where SAC training is."""

    policy_params: Any
    policy_optimizer_state: optax.OptState
    q_params: Any
    q_optimizer_state: optax.OptState
    target_q_params: Any
    log_alpha: jax.Array
    alpha_optimizer_state: optax.OptState
    normalizer_params: running_statistics.RunningStatisticsState
    env_state: Any
    buffer_state: replay_buffers.ReplayBufferState
    key: jax.Array
    env_steps: jax.Array
    iteration: jax.Array

    if TYPE_CHECKING:  # struct.dataclass adds it at runtime

        def replace(self, **updates: Any) -> SACState: ...


def make_networks(obs_size: int, action_size: int, cfg: SACConfig) -> sac_networks.SACNetworks:
    """Brax's SAC networks (tanh-Gaussian actor, twin-Q critic, normalised inputs), with the
    actor and the critic sized separately (``make_sac_networks`` takes one size for both)."""
    norm = running_statistics.normalize if cfg.normalize_observations else types.identity_observation_preprocessor
    dist = distribution.NormalTanhDistribution(event_size=action_size)
    act = ACTIVATIONS[cfg.activation]
    return sac_networks.SACNetworks(
        policy_network=networks.make_policy_network(
            dist.param_size,
            obs_size,
            preprocess_observations_fn=norm,
            hidden_layer_sizes=cfg.policy_hidden,
            activation=act,
        ),
        q_network=networks.make_q_network(
            obs_size, action_size, preprocess_observations_fn=norm, hidden_layer_sizes=cfg.q_hidden, activation=act
        ),
        parametric_action_distribution=dist,
    )


class SAC:
    """Builds the jitted pieces once; ``init`` and ``iterate`` are then pure functions of state."""

    def __init__(self, env, cfg: SACConfig, seed: int):
        self.env, self.cfg, self.seed = env, cfg, seed
        self.venv = VmapWrapper(env, batch_size=cfg.num_envs)
        m, n = env.action_size, env.observation_size
        self.networks = make_networks(n, m, cfg)
        self.make_policy = sac_networks.make_inference_fn(self.networks)
        self.optimizer = optax.adam(cfg.learning_rate)
        dummy = types.Transition(
            observation=jnp.zeros((n,)),
            action=jnp.zeros((m,)),
            reward=jnp.zeros(()),
            discount=jnp.zeros(()),
            next_observation=jnp.zeros((n,)),
            extras={"state_extras": {"truncation": jnp.zeros(())}, "policy_extras": {}},
        )
        self.buffer = replay_buffers.UniformSamplingQueue(
            max_replay_size=cfg.max_replay_size,
            dummy_data_sample=dummy,
            sample_batch_size=cfg.batch_size * cfg.grad_updates_per_step,
        )
        alpha_loss, critic_loss, actor_loss = sac_losses.make_losses(
            self.networks, reward_scaling=cfg.reward_scaling, discounting=cfg.discounting, action_size=m
        )
        self._alpha_update = gradients.gradient_update_fn(alpha_loss, self.optimizer, pmap_axis_name=None)
        self._critic_update = gradients.gradient_update_fn(critic_loss, self.optimizer, pmap_axis_name=None)
        self._actor_update = gradients.gradient_update_fn(actor_loss, self.optimizer, pmap_axis_name=None)
        self.steps_per_iteration = cfg.num_envs * cfg.steps_per_iteration
        check_budget(cfg)
        self.prefill_actor_steps = prefill_actor_steps(cfg)
        self.mesh = devices.data_mesh(cfg.devices, cfg.num_envs)
        #: the training state's shapes and dtypes (a checkpoint's template), traced, not run
        self.state_shapes = jax.eval_shape(self._fresh)
        self.shardings = devices.split_envs(self.mesh, self.state_shapes, batched=("env_state",))
        self.iterate = jax.jit(
            self._iterate,
            in_shardings=(self.shardings,),
            out_shardings=(self.shardings, devices.replicated(self.mesh)),
            donate_argnums=0,
        )

    def init(self) -> SACState:
        """Fresh networks, optimisers and envs from the seed, placed on the mesh, the buffer
        filled to ``min_replay_size`` with the initial policy's transitions."""
        state = jax.jit(self._fresh, out_shardings=self.shardings, compiler_options=devices.INIT_COMPILE)()
        if self.prefill_actor_steps:
            state = jax.jit(
                self._prefill, in_shardings=(self.shardings,), out_shardings=self.shardings, donate_argnums=0
            )(state)
        return state

    def _fresh(self) -> SACState:
        key = jax.random.PRNGKey(self.seed)
        key, k_pol, k_q, k_env, k_buf = jax.random.split(key, 5)
        policy_params = self.networks.policy_network.init(k_pol)
        q_params = self.networks.q_network.init(k_q)
        log_alpha = jnp.zeros((), jnp.float32)
        return SACState(
            policy_params=policy_params,
            policy_optimizer_state=self.optimizer.init(policy_params),
            q_params=q_params,
            q_optimizer_state=self.optimizer.init(q_params),
            target_q_params=jax.tree.map(jnp.copy, q_params),  # a copy: donated buffers must not alias
            log_alpha=log_alpha,
            alpha_optimizer_state=self.optimizer.init(log_alpha),
            normalizer_params=running_statistics.init_state(
                jax.ShapeDtypeStruct((self.env.observation_size,), jnp.float32)
            ),
            env_state=self.venv.reset(k_env),
            buffer_state=self.buffer.init(k_buf),
            key=key,
            env_steps=jnp.zeros(
                (),
                jnp.int64 if jax.config.jax_enable_x64 else jnp.int32,  # type: ignore[attr-defined]  # a dynamic flag
            ),
            iteration=jnp.zeros((), jnp.int32),
        )

    def policy_params(self, s: SACState) -> tuple[Any, Any]:
        """(normalizer, policy params): what inference and export need."""
        return s.normalizer_params, s.policy_params

    def experience(self, s: SACState, key: jax.Array) -> tuple[SACState, dict[str, jax.Array]]:
        """One step of every env under the stochastic policy, into the buffer and the normaliser;
        returns the statistics of the episodes that ended in it and the mean reward."""
        policy = self.make_policy((s.normalizer_params, s.policy_params))
        env_state, tr = acting.actor_step(
            self.venv, s.env_state, policy, key, extra_fields=("truncation", "episode_metrics")
        )
        episodes = jax.tree.map(jnp.sum, tr.extras["state_extras"].pop("episode_metrics"))
        episodes["reward_per_step"] = jnp.mean(tr.reward)
        normalizer = running_statistics.update(s.normalizer_params, tr.observation)
        buffer_state = self.buffer.insert(s.buffer_state, tr)
        return s.replace(
            env_state=env_state,
            normalizer_params=normalizer,
            buffer_state=buffer_state,
            env_steps=s.env_steps + self.cfg.num_envs,
        ), episodes

    def _prefill(self, s: SACState) -> SACState:
        key, k_fill = jax.random.split(s.key)

        def step(c, k):
            return self.experience(c, k)[0], None

        return jax.lax.scan(step, s.replace(key=key), jax.random.split(k_fill, self.prefill_actor_steps))[0]

    def _sgd_step(self, s: SACState, batch: types.Transition) -> tuple[SACState, dict[str, jax.Array]]:
        """Temperature, critic, actor (in Brax's order, each from the previous parameters), then
        the Polyak step of the target critic."""
        key, k_alpha, k_critic, k_actor = jax.random.split(s.key, 4)
        alpha_loss, log_alpha, alpha_opt = self._alpha_update(
            s.log_alpha, s.policy_params, s.normalizer_params, batch, k_alpha, optimizer_state=s.alpha_optimizer_state
        )
        alpha = jnp.exp(s.log_alpha)
        critic_loss, q_params, q_opt = self._critic_update(
            s.q_params,
            s.policy_params,
            s.normalizer_params,
            s.target_q_params,
            alpha,
            batch,
            k_critic,
            optimizer_state=s.q_optimizer_state,
        )
        actor_loss, policy_params, policy_opt = self._actor_update(
            s.policy_params,
            s.normalizer_params,
            s.q_params,
            alpha,
            batch,
            k_actor,
            optimizer_state=s.policy_optimizer_state,
        )
        tau = self.cfg.tau
        target = jax.tree.map(lambda t, q: (1 - tau) * t + tau * q, s.target_q_params, q_params)
        new = s.replace(
            policy_params=policy_params,
            policy_optimizer_state=policy_opt,
            q_params=q_params,
            q_optimizer_state=q_opt,
            target_q_params=target,
            log_alpha=log_alpha,
            alpha_optimizer_state=alpha_opt,
            key=key,
        )
        return new, {
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "alpha_loss": alpha_loss,
            "alpha": jnp.exp(log_alpha),
        }

    def _train_step(self, s: SACState, _) -> tuple[SACState, dict[str, Any]]:
        key, k_act = jax.random.split(s.key)
        s, episodes = self.experience(s.replace(key=key), k_act)
        buffer_state, batch = self.buffer.sample(s.buffer_state)
        batch = jax.tree.map(lambda x: x.reshape((self.cfg.grad_updates_per_step, -1) + x.shape[1:]), batch)
        s, losses = jax.lax.scan(self._sgd_step, s.replace(buffer_state=buffer_state), batch)
        return s, {"losses": jax.tree.map(jnp.mean, losses), "episodes": episodes}

    def _iterate(self, s: SACState) -> tuple[SACState, dict[str, jax.Array]]:
        s, out = jax.lax.scan(self._train_step, s, (), length=self.cfg.steps_per_iteration)
        metrics = {k: jnp.mean(v) for k, v in out["losses"].items()}
        metrics.update({k: jnp.mean(v) for k, v in s.env_state.metrics.items() if k.startswith("reward/")})
        metrics.update(jax.tree.map(jnp.sum, out["episodes"]))
        metrics["reward_per_step"] = jnp.mean(out["episodes"]["reward_per_step"])
        return s.replace(iteration=s.iteration + 1), metrics


def prefill_actor_steps(cfg: SACConfig) -> int:
    """Steps of all envs that fill the replay buffer to ``min_replay_size`` (rounded up)."""
    return -(-cfg.min_replay_size // cfg.num_envs)


def check_budget(cfg: SACConfig) -> None:
    """ConfigError naming ``train.num_timesteps`` when the replay prefill (:func:`prefill_actor_steps`,
    counted in the budget) would spend all of it."""
    if cfg.num_timesteps <= prefill_actor_steps(cfg) * cfg.num_envs:
        raise ConfigError(
            "train.num_timesteps",
            f"{cfg.num_timesteps} env steps would all go to filling the replay "
            f"buffer (train.min_replay_size {cfg.min_replay_size}, counted in "
            "the budget) and none to training: raise it or lower "
            "train.min_replay_size",
        )
