"""``trainer: residual``: PPO on a residual policy over a frozen base; the bundle composes both.

    simreal train arm-push residual.base=runs/arm-push/bc10            # a run directory, any trainer's
    simreal train arm-push residual.base=/data/push_bundle residual.scale=0.2   # or a bundle folder
    simreal train arm-push residual.base=scripted                      # or the task's scripted controller
    simreal eval RUN_DIR && simreal export RUN_DIR && simreal play RUN_DIR     # as for every run
    simreal deploy run RUN_DIR/bundle                                   # one ONNX graph, like any bundle

Giving ``residual.base`` selects this trainer (``simreal/policies/run_config.py``). Training is the
Brax trainer's PPO and loop (``train.BraxTrainer``: checkpoints, resume, early stop, metrics)
on :class:`~residual_env.ResidualEnv`: the policy observes ``[o, a_base(o)]`` and outputs a
residual ``r`` in [-1, 1]^m, and the task env acts with ``a = clip(a_base + scale * r, -1, 1)``,
``scale`` one reach per action: ``residual.scale``, or ``residual.action_scales.NAME`` for the
action named NAME. A base that commands a gripper open (+1) or closed (-1) needs a reach above 1
on that action for the residual to change its mind; 0.1 only nudges it.

**The base is frozen into the run.** A new run copies it to ``RUN_DIR/base/`` as a bundle (a
run directory is exported there by its own trainer, ONNX checked against it; a bundle folder
is copied; ``scripted`` writes the task's scripted controller there as a graph of the
observation, ``scripted_bundle.py``: a classical base), before the first iteration; resume,
eval, play and export read that copy, so retraining or re-exporting the base's run later changes
nothing here. The base must be of the same task and robot, observe the same terms and mean the
same commands (action names, scale, offset): else one line naming ``residual.base``, exit 2, no
run directory left.

**ResiP's settings by default** (Ankile et al. 2024; ``ankile/robust-rearrangement``,
``src/config/actor/residual_diffusion.yaml`` and ``src/config/base_residual_rl.yaml``): scale
0.1 (``residual.scale``), initial std exp(-1.5) = 0.22 (``train.init_noise_std``), no entropy
bonus (``train.entropy_cost``: ``run_config.RESIDUAL_TRAIN``), and the mean head zero-initialised
(their ``action_head_std: 0``; :class:`ResidualPPO`), so the untrained residual's mode is 0 and
the composed policy *is* the base. Not taken from ResiP: its 2 x 256 ReLU networks, separate
actor and critic learning rates, discount 0.999 for 700-step episodes and 50 epochs per batch;
the task's PPO settings apply. Brax's policy is tanh-squashed (ResiP's Gaussian is not), so
``|r| <= 1`` and the residual's reach is exactly ``scale``.

**The bundle is one ONNX graph** (:func:`compose_onnx`), raw observation ``obs`` (N, n) in and
``action`` (N, m) out like every bundle's::

    a_base = base(obs)                      the base bundle's graph, verbatim (names prefixed base/)
    r      = residual([obs, a_base])        the residual's graph (export.policy_to_onnx; residual/)
    action = clip(a_base + scale * r, -1, 1)

so deploy runs it unchanged. ``bundle.yaml``'s normalisation is the residual's over ``o`` (each
graph holds its own). Export checks ONNX Runtime against the JAX composition on random
observations, as every export does.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from onnx import compose as onnx_compose
from onnx import helper, numpy_helper

from simreal.bundle import BUNDLE_YAML, Bundle, OnnxPolicy, load_bundle
from simreal.errors import BundleError, ConfigError
from simreal.policies.rl.ppo import PPO
from simreal.policies.rl.sac import SAC
from simreal.policies.run_config import ResidualConfig, RunConfig, make_env
from simreal.policies.trainers import LoadedPolicy, check_observations
from simreal.policies.trainers.brax import BraxTrainer
from simreal.policies.trainers.loop import TrainResult
from simreal.policies.trainers.residual_env import ResidualEnv, compose, onnx_base

#: The frozen copy of the base inside a residual run.
BASE_DIR = "base"
#: ``residual.base`` naming the task's scripted controller (``scripted_bundle.py``).
SCRIPTED_BASE = "scripted"


class ResidualPPO(PPO):
    """Brax PPO whose policy starts as ResiP's residual: the mean half of the last layer zero (kernel
    and bias), so ``r = tanh(0) = 0`` for every observation, the std at ``train.init_noise_std``."""

    def _with_init_std(self, policy_params: Any) -> Any:
        params = super()._with_init_std(policy_params)["params"]
        last, m = f"hidden_{len(params) - 1}", self.env.action_size
        head = params[last]
        return {
            "params": {
                **params,
                last: {"kernel": head["kernel"].at[:, :m].set(0.0), "bias": head["bias"].at[:m].set(0.0)},
            }
        }


def _same(a: Any, b: Any) -> bool:
    return np.shape(a) == np.shape(b) and np.allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-6, atol=1e-9)


def check_base(bundle: Bundle, env: Any, task: str, where: str | None = None) -> None:
    """ConfigError naming ``residual.base`` when ``bundle`` is not a base for ``env`` of ``task``:
    another task or robot, other observation terms, or an action that commands something else
    (names, scale, offset: e.g. another ``env.action_scale``). ``where``: the base as the user
    gave it (default: the bundle's folder), for the message."""
    where = where or str(bundle.path)
    terms = [(t["name"], int(t["size"])) for t in env.obs_layout]
    layout = env.action_layout()
    if bundle.task != task or bundle.robot != env.robot.name:
        raise ConfigError(
            "residual.base",
            f"{where} is a policy of task {bundle.task} on {bundle.robot}; this run is {task} on {env.robot.name}",
        )
    if [(t.name, t.size) for t in bundle.obs_terms] != terms:
        raise ConfigError(
            "residual.base", f"{where} observes {[(t.name, t.size) for t in bundle.obs_terms]}, the task's env {terms}"
        )
    if bundle.obs_history != env.cfg.obs_history_steps:
        raise ConfigError(
            "residual.base",
            f"{where} observes {bundle.obs_history} frames, the task's env {env.cfg.obs_history_steps} "
            "(env.obs_history_steps)",
        )
    for field in ("names", "scale", "offset"):
        have, want = getattr(bundle.action, field), layout[field]
        if not (list(have) == list(want) if field == "names" else _same(have, want)):
            raise ConfigError(
                "residual.base",
                f"{where}'s action {field} {np.asarray(have).tolist()} differ from "
                f"the task env's {np.asarray(want).tolist()} (another env.action_scale "
                "or robot?): its actions would command something else here",
            )


def action_reach(cfg: ResidualConfig, names: list[str]) -> np.ndarray:
    """The residual's reach per action dimension (m,): ``cfg.action_scales[name]`` where given, else
    ``cfg.scale``; ConfigError naming ``residual.action_scales.NAME`` for a name the task's action
    does not have, or a negative reach."""
    for name, reach in cfg.action_scales.items():
        if name not in names:
            raise ConfigError(
                f"residual.action_scales.{name}", f"no such action; the task's actions: {', '.join(names)}"
            )
        if not reach >= 0.0:
            raise ConfigError(f"residual.action_scales.{name}", f"expected a reach >= 0, got {reach}")
    return np.asarray([cfg.action_scales.get(n, cfg.scale) for n in names], np.float32)


def check_source(source: str, cfg: RunConfig, env: Any) -> None:
    """ConfigError naming ``residual.base`` for what :func:`freeze_base` would refuse, with nothing
    copied: a task without a scripted controller, a bundle that is no base for ``env``
    (:func:`check_base`), a run directory of another task or robot (its exported graph is checked
    once frozen), or a path that is neither a bundle folder nor a run directory."""
    from simreal.policies.run_dir import load_config

    src = Path(source)
    if source == SCRIPTED_BASE:
        from simreal.policies.demos.scripted_bundle import RULES

        if cfg.task not in RULES:
            raise ConfigError(
                "residual.base",
                f"{cfg.task} has no scripted controller; tasks with one: "
                f"{', '.join(RULES)} (or give a run directory or a bundle folder)",
            )
    elif (src / BUNDLE_YAML).is_file():
        check_base(load_bundle(src), env, cfg.task, where=source)
    elif (src / "config.yaml").is_file():
        base = load_config(src)
        if (base.task, base.robot) != (cfg.task, cfg.robot):
            raise ConfigError(
                "residual.base",
                f"{source} is a run of task {base.task} on {base.robot}; this run is {cfg.task} on {cfg.robot}",
            )
    else:
        raise ConfigError(
            "residual.base",
            f"{source!r} is neither a bundle folder (no bundle.yaml), a run "
            f"directory (no config.yaml) nor {SCRIPTED_BASE!r}",
        )


def freeze_base(source: str, out: Path, cfg: RunConfig, env: Any) -> Path:
    """Copy the base at ``source`` (a bundle folder, a run directory exported by its own trainer, or
    ``scripted``: the scripted controller of ``cfg.task`` on ``env``) into ``out`` as a bundle,
    atomically; ConfigError naming ``residual.base`` for a source :func:`check_source` refuses,
    BundleError when the exported ONNX differs from the run's policy."""
    from simreal.policies.export import MAX_ABS_DIFF
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers import get_trainer

    check_source(source, cfg, env)
    src = Path(source)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if source == SCRIPTED_BASE:
        from simreal.policies.demos.scripted_bundle import export_scripted

        export_scripted(cfg, env, tmp)
    elif (src / BUNDLE_YAML).is_file():
        bundle = load_bundle(src)
        tmp.mkdir(parents=True)
        for f in bundle.files:
            (tmp / f.relative_to(bundle.path)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, tmp / f.relative_to(bundle.path))
    else:  # a run directory (check_source)
        cfg = load_config(src)
        _, err = get_trainer(cfg.trainer).export(src, cfg, tmp)
        if err > MAX_ABS_DIFF:
            raise BundleError(
                "policy.onnx",
                f"the base's ONNX differs from its {cfg.trainer} policy by {err:.2e} (> {MAX_ABS_DIFF:g})",
                str(tmp),
            )
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def compose_onnx(base: Bundle, residual: onnx.ModelProto, scale: float | np.ndarray) -> onnx.ModelProto:
    """One graph ``obs`` (N, n) -> ``action`` (N, m) ``= clip(a_base + scale * residual([obs, a_base]),
    -1, 1)``, ``a_base = base(obs)`` (module docstring), from the base bundle (its graph, input and
    output names) and the residual's graph (``obs`` (N, n + m) -> ``action``,
    ``export.policy_to_onnx``); IR and opset those of ``export``."""
    from onnx import TensorProto, version_converter

    from simreal.policies.export import IR_VERSION, OPSET

    model = onnx.load(str(base.onnx_file))
    opset = {o.domain: o.version for o in model.opset_import}.get("", OPSET)
    if opset > OPSET:
        raise BundleError(
            "policy.onnx", f"the base graph is opset {opset}; a bundle is opset {OPSET}", str(base.onnx_file)
        )
    if opset < OPSET:  # one graph has one opset: older operator versions are upgraded
        model = version_converter.convert_version(model, OPSET)
    b = onnx_compose.add_prefix(model, "base/").graph
    r = onnx_compose.add_prefix(residual, "residual/").graph
    a_base = f"base/{base.onnx_output}"
    nodes = [
        helper.make_node("Identity", ["obs"], [f"base/{base.onnx_input}"]),
        *b.node,
        helper.make_node("Concat", ["obs", a_base], ["residual/obs"], axis=-1),
        *r.node,
        helper.make_node("Mul", ["residual/action", "scale"], ["scaled"]),
        helper.make_node("Add", [a_base, "scaled"], ["summed"]),
        helper.make_node("Clip", ["summed", "lo", "hi"], ["action"]),
    ]
    consts = [
        numpy_helper.from_array(np.asarray(v, np.float32), name)
        for name, v in (("scale", scale), ("lo", -1.0), ("hi", 1.0))
    ]
    graph = helper.make_graph(
        nodes,
        "simreal_residual_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["N", base.obs_size])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["N", base.action.size])],
        [*b.initializer, *r.initializer, *consts],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="simreal",
        producer_version=residual.producer_version,
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


class ResidualTrainer(BraxTrainer):
    """``trainer=residual`` (module docstring): the Brax trainer on the residual env; ``load`` and
    ``export`` give the composed policy on the task's own observation."""

    name = "residual"

    def prepare(self, cfg: RunConfig, env: Any) -> None:
        super().prepare(cfg, env)
        assert cfg.residual is not None  # trainer=residual: run_config built its residual section
        action_reach(cfg.residual, list(env.action_layout()["names"]))
        check_source(cfg.residual.base, cfg, env)

    def build(
        self,
        run_dir: Path,
        cfg: RunConfig,
        backend: str | None = None,
        task_env: Any | None = None,
        **env_overrides: Any,
    ) -> tuple[ResidualEnv, ResidualPPO]:
        env = task_env if task_env is not None else make_env(cfg, backend=backend, **env_overrides)
        check_observations(cfg, env)
        bundle = load_bundle(Path(run_dir) / BASE_DIR)
        check_base(bundle, env, cfg.task)
        assert cfg.residual is not None  # trainer=residual: run_config built its residual section
        reach = action_reach(cfg.residual, list(env.action_layout()["names"]))
        renv = ResidualEnv(env, onnx_base(OnnxPolicy(bundle)), reach)
        return renv, ResidualPPO(renv, cfg.train, cfg.seed)

    def train(
        self,
        run_dir: Path,
        cfg: RunConfig,
        resume: bool = False,
        t_start: float | None = None,
        quiet: bool = False,
        env: Any | None = None,
    ) -> TrainResult:
        if not (Path(run_dir) / BASE_DIR).is_dir():  # a new run (or one stopped before its base was frozen)
            env = env if env is not None else make_env(cfg)
            check_observations(cfg, env)
            assert cfg.residual is not None  # trainer=residual: run_config built its residual section
            frozen = freeze_base(cfg.residual.base, Path(run_dir) / BASE_DIR, cfg, env)
            check_base(load_bundle(frozen), env, cfg.task, where=cfg.residual.base)  # the copy goes with a refused run
        return super().train(run_dir, cfg, resume, t_start, quiet, env)

    def composed(self, renv: ResidualEnv, algo: PPO | SAC, ts: Any) -> Callable[[Any], jax.Array]:
        """The deterministic composed policy: raw observation (..., n) -> action (..., m), jitted."""
        residual = algo.make_policy(algo.policy_params(ts), deterministic=True)
        key = jax.random.PRNGKey(0)  # the tanh-Gaussian's mode ignores it

        def act(obs: Any) -> jax.Array:
            obs = jnp.asarray(obs, jnp.float32)
            a_base = renv.base(obs)
            return compose(a_base, residual(jnp.concatenate([obs, a_base], axis=-1), key)[0], renv.scale)

        return jax.jit(act)

    def load(self, run_dir: Path, cfg: RunConfig, backend: str | None = None, **env_overrides: Any) -> LoadedPolicy:
        renv, algo, ts = self.restore(run_dir, cfg, backend, policy_only=True, **env_overrides)
        return LoadedPolicy(env=renv.env, act=self.composed(renv, algo, ts))

    def export(
        self, run_dir: Path, cfg: RunConfig, out_dir: Path | None = None, env: Any | None = None
    ) -> tuple[Path, float]:
        from simreal.policies.export import check_export, policy_to_onnx, write_bundle

        renv, algo, ts = self.restore(run_dir, cfg, policy_only=True, task_env=env)
        normalizer, policy = algo.policy_params(ts)
        residual = policy_to_onnx(
            normalizer, policy, renv.action_size, cfg.train.activation, cfg.train.normalize_observations
        )
        n = int(renv.env.observation_size)
        model = compose_onnx(load_bundle(Path(run_dir) / BASE_DIR), residual, renv.scale)
        out = write_bundle(
            run_dir, cfg, renv.env, model, np.asarray(normalizer.mean)[:n], np.asarray(normalizer.std)[:n], out_dir
        )
        act = self.composed(renv, algo, ts)
        # check_export's make_policy(params, deterministic)(obs, key) -> (action, extras), here composed
        return out, check_export(out, lambda _params, deterministic=True: lambda obs, _key: (act(obs), {}), None)


TRAINER = ResidualTrainer()
