"""``simreal list``: one line per task and robot, the same descriptions in ``--json``."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from simreal.cli import main
from simreal.cli.list_ import robot_description
from simreal.robot_spec import available_robots, load_robot_spec
from simreal.sim.tasks import TASKS, VARIANT_DESCRIPTIONS, task_class, task_description


def test_task_description_is_the_class_docstrings_first_line_read_without_importing():
    for name in set(TASKS) - set(VARIANT_DESCRIPTIONS):
        doc = inspect.getdoc(task_class(name))
        assert doc and task_description(name) == doc.splitlines()[0], name
    # a variant is another task's class under its own name, described by its own line
    for name, line in VARIANT_DESCRIPTIONS.items():
        assert task_description(name) == line
        assert any(TASKS[other] == TASKS[name] for other in set(TASKS) - {name}), name


def test_robot_description_is_the_opening_comments_first_sentence(tmp_path):
    spec = tmp_path / "bot.yaml"
    spec.write_text(
        "# Crazyflie 2.1 class nano quadrotor, 4 motors\n# (X frame). Sources: a paper.\n"
        "name: bot  # not a comment block\n"
    )
    assert robot_description(spec) == "Crazyflie 2.1 class nano quadrotor, 4 motors (X frame)."
    spec.write_text("name: bot\n# later comment.\n")
    assert robot_description(spec) == ""


def test_list_json_and_text_carry_descriptions(capsys):
    assert main(["list", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["tasks"]) == set(TASKS)
    assert all(out["tasks"][t]["description"] for t in TASKS)
    assert set(out["robots"]) == set(available_robots())
    for name, r in out["robots"].items():
        spec = load_robot_spec(name)
        assert r["family"] == spec.family and r["actuators"] == len(spec.actuators), name
        assert r["description"].endswith(".") and "Sources" not in r["description"], (name, r["description"])

    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for t, d in out["tasks"].items():
        assert sum(line.split()[0] == t and line.endswith(d["description"]) for line in lines) == 1, t
    for name, r in out["robots"].items():
        line = next(line for line in lines if line.split()[0] == name)
        assert f"{r['actuators']} actuators" in line and f"{r['control_rate_hz']:g} Hz" in line, line
        assert line.endswith(r["description"]) and r["family"] in line, line


# -- output into a pipe whose reader stopped early (`simreal list | head -1`) ---------------------


@pytest.mark.parametrize("argv", [["list"], ["list", "--json"]])
def test_a_closed_pipe_ends_quietly_with_141(argv):
    """The reader has gone before the first write: no traceback, no 'Exception ignored', exit
    code 141 (128 + SIGPIPE), as a Unix tool killed by SIGPIPE."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "simreal.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    proc.stdout.close()  # the reader is gone before simreal writes anything
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


def test_a_broken_pipe_that_is_not_stdout_keeps_its_traceback(monkeypatch):
    """A BrokenPipeError from somewhere else (a socket, a child's pipe) is a real failure."""
    from simreal.cli import list_ as cmd_list

    def broken(args):
        raise BrokenPipeError("a socket")

    monkeypatch.setattr(cmd_list, "run", broken)
    with pytest.raises(BrokenPipeError):
        main(["list"])
