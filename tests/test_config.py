"""Config errors name the key and what was expected; the CLI exits with code 2."""

import re

import pytest

from simreal.cli import main
from simreal.errors import ConfigError, UnknownNameError
from simreal.policies.run_config import resolve


@pytest.mark.parametrize(
    "override, key, expected",
    [
        ("train.num_envz=4", "train.num_envz", "unknown key"),
        ("train.num_envs=abc", "train.num_envs", "expected an integer"),
        ("train.num_envs=0", "train.num_envs", "must be >= 1"),
        ("train.discounting=1.5", "train.discounting", "must be <= 1.0"),
        ("env.action_mode=thrust", "env.action_mode", "expected one of rotor_thrust, ctbr"),
        ("backend=gpu", "backend", "expected one of auto"),
        ("seed=1.5", "seed", "expected an integer"),
        ("bogus=1", "bogus", "unknown key"),
        ("train.num_minibatches=3", "train.num_minibatches", "must divide"),
        ("train.policy_hidden=[64,0]", "train.policy_hidden[1]", "must be >= 1"),  # was a ZeroDivisionError in JAX
    ],
)
def test_bad_override_names_key(override, key, expected):
    with pytest.raises(ConfigError) as e:
        resolve("quadrotor-hover", [override])
    assert f"'{key}'" in str(e.value)
    assert expected in str(e.value)


def test_unknown_task_lists_valid_names():
    with pytest.raises(UnknownNameError) as e:
        resolve("quadrotor-hoover")
    assert "quadrotor-hover" in str(e.value)


def test_missing_robot_file():
    with pytest.raises(ConfigError) as e:
        resolve("quadrotor-hover", ["robot=/nonexistent/robot.yaml"])
    assert "robot" in str(e.value) and "not found" in str(e.value)


def test_defaults_resolve_and_round_trip():
    cfg = resolve("quadrotor-hover", ["train.num_envs=512", "seed=3"])
    assert cfg.train.num_envs == 512 and cfg.seed == 3
    again = resolve(None, [], base=cfg.to_dict())
    assert again == cfg and again.hash() == cfg.hash()


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["train", "quadrotor-hover", "train.num_envs=-1"], "train.num_envs"),
        (["train", "no-such-task"], "unknown task"),
        (["eval", "/nonexistent/run"], "not a simreal run directory"),
        # once trained a whole run with the range silently turned into [2, 2]
        (["train", "quadrotor-hover", "env.action_delay_steps=[2,1]"], "'env.action_delay_steps': expected [min, max]"),
    ],
)
def test_cli_config_errors_exit_2(argv, fragment, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("episodes", ["0", "-3"])
def test_eval_refuses_episodes_below_one_in_one_line(episodes, tmp_path, capsys):
    """`--episodes 0` once ran the default silently and `-3` ended in a JAX traceback: both are
    refused before the run is even opened (this run directory does not exist)."""
    assert main(["eval", str(tmp_path / "no-run"), "--episodes", episodes]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"simreal eval: error: --episodes: expected an integer >= 1, got {episodes}", err


def test_numbers_in_scientific_notation_without_a_dot_are_numbers():
    """PyYAML reads YAML 1.1, where ``3e-4`` is text: `train.learning_rate=3e-4` was refused as
    "expected a number, got '3e-4'" and `train.num_timesteps=1e6` as not an integer."""
    cfg = resolve(
        "quadrotor-hover",
        ["train.learning_rate=3e-4", "train.num_timesteps=1e6", "train.num_envs=2.56e2", "seed=2.0e1"],
    )
    assert cfg.train.learning_rate == pytest.approx(3e-4) and cfg.train.num_timesteps == 1_000_000
    assert cfg.train.num_envs == 256 and cfg.seed == 20 and type(cfg.seed) is int
    for bad, what in (
        ("train.num_timesteps=1.5e0", "expected an integer, got 1.5"),
        ("seed=2.5e0", "'seed': expected an integer"),
        ("seed=1e30", r"'seed': expected an integer in \[0, 2147483647\], got 1000000000000000019884624838656"),
        ("seed=-3", r"'seed': expected an integer in \[0, 2147483647\]"),
        ("train.learning_rate=1e", "expected a number, got '1e'"),
    ):
        with pytest.raises(ConfigError, match=what):
            resolve("quadrotor-hover", [bad])


def test_resuming_with_another_task_names_the_task(tmp_path, capsys):
    """Once "config key 'env.action_mode': unknown key", another task's keys, not the cause."""
    from simreal.yaml_io import dump_yaml

    dump_yaml(tmp_path / "config.yaml", resolve("cartpole-balance").to_dict())
    assert main(["train", "--resume", str(tmp_path), "task=arm-reach"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "config key 'task': a resumed run keeps its task (cartpole-balance); start a new run for arm-reach"
    ), err


@pytest.mark.parametrize(
    "argv",
    [
        ["deploy", "sim", "BUNDLE", "--seed", "99999999999999999999"],
        ["demos", "arm-reach", "--seed", "-1", "--out", "OUT"],
        ["play", "RUN", "--seed", "1.5"],
    ],
)
def test_a_seed_flag_out_of_range_is_one_argparse_line(argv, capsys):
    """Once a traceback from JAX's key ("Python int too large to convert to C long")."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert "--seed: expected an integer in [0, 2147483647]" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["deploy", "sim", "BUNDLE", "--external", "--domain-id", "-1"], ["deploy", "run", "BUNDLE", "--domain-id", "233"]],
)
def test_a_domain_id_out_of_range_is_one_argparse_line(argv, capsys):
    """Once checked only after deploy sim --external had printed that it was waiting on domain -1."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--domain-id: expected a DDS domain id 0..232" in err and "waiting" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["deploy", "run", "BUNDLE", "--duration", "0"],
        ["drive", "BUNDLE", "--twin", "--duration", "-1"],
        ["drive", "BUNDLE", "--twin", "--duration", "nan"],
    ],
)
def test_a_duration_that_is_not_positive_is_one_argparse_line(argv, capsys):
    """One check for both verbs, at the command line (each had its own, after loading the bundle)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "--duration: expected a number > 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "override, says",
    [
        ("env.goal_half_extent_m=[0.1,0.1]", "expected 3 numbers (as the default [0.15, 0.15, 0.1]), got [0.1, 0.1]"),
        ("env.kp_scale=[0.9]", "expected 2 numbers"),
    ],
)
def test_a_vector_or_range_of_the_wrong_length_is_refused_naming_the_key(override, says):
    """It crashed inside JAX (a 2-vector), or a 3-vector's last element was read as y."""
    from simreal.errors import ConfigError
    from simreal.policies.run_config import resolve

    with pytest.raises(ConfigError, match=re.escape(says)) as e:
        resolve("arm-reach", [override])
    assert e.value.key == override.split("=")[0]


def test_optional_positional_lists_are_not_called_required(capsys):
    """argparse calls a ``*`` positional without a default required in its usage error
    ('required: task, overrides, ...'), though none need be given."""
    with pytest.raises(SystemExit):
        main(["demos"])
    err = capsys.readouterr().err
    assert "required: task, --teacher" in err and "overrides" not in err.splitlines()[-1], err
