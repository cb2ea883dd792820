"""``simreal list``: registered tasks and shipped robots, one line each.

    simreal list
    simreal list --json

A task's line is the first line of its class's docstring; a robot's, its family, actuator
count, control rate and the first sentence of the comment its spec file opens with (the
shipped specs describe the robot and cite their sources there).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

HELP = "list tasks and robots"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="machine-readable output")


def robot_description(path: Path) -> str:
    """The first sentence of the ``#`` comment block ``path`` opens with ('' without one)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = " ".join(w for w in lines if w)
    m = re.match(r"(.+?\.)(\s|$)", text)  # up to the first full stop that ends a word
    return m.group(1) if m else text


def run(args: argparse.Namespace) -> int:
    from simreal.robot_spec import available_robots, load_robot_spec
    from simreal.sim.tasks import TASKS, task_description

    tasks = {name: {"description": task_description(name)} for name in sorted(TASKS)}
    robots = {}
    for name in available_robots():
        spec = load_robot_spec(name)
        robots[name] = {
            "family": spec.family,
            "actuators": len(spec.actuators),
            "control_rate_hz": spec.control_rate_hz,
            "description": robot_description(Path(spec.source)),
        }
    if args.json:
        print(json.dumps({"tasks": tasks, "robots": robots}, indent=2))
        return 0
    print("tasks:")
    width = max(map(len, tasks))
    for name, t in tasks.items():
        print(f"  {name:<{width}}  {t['description']}")
    print("robots:")
    width = max(map(len, robots))
    for name, r in robots.items():
        print(
            f"  {name:<{width}}  {r['family']:<9} {r['actuators']:>3} actuators  {r['control_rate_hz']:>5g} Hz  "
            f"{r['description']}"
        )
    return 0
