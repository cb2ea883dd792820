"""``simreal list``: registered tasks and shipped robots.

    simreal list
    simreal list --json
"""

from __future__ import annotations

import argparse
import json

HELP = "list tasks and robots"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from simreal.robot_spec import available_robots, load_robot_spec
    from simreal.sim.tasks import TASKS

    robots = {}
    for name in available_robots():
        spec = load_robot_spec(name)
        robots[name] = {"family": spec.family, "actuators": len(spec.actuators),
                        "control_rate_hz": spec.control_rate_hz}
    if args.json:
        print(json.dumps({"tasks": sorted(TASKS), "robots": robots}, indent=2))
        return 0
    print("tasks:")
    for t in sorted(TASKS):
        print(f"  {t}")
    print("robots:")
    for name, r in robots.items():
        print(f"  {name:<14} {r['family']:<10} {r['actuators']:>3} actuators  {r['control_rate_hz']:g} Hz")
    return 0
