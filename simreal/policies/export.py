"""Export a trained policy to a bundle: ``policy.onnx`` + ``bundle.yaml`` (simreal/bundle.py).

The ONNX graph is written node by node with ``onnx.helper`` from the Brax parameters, so
it contains exactly the deployed computation and nothing of JAX::

    x  = clip((obs - mean) / std, -c, c)       (Brax's running-statistics normaliser; c = inf)
    h  = act(x W_0 + b_0) ... act(h W_{n-2} + b_{n-2})
    y  = h W_{n-1} + b_{n-1}                   (loc | scale logits)
    action = tanh(y[:, :m])                    (the tanh-Gaussian's mode: deterministic policy)

``check_export`` runs ONNX Runtime against the JAX policy on random observations around the
training data.
"""

from __future__ import annotations

import datetime
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import simreal
from simreal.action_chunk import ActionChunk
from simreal.bundle import FORMAT_VERSION, load_bundle, write_bundle_yaml
from simreal.config import to_dict
from simreal.errors import BundleError
from simreal.input_files import snapshot_inputs
from simreal.policies.run_config import RunConfig
from simreal.reference import REFERENCE_NPZ, write_reference
from simreal.yaml_io import atomic_folder, atomic_write_bytes

OPSET = 17
#: IR version 9 (ONNX 1.15): read by every onnxruntime >= 1.16 a robot computer may have.
IR_VERSION = 9

#: Largest |ONNX Runtime - framework policy| accepted, on actions in [-1, 1].
MAX_ABS_DIFF = 1e-5


def _activation(name: str, x: str, out: str, nodes: list) -> None:
    if name == "tanh":
        nodes.append(helper.make_node("Tanh", [x], [out]))
    elif name == "relu":
        nodes.append(helper.make_node("Relu", [x], [out]))
    elif name == "elu":
        nodes.append(helper.make_node("Elu", [x], [out], alpha=1.0))
    elif name == "swish":  # x * sigmoid(x); no Swish op before opset 24
        nodes.append(helper.make_node("Sigmoid", [x], [out + "_sig"]))
        nodes.append(helper.make_node("Mul", [x, out + "_sig"], [out]))
    else:
        raise ValueError(f"unsupported activation {name!r}")


