"""The command line's argument handling: ``key=value`` overrides after the options reach the
config like those before them; anything else unrecognised is argparse's usage error (exit 2)."""

from __future__ import annotations

import pytest

from simreal.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "cartpole-balance", "train.no_such_key=1", "--json"],
        ["train", "cartpole-balance", "--json", "train.no_such_key=1"],  # after an option: once rejected by argparse
    ],
)
def test_overrides_before_or_after_the_options_reach_the_config(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "config key 'train.no_such_key': unknown key" in err, err


def test_an_unknown_option_or_an_override_to_a_verb_without_overrides_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "cartpole-balance", "--json", "--no-such-option"])
    assert e.value.code == 2 and "unrecognized arguments: --no-such-option" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["list", "train.num_envs=4"])
    assert e.value.code == 2 and "unrecognized arguments: train.num_envs=4" in capsys.readouterr().err
