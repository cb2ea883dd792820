"""``simreal import``: a policy trained elsewhere (legged_gym / unitree_rl_gym TorchScript, Isaac
Lab or mjlab ONNX) as a simreal bundle.

    simreal import policy.pt --spec g1_legged_gym.yaml --robot g1_12dof --out g1_bundle
    simreal import policy.onnx --spec mjlab.yaml --robot g1 --out g1_bundle

The spec says, in those frameworks' words, what the policy observes (terms in order, scales,
history), its joint order, action scale, default angles, gains and the control and physics
rates it was trained at; an mjlab ONNX's metadata gives the joints, defaults, gains, action scale
and terms itself (docs/deploy.md, "A policy trained elsewhere"; ``simreal/policies/foreign.py``).
The bundle maps the policy's joints onto the robot's driver order by name and holds the robot's
other actuators at their default. Anything that cannot match (an unknown joint or key, an input
width the policy does not take, a missing scale, a rate the robot cannot run) is one line and
exit 2, with nothing written; the bundle appears whole or not at all.

Then ``simreal deploy sim BUNDLE``, ``simreal drive BUNDLE --driver unitree --twin``, ``simreal
benchmark`` and ``simreal deploy ros2`` run it as they run a bundle trained here (an imported
bundle has no simreal task, so ``deploy sim`` has no training env to compare with: no sim-to-sim
gate).
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "turn a TorchScript or ONNX policy trained elsewhere into a bundle"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("policy", help="TorchScript (.pt, torch.jit.save) or ONNX (.onnx) policy")
    p.add_argument("--spec", required=True, help="the import spec YAML (observation terms, joints, gains, rates)")
    p.add_argument("--robot", required=True, help="robot name from configs/robots/ or a robot spec YAML")
    p.add_argument("--out", required=True, help="bundle folder, new, empty or a bundle to replace")


def run(args: argparse.Namespace) -> int:
    from simreal.cli.export import check_replaceable
    from simreal.policies.foreign import import_policy

    out = Path(args.out).resolve()
    check_replaceable(out)
    path = import_policy(Path(args.policy), Path(args.spec), args.robot, out)
    print(f"wrote {path}")
    return 0
