"""PPO on Brax's building blocks, in one readable loop with resumable state.

The algorithm is Brax's: its networks (``ppo_networks``), its clipped-surrogate loss with
GAE (``ppo_losses.compute_ppo_loss``), its rollout (``acting.generate_unroll``) and its
running observation statistics. What this module adds is the outer loop Brax's
``ppo.train`` keeps to itself:

- the *whole* training state (networks, Adam moments, normaliser, env states, PRNG key)
  is one pytree, checkpointed atomically, so ``--resume`` continues bit-for-bit;
- a callback after every iteration (progress bar, metrics.csv, TensorBoard, early stop
  at a target success rate);
- no ``pmap`` (jax 0.10 dropped the ``device_put_replicated`` that Brax's own ``train``
  still calls): with ``train.devices`` the envs are split over a device mesh and XLA
  partitions the one jitted iteration (``devices.py``).

One iteration: every env runs ``unroll_length`` steps of the stochastic policy; the
normaliser absorbs the observations; then ``num_updates_per_batch`` epochs of
``num_minibatches`` shuffled minibatches of whole trajectories update the networks.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from brax.envs.wrappers.training import VmapWrapper
from brax.training import acting, gradients
from brax.training.acme import running_statistics
from brax.training.agents.ppo import losses as ppo_losses
from brax.training.agents.ppo import networks as ppo_networks
from flax import struct

from simreal.policies import devices
from simreal.policies.run_config import PPOConfig

ACTIVATIONS = {"tanh": nn.tanh, "swish": nn.swish, "relu": nn.relu, "elu": nn.elu}


@struct.dataclass
class TrainingState:
    """Everything that defines where training is."""

    params: ppo_losses.PPONetworkParams
    optimizer_state: optax.OptState
    normalizer_params: running_statistics.RunningStatisticsState
    env_state: Any
    key: jax.Array
    env_steps: jax.Array
    iteration: jax.Array


def make_networks(obs_size: int, action_size: int, cfg: PPOConfig) -> ppo_networks.PPONetworks:
    """Brax PPO networks: tanh-squashed Gaussian policy, separate value MLP, normalised inputs."""
    return ppo_networks.make_ppo_networks(
        obs_size,
        action_size,
        preprocess_observations_fn=running_statistics.normalize if cfg.normalize_observations else (lambda x, _: x),
        policy_hidden_layer_sizes=cfg.policy_hidden,
        value_hidden_layer_sizes=cfg.value_hidden,
        activation=ACTIVATIONS[cfg.activation],
        init_noise_std=cfg.init_noise_std,
    )


#: rsl_rl's adaptive schedule (``PPO.update``, ``schedule="adaptive"``): the learning rate is
#: divided by this when the KL exceeds 2x ``desired_kl``, multiplied by it below half, and kept
#: within ``KL_LR_RANGE``. Written here because Brax's PPO has no such schedule.
KL_LR_FACTOR = 1.5
KL_LR_RANGE = (1e-5, 1e-2)


def make_optimizer(cfg: PPOConfig) -> optax.GradientTransformation:
    """Adam with global-norm gradient clipping; with ``learning_rate_end`` the rate decays
    linearly over the gradient steps of ``num_timesteps`` (the step count is in the optimizer
    state, so it is checkpointed and resumes with the rest). With ``desired_kl`` the rate is a
    hyper-parameter in the optimizer state, set by :func:`adapt_learning_rate` after each
    minibatch (checkpointed likewise)."""
    if cfg.desired_kl is not None:
        return optax.chain(
            optax.clip_by_global_norm(cfg.max_grad_norm),
            optax.inject_hyperparams(optax.adam)(learning_rate=cfg.learning_rate),
        )
    lr: optax.ScalarOrSchedule = cfg.learning_rate
    if cfg.learning_rate_end is not None:
        iterations = -(-cfg.num_timesteps // (cfg.num_envs * cfg.unroll_length))
        lr = optax.linear_schedule(
            cfg.learning_rate, cfg.learning_rate_end, iterations * cfg.num_updates_per_batch * cfg.num_minibatches
        )
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(lr))


def adapt_learning_rate(opt_state: Any, kl: jax.Array, desired_kl: float) -> Any:
    """The optimizer state of :func:`make_optimizer` with ``desired_kl``, its learning rate
    ``lr / KL_LR_FACTOR`` where ``kl > 2 desired_kl``, ``lr * KL_LR_FACTOR`` where ``kl <
    desired_kl / 2`` (and above zero), clipped to ``KL_LR_RANGE``: rsl_rl's adaptive schedule,
    applied for the next minibatch."""
    clip_state, adam_state = opt_state
    lr = adam_state.hyperparams["learning_rate"]
    lr = jnp.where(
        kl > 2.0 * desired_kl, lr / KL_LR_FACTOR, jnp.where((kl < 0.5 * desired_kl) & (kl > 0.0), lr * KL_LR_FACTOR, lr)
    )
    lr = jnp.clip(lr, *KL_LR_RANGE)
    return clip_state, adam_state._replace(hyperparams={**adam_state.hyperparams, "learning_rate": lr})


class PPO:
    """Builds the jitted pieces once; ``init`` and ``iterate`` are then pure functions of state."""

    def __init__(self, env, cfg: PPOConfig, seed: int):
        self.env, self.cfg, self.seed = env, cfg, seed
        self.venv = VmapWrapper(env, batch_size=cfg.num_envs)
        self.networks = make_networks(env.observation_size, env.action_size, cfg)
        self.make_policy = ppo_networks.make_inference_fn(self.networks)
        self.optimizer = make_optimizer(cfg)
        loss = functools.partial(
            ppo_losses.compute_ppo_loss,
            ppo_network=self.networks,
            entropy_cost=cfg.entropy_cost,
            discounting=cfg.discounting,
            reward_scaling=cfg.reward_scaling,
            gae_lambda=cfg.gae_lambda,
            clipping_epsilon=cfg.clipping_epsilon,
            normalize_advantage=True,
        )
        self._update = gradients.gradient_update_fn(loss, self.optimizer, pmap_axis_name=None, has_aux=True)
        self.steps_per_iteration = cfg.num_envs * cfg.unroll_length
        self.mesh = devices.data_mesh(cfg.devices, cfg.num_envs)
        #: the training state's shapes and dtypes (a checkpoint's template), traced, not run
        self.state_shapes = jax.eval_shape(self._init)
        self.shardings = devices.split_envs(self.mesh, self.state_shapes, batched=("env_state",))
        self.iterate = jax.jit(
            self._iterate,
            in_shardings=(self.shardings,),
            out_shardings=(self.shardings, devices.replicated(self.mesh)),
            donate_argnums=0,
        )

    def init(self) -> TrainingState:
        """Fresh networks, optimiser and envs from the seed, placed on the mesh (``INIT_COMPILE``)."""
        return jax.jit(self._init, out_shardings=self.shardings, compiler_options=devices.INIT_COMPILE)()

    def _init(self) -> TrainingState:
        key = jax.random.PRNGKey(self.seed)
        key, k_pol, k_val, k_env = jax.random.split(key, 4)
        obs_size = self.env.observation_size
        params = ppo_losses.PPONetworkParams(
            policy=self._with_init_std(self.networks.policy_network.init(k_pol)),
            value=self.networks.value_network.init(k_val),
        )
        normalizer = running_statistics.init_state(jax.ShapeDtypeStruct((obs_size,), jnp.float32))
        env_state = self.venv.reset(k_env)
        return TrainingState(
            params=params,
            optimizer_state=self.optimizer.init(params),
            normalizer_params=normalizer,
            env_state=env_state,
            key=key,
            env_steps=jnp.zeros(
                (),
                jnp.int64 if jax.config.jax_enable_x64 else jnp.int32,  # type: ignore[attr-defined]  # a dynamic flag
            ),
            iteration=jnp.zeros((), jnp.int32),
        )

    def _with_init_std(self, policy_params: Any) -> Any:
        """Set the initial action std: Brax's tanh-Gaussian head outputs (loc, scale logits) and
        std = softplus(logit) + 0.001, so the scale half of the last bias is set to
        softplus^-1(init_noise_std - 0.001) (Brax itself ignores ``init_noise_std`` here)."""
        layers = policy_params["params"]
        last = f"hidden_{len(layers) - 1}"
        target = max(self.cfg.init_noise_std - 1e-3, 1e-4)
        inv_softplus = float(np.log(np.expm1(target)))
        bias = layers[last]["bias"].at[self.env.action_size :].set(inv_softplus)
        # Last-layer weights x0.01 (CleanRL's actor init): the initial policy's mean is ~0 and its
        # std ~init_noise_std for every observation, instead of state-dependent O(1) outputs.
        kernel = layers[last]["kernel"] * 0.01
        return {"params": {**layers, last: {**layers[last], "kernel": kernel, "bias": bias}}}

    def policy_params(self, ts: TrainingState) -> tuple[Any, Any]:
        """(normalizer, policy params): what inference and export need."""
        return ts.normalizer_params, ts.params.policy

    def _sgd_epoch(self, carry, _, data):
        params, opt_state, normalizer, key = carry
        key, k_perm, k_loss = jax.random.split(key, 3)
        n_mb = self.cfg.num_minibatches
        perm = jax.random.permutation(k_perm, self.cfg.num_envs)
        shuffled = jax.tree.map(lambda x: x[perm].reshape((n_mb, -1) + x.shape[1:]), data)

        def minibatch(c, mb):
            p, o, k = c
            k, k_mb = jax.random.split(k)
            (_, metrics), p, o = self._update(p, normalizer, mb, k_mb, optimizer_state=o)
            if self.cfg.desired_kl is not None:
                o = adapt_learning_rate(o, metrics["kl_mean"], self.cfg.desired_kl)
                metrics = {**metrics, "learning_rate": o[1].hyperparams["learning_rate"]}
            return (p, o, k), metrics

        (params, opt_state, _), metrics = jax.lax.scan(minibatch, (params, opt_state, k_loss), shuffled)
        return (params, opt_state, normalizer, key), metrics

    def _iterate(self, ts: TrainingState) -> tuple[TrainingState, dict[str, jax.Array]]:
        key, k_unroll, k_sgd = jax.random.split(ts.key, 3)
        policy = self.make_policy((ts.normalizer_params, ts.params.policy))
        env_state, data = acting.generate_unroll(
            self.venv,
            ts.env_state,
            policy,
            k_unroll,
            self.cfg.unroll_length,
            extra_fields=("truncation", "episode_metrics"),
        )
        # [T, B, ...] -> [B, T, ...]: whole trajectories per env, as Brax's loss expects.
        data = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), data)
        normalizer = running_statistics.update(ts.normalizer_params, data.observation)
        (params, opt_state, _, _), loss_metrics = jax.lax.scan(
            functools.partial(self._sgd_epoch, data=data),
            (ts.params, ts.optimizer_state, normalizer, k_sgd),
            (),
            length=self.cfg.num_updates_per_batch,
        )
        metrics = {k: jnp.mean(v) for k, v in loss_metrics.items()}
        metrics.update({k: jnp.mean(v) for k, v in env_state.metrics.items() if k.startswith("reward/")})
        # Episode statistics summed over every episode that ended during the unroll.
        metrics.update(jax.tree.map(jnp.sum, data.extras["state_extras"]["episode_metrics"]))
        metrics["reward_per_step"] = jnp.mean(data.reward)
        new = TrainingState(
            params=params,
            optimizer_state=opt_state,
            normalizer_params=normalizer,
            env_state=env_state,
            key=key,
            env_steps=ts.env_steps + self.steps_per_iteration,
            iteration=ts.iteration + 1,
        )
        return new, metrics


def evaluate(
    env,
    make_policy: Callable,
    policy_params: tuple[Any, Any],
    num_envs: int,
    seed: int,
    deterministic: bool = True,
    batch: int | None = None,
    max_failures: int | None = None,
) -> dict[str, float]:
    """Run ``num_envs`` episodes (one per env, first episode only) and average their statistics.

    Every env runs exactly ``env.episode_steps`` steps; an env's statistics are read at
    its first ``done`` (an env that fails early restarts, and that second episode is not
    counted). Each statistic is averaged over the episodes it is defined for
    (:func:`simreal.sim.episode_stats.episode_means`: NaN where there is none); ``episodes``
    is the number of episodes read. The jitted episode program is compiled once per (env,
    ``make_policy``, ``num_envs``, ``deterministic``) and takes the parameters as an argument,
    so a training run's periodic evaluations do not compile again (measured: 5-6 s per
    128-episode evaluation of the hover task on 2 cores, most of a 6 s evaluation). With
    ``batch`` dividing ``num_envs``, the episodes run ``batch`` at a time (chunk i from the key
    ``fold_in(PRNGKey(seed), i)``) on the program a ``batch``-episode evaluation compiled:
    training's confirming evaluation reuses its periodic one's. ``max_failures``: stop after the
    chunk that brings the failed episodes (read minus the ``success`` sum) above it; the chunks
    run are those a whole evaluation starts with, so its verdict on them is the same.
    """
    from simreal.sim.episode_stats import episode_means

    key = jax.random.PRNGKey(seed)
    if batch and batch < num_envs and num_envs % batch == 0:
        run = _episode_program(env, make_policy, batch, deterministic)
        chunks, failed = [], 0.0
        for i in range(num_envs // batch):
            seen, acc = run(policy_params, jax.random.fold_in(key, i))
            chunks.append((seen, acc))
            if max_failures is not None and "episode/success" in acc:
                failed += float(np.sum(seen)) - float(np.sum(acc["episode/success"]))
                if failed > max_failures:
                    break
    else:
        chunks = [_episode_program(env, make_policy, num_envs, deterministic)(policy_params, key)]
    # summed on the host: a jnp.sum per statistic shape compiles a small program of its own at the
    # first evaluation, on the training path
    sums = {k: sum(float(np.sum(acc[k])) for _, acc in chunks) for k in chunks[0][1]}
    out: dict[str, float] = episode_means(sums)
    out["episodes"] = sum(int(np.sum(seen)) for seen, _ in chunks)
    return out


def compile_evaluation(
    env, make_policy: Callable, policy_params: tuple[Any, Any], num_envs: int, batch: int | None = None
) -> None:
    """Start compiling the program :func:`evaluate` (deterministic, same ``num_envs`` and
    ``batch``) runs, on a background thread, for parameters shaped and placed as
    ``policy_params``; the evaluation then waits for it and finds it compiled (an ahead-of-time
    ``lower().compile()`` fills ``jax.jit``'s own cache). A training run calls it after its first
    iteration, so the first periodic evaluation no longer stalls training for its compile (the
    hover task's: about 15 s on 2 cores): the compile shares the CPU with the iterations."""
    size = batch if batch and batch < num_envs and num_envs % batch == 0 else num_envs
    _episode_program(env, make_policy, size, True).compile_ahead(policy_params)


class _EpisodeProgram:
    """``run(policy_params, key)`` jitted, with :meth:`compile_ahead`."""

    def __init__(self, run: Any):
        self.run = run
        self.ahead: threading.Thread | None = None

    def compile_ahead(self, policy_params: tuple[Any, Any]) -> None:
        if self.ahead is not None:
            return
        # a copy (placed as the original): training donates its state's buffers to the next
        # iteration while this thread still lowers
        example = (jax.tree.map(jnp.copy, policy_params), jax.random.PRNGKey(0))

        def work() -> None:
            try:
                self.run.lower(*example).compile()
            except Exception:  # the evaluation's own call compiles again and raises it where it is handled
                pass

        # not a daemon: the interpreter waits for it before it finalises (a process exiting while
        # XLA compiles on another thread aborts in XLA's destructors)
        self.ahead = threading.Thread(target=work, name="simreal-eval-compile")
        self.ahead.start()

    def __call__(self, policy_params: tuple[Any, Any], key: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        if self.ahead is not None:
            self.ahead.join()
        return self.run(policy_params, key)


@functools.lru_cache(maxsize=8)
def _episode_program(env, make_policy: Callable, num_envs: int, deterministic: bool) -> _EpisodeProgram:
    """``run(policy_params, key) -> (seen, per-env sums of the episode statistics)``, jitted."""
    venv = VmapWrapper(env, batch_size=num_envs)

    @jax.jit
    def evaluation_episodes(policy_params, key):  # the name JAX's compile logs and events give it
        policy = make_policy(policy_params, deterministic=deterministic)
        k_reset, k_run = jax.random.split(key)
        state = venv.reset(k_reset)
        keys = jax.random.split(k_run, env.episode_steps)

        def step(carry, k):
            s, seen, acc = carry
            a, _ = policy(s.obs, k)
            s = venv.step(s, a)
            first = (s.done > 0) & ~seen
            acc = {n: acc[n] + jnp.where(first, s.metrics[n], 0.0) for n in acc}
            return (s, seen | (s.done > 0), acc), None

        names = [n for n in state.metrics if n.startswith("episode/")]
        acc0 = {n: jnp.zeros((num_envs,)) for n in names}
        (s, seen, acc), _ = jax.lax.scan(step, (state, jnp.zeros((num_envs,), bool), acc0), keys)
        return seen, acc

    return _EpisodeProgram(evaluation_episodes)
