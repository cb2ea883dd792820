"""The README's commands as a new user runs them from a fresh clone, in order: each dataset one
reads, an earlier one writes; each command that takes minutes says how long; the VLA's defaults
are the epochs the README states."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Verbs whose README commands take long enough that the README must say how long.
LONG = ("demos", "train-bc", "finetune-vla", "fit-reward")
TIME = re.compile(r"\b\d+(\.\d+)?(-\d+(\.\d+)?)? ?(s|min|minutes)\b")


def _commands() -> list[tuple[list[str], str]]:
    """(argv after ``simreal``/``python``, the line's comment) of every README code line that runs one."""
    out = []
    for line in (ROOT / "README.md").read_text().splitlines():
        code, _, comment = line.partition("  # ")
        if code.startswith(("simreal ", "python bench/")):
            out.append((shlex.split(code.rstrip(" \\"))[1:], comment))  # a continued line: its first part
    return out


def test_every_dataset_a_readme_command_reads_an_earlier_one_writes():
    """`train-bc data/mixed --iql ...` read a dataset no README command made."""
    written: set[str] = set()
    for argv, _ in _commands():
        if argv[0] in ("train-bc", "frames"):
            reads = [a for a in argv[1:] if a.startswith("data/")]
            assert reads and set(reads) <= written, (argv, sorted(written))
        if "--out" in argv:
            written.add(argv[argv.index("--out") + 1])


def test_every_long_readme_command_says_how_long_it_takes():
    """`train-bc data/choice --policy vla` ran 6-11 hours where the README said minutes; `--policy
    act` 11 minutes with no hint."""
    for argv, comment in _commands():
        if argv[0] in LONG:
            assert TIME.search(comment), (argv, comment)


def test_the_vla_trains_the_epochs_the_readme_states(tmp_path):
    """BC's 200 epochs took hours for the VLA on 45,000 frames; arm-reach-choice's own are 10."""
    from simreal.config import deep_merge
    from simreal.policies.run_config import resolve, task_yaml
    from simreal.yaml_io import load_yaml

    base = deep_merge(
        load_yaml(task_yaml("arm-reach-choice")),
        {"trainer": "bc", "algorithm": "bc", "train": {"policy": "vla", "dataset": str(tmp_path)}},
    )
    epochs = resolve(None, [], base=base, source="test").train.epochs
    line = next(c for argv, c in _commands() if argv[:3] == ["train-bc", "data/choice", "--policy"])
    assert epochs == 10 and f"{epochs} epochs" in line, (epochs, line)


def test_the_offline_labeller_labels_by_the_task_reward(tmp_path, capsys):
    """The VLM chain could not be tried without an endpoint; bench/scripted_labels.py labels the
    pairs from the frames' own task reward, through simreal label."""
    import sys

    import numpy as np

    sys.path.insert(0, str(ROOT / "bench"))
    from scripted_labels import main

    from simreal.rewards.label_file import load_labels

    rng = np.random.default_rng(0)
    reward = np.arange(12, dtype=np.float32)
    np.savez(
        tmp_path / "frames.npz",
        frames=rng.integers(0, 255, (12, 16, 16, 3), dtype=np.uint8),
        task="to be later",
        task_reward=reward,
    )
    out = tmp_path / "labels.npz"
    assert main([str(tmp_path / "frames.npz"), "--pairs", "20", "--out", str(out), "--cache", str(tmp_path / "c")]) == 0
    labels = load_labels(out)
    assert len(labels.label) == 20 and labels.model == "scripted-teacher"
    later_b = reward[labels.index_b] > reward[labels.index_a]
    np.testing.assert_array_equal(labels.label, later_b.astype(int))  # 1: b is preferred
