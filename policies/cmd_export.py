"""``simreal export``: write the policy bundle (``policy.onnx`` + ``bundle.yaml``).

    simreal export runs/quadrotor-hover/20261121-120000
    simreal export RUN_DIR --out /tmp/cf_bundle

Works on every trainer's runs (brax, sb3, rsl_rl). After writing, ONNX Runtime is checked
against the trainer's own deterministic policy (JAX or torch) on random observations; a
difference above 1e-5 is an error. A vision-language-action run (``train-bc --policy vla``) exports
with image and instruction inputs (``policies/vla_export.py``); a CNN policy on a task with dict
observations (``arm-push-pixels``) is refused.
"""

from __future__ import annotations

import argparse

HELP = "export a trained run to a policy bundle"

#: Largest |ONNX Runtime - framework policy| accepted, on actions in [-1, 1].
MAX_ABS_DIFF = 1e-5


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir")
    p.add_argument("--out", default=None, help="bundle folder (default RUN_DIR/bundle)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from simreal.errors import BundleError
    from simreal.policies.export import check_flat_observation
    from simreal.policies.run_config import make_env
    from simreal.policies.train import load_config
    from simreal.policies.trainers import get_trainer

    run_dir = Path(args.run_dir)
    cfg = load_config(run_dir)
    check_flat_observation(make_env(cfg), cfg.task, run_dir)  # before the trainer loads a policy it could not export
    out, err = get_trainer(cfg.trainer).export(run_dir, cfg, Path(args.out) if args.out else None)
    if err > MAX_ABS_DIFF:
        raise BundleError("policy.onnx", f"ONNX Runtime differs from the {cfg.trainer} policy by {err:.2e} "
                                         f"(> {MAX_ABS_DIFF:g})", str(out))
    print(f"bundle: {out} (ONNX vs {cfg.trainer} policy max abs diff {err:.2e})")
    return 0
