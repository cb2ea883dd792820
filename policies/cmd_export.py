"""``simreal export``: write the policy bundle (``policy.onnx`` + ``bundle.yaml``).

    simreal export runs/quadrotor-hover/20261121-120000
    simreal export RUN_DIR --out /tmp/cf_bundle

After writing, ONNX Runtime is checked against the JAX (or, for trainer=sb3|rsl_rl runs, the torch)
policy on random observations.
"""

from __future__ import annotations

import argparse

HELP = "export a trained run to a policy bundle"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir")
    p.add_argument("--out", default=None, help="bundle folder (default RUN_DIR/bundle)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from simreal.errors import BundleError
    from simreal.policies.export import check_export, export_bundle
    from simreal.policies.train import load_config, load_policy

    run_dir = Path(args.run_dir)
    cfg = load_config(run_dir)
    if cfg.trainer != "brax":  # torch-trained: the trainer module rebuilds its deterministic actor
        import importlib

        from simreal.policies import torch_policy

        env, actor = importlib.import_module(f"simreal.policies.train_{cfg.trainer}").load_actor(run_dir, cfg)
        out = torch_policy.export_bundle(run_dir, cfg, env, actor, Path(args.out) if args.out else None)
        err = torch_policy.check_export(out, actor)
        if err > 1e-5:
            raise BundleError("policy.onnx", f"ONNX Runtime differs from the torch policy by {err:.2e} (> 1e-5)",
                              str(out))
        print(f"bundle: {out} (ONNX vs torch max abs diff {err:.2e})")
        return 0
    env, ppo, ts = load_policy(run_dir, cfg)
    normalizer, policy = ppo.policy_params(ts)
    out = export_bundle(run_dir, cfg, env, normalizer, policy, Path(args.out) if args.out else None)
    err = check_export(out, ppo.make_policy, (normalizer, policy), env.observation_size)
    if err > 1e-5:
        raise BundleError("policy.onnx", f"ONNX Runtime differs from the JAX policy by {err:.2e} (> 1e-5)", str(out))
    print(f"bundle: {out} (ONNX vs JAX max abs diff {err:.2e})")
    return 0