def policy_to_onnx(
    normalizer: Any, policy_params: Any, action_size: int, activation: str, normalize: bool = True
) -> onnx.ModelProto:
    """The deterministic policy graph (see module docstring): obs (N, n) -> action (N, m)."""
    layers = policy_params["params"]
    n_layers = len(layers)
    obs_size = int(np.asarray(layers["hidden_0"]["kernel"]).shape[0])
    inits, nodes = [], []
    x = "obs"
    if normalize:
        inits += [
            numpy_helper.from_array(np.asarray(normalizer.mean, np.float32), "obs_mean"),
            numpy_helper.from_array(np.asarray(normalizer.std, np.float32), "obs_std"),
        ]
        nodes += [
            helper.make_node("Sub", ["obs", "obs_mean"], ["obs_c"]),
            helper.make_node("Div", ["obs_c", "obs_std"], ["obs_n"]),
        ]
        x = "obs_n"
    for i in range(n_layers):
        w = np.asarray(layers[f"hidden_{i}"]["kernel"], np.float32)
        b = np.asarray(layers[f"hidden_{i}"]["bias"], np.float32)
        inits += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [x, f"W{i}"], [f"mm{i}"]),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"z{i}"]),
        ]
        x = f"z{i}"
        if i < n_layers - 1:
            _activation(activation, x, f"h{i}", nodes)
            x = f"h{i}"
    inits += [
        numpy_helper.from_array(np.array([0], np.int64), "loc_start"),
        numpy_helper.from_array(np.array([action_size], np.int64), "loc_end"),
        numpy_helper.from_array(np.array([1], np.int64), "loc_axis"),
    ]
    nodes += [
        helper.make_node("Slice", [x, "loc_start", "loc_end", "loc_axis"], ["loc"]),
        helper.make_node("Tanh", ["loc"], ["action"]),
    ]
    graph = helper.make_graph(
        nodes,
        "simreal_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["N", obs_size])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["N", action_size])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="simreal",
        producer_version=simreal.__version__,
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def _git_commit() -> str:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def check_flat_observation(env, task: str, run_dir: Path) -> None:
    """BundleError naming ``observation`` when ``env`` observes a dict (camera images beside the
    state): a bundle's observation is one flat vector of named terms, with no image inputs yet."""
    if isinstance(env.observation_size, Mapping):
        raise BundleError(
            "observation",
            f"{task} observes {', '.join(env.observation_size)}; a bundle's observation "
            "is one flat vector and has no image inputs yet, so this policy cannot be "
            "exported (eval and play work on the run)",
            str(run_dir),
        )


def export_bundle(
    run_dir: Path, cfg: RunConfig, env, normalizer: Any, policy_params: Any, out_dir: Path | None = None
) -> Path:
    """Export a Brax/JAX policy: its ONNX graph plus ``bundle.yaml`` (default ``run_dir/bundle``)."""
    model = policy_to_onnx(
        normalizer, policy_params, env.action_size, cfg.train.activation, cfg.train.normalize_observations
    )
    return write_bundle(run_dir, cfg, env, model, np.asarray(normalizer.mean), np.asarray(normalizer.std), out_dir)


def write_bundle(
    run_dir: Path,
    cfg: RunConfig,
    env,
    model: onnx.ModelProto,
    obs_mean: np.ndarray,
    obs_std: np.ndarray,
    out_dir: Path | None = None,
    action_chunk: ActionChunk | None = None,
    sections: Mapping[str, Any] = {},
    files: Mapping[str, bytes] = {},
) -> Path:
    """Write any trainer's ONNX policy (raw obs -> action in [-1, 1], normalisation baked in; with
    ``action_chunk``, the chunk of the next actions and the bundle's ``action_chunk`` section) and
    its ``bundle.yaml``; the folder appears atomically (built beside it, then renamed).
    ``sections``: more top-level sections of ``bundle.yaml`` (a VLA's ``images``, ``instruction``);
    ``files``: more files of the bundle by name (its tokenizer)."""
    return atomic_folder(
        Path(out_dir) if out_dir else run_dir / "bundle",
        lambda tmp: _fill_bundle(tmp, run_dir, cfg, env, model, obs_mean, obs_std, action_chunk, sections, files),
    )


def _fill_bundle(
    tmp: Path,
    run_dir: Path,
    cfg: RunConfig,
    env,
    model: onnx.ModelProto,
    obs_mean: np.ndarray,
    obs_std: np.ndarray,
    action_chunk: ActionChunk | None,
    sections: Mapping[str, Any],
    files: Mapping[str, bytes],
) -> None:
    """The bundle's files in the folder ``tmp`` (:func:`write_bundle`)."""
    atomic_write_bytes(tmp / "policy.onnx", model.SerializeToString())
    for name, content in files.items():
        atomic_write_bytes(tmp / name, content)
    deployment = env.deployment()
    task_params = {k: np.asarray(v).tolist() for k, v in deployment.task_params.items()}
    data = {
        "format_version": FORMAT_VERSION,
        "robot": env.robot.name,
        "robot_spec": {k: v for k, v in to_dict(env.robot).items() if k != "source"},
        "task": cfg.task,
        "control_rate_hz": env.robot.control_rate_hz,
        "observation": {
            "size": env.observation_size,
            "terms": env.obs_layout,
            "normalization": {
                "mean": np.asarray(obs_mean, float).tolist(),
                "std": np.asarray(obs_std, float).tolist(),
                "baked_into_onnx": True,
            },
        },
        "action": env.action_layout(),
        "latency": {"action_delay_steps": list(env.delay_range), "obs_history": env.cfg.obs_history_steps},
        "task_params": task_params,
        "task_config": snapshot_inputs(to_dict(env.cfg), tmp),  # the bundle carries the clip its env reads
        "task_topics": {k: dict(v) for k, v in deployment.task_topics.items()},
        "onnx": {"file": "policy.onnx", "input": "obs", "output": "action", "opset": OPSET},
        "provenance": {
            "run_dir": str(run_dir),
            "config_hash": cfg.hash(),
            "git_commit": _git_commit(),
            "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "simreal_version": simreal.__version__,
            "backend": env.backend,
            "trainer": cfg.trainer,
        },
    }
    if action_chunk is not None:
        data["action_chunk"] = action_chunk.to_yaml()
    data.update(sections)
    ref = deployment.reference
    if ref is not None:
        write_reference(tmp / REFERENCE_NPZ, ref)
        data["reference"] = {"file": REFERENCE_NPZ, "rate_hz": ref.rate_hz, "loop": ref.loop}
    write_bundle_yaml(tmp, data)


def check_export(bundle_dir: Path, make_policy, policy_params: Any, n: int = 256, seed: int = 0) -> float:
    """Max |ONNX Runtime - JAX| over ``n`` random observations around the data the policy saw
    (mean + 2 std N(0, 1) per dimension, the bundle's normalisation statistics)."""
    from simreal.bundle import OnnxPolicy

    bundle = load_bundle(bundle_dir)
    obs = np.random.default_rng(seed).normal(size=(n, bundle.obs_size)) * 2.0
    obs = (obs * bundle.obs_std + bundle.obs_mean).astype(np.float32)
    jax_act, _ = make_policy(policy_params, deterministic=True)(jnp.asarray(obs), jax.random.PRNGKey(0))
    onnx_act = OnnxPolicy(bundle)(obs)
    return float(np.max(np.abs(np.asarray(jax_act) - onnx_act)))
