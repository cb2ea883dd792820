"""One spelling per CLI idea across verbs: ``--driver-set`` is a driver setting wherever a verb
opens a robot, ``--deploy-set`` a deploy config override wherever a verb builds the deploy
config; the old spellings (``--set`` in drive / record / deploy / benchmark, benchmark's
``--driver-config``) parse to the same thing for one release, and ``--help`` says so."""

from __future__ import annotations

import pytest

from simreal.cli import _parser

DRIVER = "port=/dev/ttyACM0"
DEPLOY = "watchdog.timeout_s=0.05"


def _parse(argv: list[str]):
    return _parser().parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "dest", "spellings"),
    [
        (["drive", "B"], "settings", ("--driver-set", "--set")),
        (
            ["record", "so100", "--teleop", "keyboard", "--task", "t", "--out", "d"],
            "settings",
            ("--driver-set", "--set"),
        ),
        (["drive", "B"], "overrides", ("--deploy-set",)),
        (["deploy", "run", "B"], "overrides", ("--deploy-set", "--set")),
        (["deploy", "sim", "B"], "overrides", ("--deploy-set", "--set")),
        (["deploy", "ros2", "B", "--out", "o"], "overrides", ("--deploy-set", "--set")),
        (["benchmark", "arm-reach"], "overrides", ("--deploy-set", "--set")),
        (["benchmark", "arm-reach"], "driver_config", ("--driver-set", "--driver-config")),
    ],
)
def test_every_spelling_of_an_idea_lands_in_one_place(argv, dest, spellings):
    value = DRIVER if dest in ("settings", "driver_config") else DEPLOY
    for flag in spellings:
        assert getattr(_parse([*argv, flag, value]), dest) == [value], flag


@pytest.mark.parametrize("verb", [["drive"], ["record"], ["deploy", "run"], ["benchmark"]])
def test_help_names_the_old_spelling_as_kept_for_one_release(verb, capsys):
    with pytest.raises(SystemExit):
        _parse([*verb, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "the old spelling, kept for one release" in out, out
