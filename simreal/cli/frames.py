"""``simreal frames``: the frames file ``simreal label`` labels, taken from a recorded dataset.

    simreal demos arm-reach --teacher scripted --camera front --image-size 64x64 --episodes 40 --out data/reach
    simreal demos arm-reach --teacher random --camera front --image-size 64x64 --episodes 40 --out data/explore
    simreal frames data/reach data/explore --camera front --every 5 --task "to move the gripper to the green marker" \\
        --out frames.npz
    simreal label frames.npz --endpoint http://127.0.0.1:8000/v1 --model M --pairs 500 --out labels.npz
    simreal fit-reward frames.npz labels.npz --out reward.safetensors

Reads LeRobot v3 datasets whose state feature is made of observation terms (``simreal demos``:
element names ``<term>.<i>``; a ``simreal record`` or lerobot dataset names the robot's joints
instead, and is refused in one line) and keeps every ``--every``-th frame of each episode. A
reward model fitted on demonstrations alone is exploited by the policy it trains wherever the
demonstrations never went (measured: docs/benchmarks-log.md), so give it exploration too
(``--teacher random``). Writes an npz (no pickle, written atomically):

| key | shape, dtype | holds |
| --- | --- | --- |
| ``frames`` | (N, H, W, 3) uint8 | camera ``--camera`` |
| ``task`` | str | the goal to label against (``--task``, default the episodes' instruction when they all carry the same; refused when they differ) |
| ``camera`` | str | the camera's name |
| ``state`` | (N, d) float32 | the state feature ``--state`` at each frame |
| ``state_terms`` | (k,) str | the observation terms ``state`` concatenates (``simreal.observations``) |
| ``dataset_index``, ``episode_index``, ``frame_index`` | (N,) int64 | where each frame came from |
| ``task_reward`` | (N,) float32 | the dataset's ``next.reward`` at the frame, when it has one: the task's own reward, a ground truth for ``simreal fit-reward`` to report agreement with |

``--state`` defaults to ``observation.environment_state`` (the scene's noise-free state:
``simreal demos`` records it for tasks naming ``environment_state_terms``), else
``observation.state``. The terms come from the feature's names (``<term>.<i>``).
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

HELP = "frames (and the state at each) from a recorded dataset, for simreal label and simreal fit-reward"

ENV_STATE, STATE = "observation.environment_state", "observation.state"
IMAGE_PREFIX = "observation.images."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "datasets",
        nargs="+",
        metavar="dataset",
        help="LeRobot v3 dataset folder(s), in order (e.g. demonstrations and random exploration)",
    )
    p.add_argument("--camera", required=True, help="camera NAME (the dataset's observation.images.NAME)")
    p.add_argument("--out", required=True, help="frames npz to write")
    p.add_argument("--every", type=int, default=1, help="keep every K-th frame of each episode")
    p.add_argument(
        "--state", default=None, help=f"state feature to keep beside each frame (default {ENV_STATE}, else {STATE})"
    )
    p.add_argument(
        "--task",
        default=None,
        help="the goal the frames are labelled against (default: the episodes' "
        "instruction, when they all carry the same)",
    )


def only_instruction(datasets: list) -> str:
    """The one instruction every episode of ``datasets`` carries; a SimrealError naming ``--task``
    when they differ: a VLM compares frames of different episodes, so they need one goal (an
    arm-reach episode's instruction names its own goal's coordinates)."""
    from simreal.errors import SimrealError

    seen = sorted({ds.episode_task(i) for ds in datasets for i in range(ds.num_episodes)})
    if len(seen) > 1:
        shown = "; ".join(f"'{t}'" for t in seen[:2]) + ("; ..." if len(seen) > 2 else "")
        raise SimrealError(
            f"--task: the episodes carry {len(seen)} different instructions ({shown}), and the "
            "labels compare frames of different episodes: give the one goal they are judged "
            'against, e.g. --task "to move the gripper to the green marker"'
        )
    return seen[0]


def term_names(feature_names: list[str], key: str, where: str) -> tuple[str, ...]:
    """The observation terms of a state feature whose per-element names are ``<term>.<i>``, in order."""
    from simreal.errors import DataFileError
    from simreal.observations import TERMS

    terms: list[str] = []
    for name in feature_names:
        term = str(name).rsplit(".", 1)[0]
        if term not in TERMS:
            raise DataFileError(
                where,
                f"feature '{key}' element {name!r} is not <observation term>.<i> (a joint's "
                f"name: a `simreal record` or lerobot dataset?); simreal frames takes datasets "
                f"of `simreal demos`, whose state is observation terms ({', '.join(TERMS)})",
            )
        if not terms or terms[-1] != term:
            terms.append(term)
    return tuple(terms)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from simreal.dataset.reader import Dataset
    from simreal.errors import DataFileError, SimrealError
    from simreal.yaml_io import atomic_write_bytes

    if args.every < 1:
        raise SimrealError(f"--every {args.every}: expected an integer >= 1")
    image = IMAGE_PREFIX + args.camera
    datasets, state_key, terms = [], args.state, None
    for root in args.datasets:
        ds = Dataset(root)
        if image not in ds.features:
            cams = [k[len(IMAGE_PREFIX) :] for k in ds.features if k.startswith(IMAGE_PREFIX)]
            raise SimrealError(
                f"--camera {args.camera}: {root} has no {image}; its cameras: {', '.join(cams) or 'none'}"
            )
        state_key = state_key or (ENV_STATE if ENV_STATE in ds.features else STATE)
        if state_key not in ds.features:
            raise SimrealError(f"--state {state_key}: {root} has no such feature")
        these = term_names(ds.features[state_key].get("names") or [], state_key, str(Path(root) / "meta" / "info.json"))
        if terms is not None and (
            these != terms or ds.features[image]["shape"] != datasets[0].features[image]["shape"]
        ):
            raise DataFileError(
                root,
                f"its {state_key} terms {', '.join(these)} or {image} shape "
                f"{ds.features[image]['shape']} differ from {args.datasets[0]}'s",
            )
        if ds.num_episodes == 0:
            raise DataFileError(root, "the dataset holds no episodes")
        datasets.append(ds)
        terms = these
    assert terms is not None  # nargs="+": at least one dataset set it
    task = args.task if args.task is not None else only_instruction(datasets)
    has_reward = all("next.reward" in ds.features for ds in datasets)
    parts: dict[str, list[np.ndarray]] = {
        "frames": [],
        "state": [],
        "dataset_index": [],
        "episode_index": [],
        "frame_index": [],
        "task_reward": [],
    }
    keep = slice(None, None, args.every)
    for d, ds in enumerate(datasets):
        for i in range(ds.num_episodes):
            ep = ds.episode(i)
            parts["frames"].append(ep[image][keep])
            parts["state"].append(np.asarray(ep[state_key], np.float32)[keep])
            parts["dataset_index"].append(np.full(len(parts["state"][-1]), d, np.int64))
            parts["episode_index"].append(np.asarray(ep["episode_index"], np.int64)[keep])
            parts["frame_index"].append(np.asarray(ep["frame_index"], np.int64)[keep])
            if has_reward:
                parts["task_reward"].append(np.asarray(ep["next.reward"], np.float32).reshape(-1)[keep])
    out = {k: np.concatenate(v) for k, v in parts.items() if v}
    buf = io.BytesIO()
    np.savez(buf, **out, task=np.str_(task), camera=np.str_(args.camera), state_terms=np.array(terms, dtype=np.str_))  # type: ignore[arg-type]  # numpy stub: **arrays might bind allow_pickle
    atomic_write_bytes(Path(args.out), buf.getvalue())
    print(
        json.dumps(
            {
                "frames": str(args.out),
                "count": int(len(out["frames"])),
                "shape": list(out["frames"].shape[1:]),
                "state": state_key,
                "state_terms": list(terms),
                "task": task,
                "task_reward": has_reward,
            }
        )
    )
    return 0
