"""``simreal export``: write the policy bundle (``policy.onnx`` + ``bundle.yaml``).

    simreal export runs/quadrotor-hover/20261121-120000
    simreal export RUN_DIR --out /tmp/cf_bundle

Works on every trainer's runs (brax, sb3, rsl_rl). After writing, ONNX Runtime is checked
against the trainer's own deterministic policy (JAX or torch) on random observations; a
difference above 1e-5 is an error. The bundle is built and checked in ``OUT.export`` and only
then renamed into place, so a failed check or an interruption leaves ``OUT`` as it was: a
bundle in place has always passed its check. ``--out`` may be new, an empty folder or a bundle
(its ``bundle.yaml``), which the export replaces; any other folder, or a file, is refused: it
once deleted a folder of the user's files. A vision-language-action run (``train-bc --policy vla``) exports
with image and instruction inputs (``simreal/policies/vla/export.py``); a CNN policy on a task with dict
observations (``arm-push-pixels``) is refused.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "export a trained run to a policy bundle"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir")
    p.add_argument(
        "--out", default=None, help="bundle folder, new, empty or a bundle to replace (default RUN_DIR/bundle)"
    )


def check_replaceable(out: Path) -> None:
    """Refuse an ``--out`` the export must not replace (module docstring)."""
    from simreal.bundle import BUNDLE_YAML
    from simreal.errors import ConfigError

    if out.exists() and not out.is_dir():
        raise ConfigError("--out", f"{out} is a file, not a folder for the bundle")
    if out.is_dir() and not (out / BUNDLE_YAML).is_file() and any(out.iterdir()):
        raise ConfigError(
            "--out",
            f"{out} is a folder with other files in it (no {BUNDLE_YAML}: not a bundle); "
            "give a new or empty folder, or an earlier bundle to replace",
        )


def run(args: argparse.Namespace) -> int:
    import shutil
    import sys

    from simreal.errors import BundleError
    from simreal.policies.export import MAX_ABS_DIFF, check_flat_observation
    from simreal.policies.run_config import make_env
    from simreal.policies.run_dir import load_config
    from simreal.policies.trainers import get_trainer
    from simreal.stop_signal import stop_on_signals

    run_dir = Path(args.run_dir)
    cfg = load_config(run_dir, reward=False)  # a policy does not carry its reward: no reward model to load
    env = make_env(cfg)  # once: the check below, then the trainer's export
    check_flat_observation(env, cfg.task, run_dir)  # before the trainer loads a policy it could not export
    out = (Path(args.out) if args.out else run_dir / "bundle").resolve()  # "." has no name to stage beside
    check_replaceable(out)
    staging = out.with_name(out.name + ".export")
    shutil.rmtree(staging, ignore_errors=True)  # a killed export's
    # a signal is recorded, not raised inside JAX or ONNX Runtime (a KeyboardInterrupt there was a
    # traceback, or was swallowed by a callback and the export went on); acted on before the rename
    with stop_on_signals("stopping after the export under way, without putting its bundle in place") as stop:
        try:
            _, err = get_trainer(cfg.trainer).export(run_dir, cfg, staging, env=env)
        finally:
            if stop.requested:
                shutil.rmtree(staging, ignore_errors=True)
    if stop.requested:
        print(f"simreal export: stopped by {stop.name}; {out} unchanged", file=sys.stderr)
        return stop.exit_code
    if err > MAX_ABS_DIFF:
        shutil.rmtree(staging)
        raise BundleError(
            "policy.onnx",
            f"ONNX Runtime differs from the {cfg.trainer} policy by {err:.2e} "
            f"(> {MAX_ABS_DIFF:g}); not written, what was there is unchanged",
            str(out),
        )
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    print(f"bundle: {out} (ONNX vs {cfg.trainer} policy max abs diff {err:.2e})")
    return 0
