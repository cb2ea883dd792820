"""``simreal label``: preference labels for pairs of frames from a vision-language model.

    # a local vLLM (or Ollama: --endpoint http://127.0.0.1:11434/v1), 500 random pairs
    simreal label frames.npz --task "to push the red cube onto the green target" \\
        --endpoint http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-VL-7B-Instruct --pairs 500 --out labels.npz

    # a hosted API: the key comes from the environment variable named here, never from a flag
    export OPENAI_API_KEY=...
    simreal label frames.npz --task "..." --endpoint https://api.openai.com/v1 --model gpt-4o \\
        --api-key-env OPENAI_API_KEY --pairs 500 --budget 400 --rate 2 --out labels.npz

    # go on after a crash or a spent budget: pairs already in labels.npz or the cache cost nothing
    simreal label frames.npz --task "..." --endpoint ... --model ... --pairs 500 --budget 1000 --resume --out labels.npz

    # a local Hugging Face VLM from a directory (nothing downloads)
    simreal label frames.npz --task "..." --backend hf --model models/Qwen2.5-VL-3B-Instruct \\
        --pairs 500 --out labels.npz

    # every labeller setting from a file (a ``labeller:`` section), flags override it
    simreal label frames.npz --task "..." --config labeller.yaml --pairs 500 --out labels.npz

Input: an npz with ``frames``, (N, H, W, 3) RGB frames or (N, T, H, W, 3) clips, uint8; optional
``pairs`` (M, 2) integer rows to compare (``--pairs N`` draws N random pairs instead, with
``--seed``; a larger ``--pairs`` with the same seed extends the same list) and ``task`` (the
goal; ``--task`` overrides it). Each pair gets RL-VLM-F's two requests (describe, then answer 0 / 1 / -1).

Output: the labels npz (``simreal.rewards.label_file``: ``index_a``, ``index_b``, ``label``,
``model``, ``task``, ``frames_sha256``) and ``<out>.cost.json``, one entry per run: requests
(retries included), tokens as the server reports them, seconds, pairs asked and read from the
cache, and answers that state no label (``unparsed``, counted -1; also said on stderr). Labels
are read from a line or from prose (``simreal.rewards.label_answer``). Answers are cached by
content hash (``--cache``, default ``~/.cache/simreal/labels``), those without a label too, so
nothing is asked twice. ``--budget`` caps the requests a run sends; when it is spent the run
keeps what it has, says so, and exits 0. ``--resume`` keeps an existing ``--out`` and adds to it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from simreal.config import positive_int_arg, seed_arg

HELP = "label pairs of frames with a vision-language model (preferences for a learned reward)"

#: command-line flag (dest) -> labeller config key
_FLAGS = {
    "backend": "backend",
    "endpoint": "endpoint",
    "model": "model",
    "api_key_env": "api_key_env",
    "rate": "max_requests_per_s",
    "max_retries": "max_retries",
    "timeout": "timeout_s",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("frames", help="npz with frames (N, H, W, 3) or clips (N, T, H, W, 3), uint8")
    p.add_argument("--out", required=True, help="labels npz to write")
    p.add_argument(
        "--task",
        default=None,
        help="the goal, completing 'The goal is ...', e.g. 'to open the drawer' (default: the npz's task)",
    )
    p.add_argument(
        "--pairs", type=positive_int_arg, default=None, help="random pairs to label (default: the npz's pairs)"
    )
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the random pairs")
    p.add_argument("--budget", type=int, default=None, help="most requests this run may send (2 per pair)")
    p.add_argument("--resume", action="store_true", help="keep the labels already in --out and add to them")
    p.add_argument("--cache", default=None, help="answer cache folder (default ~/.cache/simreal/labels)")
    p.add_argument("--config", default=None, help="YAML file with a labeller: section")
    p.add_argument("--backend", default=None, help="openai (HTTP, the default) or hf (local model)")
    p.add_argument("--endpoint", default=None, help="base URL of an OpenAI-compatible API (.../v1)")
    p.add_argument("--model", default=None, help="model name (openai) or local model directory (hf)")
    p.add_argument(
        "--api-key-env", dest="api_key_env", default=None, help="NAME of the environment variable holding the API key"
    )
    p.add_argument("--rate", type=float, default=None, help="most requests per second")
    p.add_argument("--max-retries", dest="max_retries", type=int, default=None, help="re-sends after a 429 or 5xx")
    p.add_argument("--timeout", type=float, default=None, help="seconds one request may take")


def labeller_section(args: argparse.Namespace) -> dict[str, Any]:
    """The ``labeller:`` mapping: ``--config``'s section, then the flags given."""
    from simreal.errors import ConfigError
    from simreal.yaml_io import load_yaml

    section: dict[str, Any] = {}
    if args.config is not None:
        data = load_yaml(args.config)
        section = data.get("labeller", {})
        if not isinstance(section, dict) or set(data) - {"labeller"}:
            raise ConfigError("labeller", "expected a file with one 'labeller:' mapping", source=args.config)
    section.update({key: getattr(args, flag) for flag, key in _FLAGS.items() if getattr(args, flag) is not None})
    return section


def sample_pairs(n_frames: int, n_pairs: int, seed: int) -> list[tuple[int, int]]:
    """``n_pairs`` distinct ordered pairs (i, j), i != j, drawn one at a time, so a longer list with
    the same seed starts with the shorter one."""
    import numpy as np

    from simreal.errors import SimrealError

    if n_frames < 2 or n_pairs > n_frames * (n_frames - 1):
        raise SimrealError(
            f"--pairs {n_pairs}: {n_frames} frames give at most {n_frames * (n_frames - 1)} ordered pairs"
        )
    rng = np.random.default_rng(seed)
    seen: dict[tuple[int, int], None] = {}
    while len(seen) < n_pairs:
        i = int(rng.integers(n_frames))
        j = int(rng.integers(n_frames - 1))
        seen.setdefault((i, j + (j >= i)), None)
    return list(seen)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from simreal.config import build
    from simreal.errors import DataFileError, SimrealError
    from simreal.npz import open_npz
    from simreal.progress import Progress
    from simreal.rewards.label_account import CostAccount
    from simreal.rewards.label_cache import LabelCache, default_cache_dir
    from simreal.rewards.label_file import Labels, load_labels, save_labels
    from simreal.rewards.label_run import label_pairs
    from simreal.rewards.labellers import LabellerConfig, make_chat
    from simreal.rewards.labelling import frame_digest
    from simreal.yaml_io import atomic_write_text, read_text

    if args.budget is not None and args.budget < 0:
        raise SimrealError(f"--budget {args.budget}: expected a number of requests >= 0")
    config = build(LabellerConfig, labeller_section(args), prefix="labeller")
    with open_npz(args.frames, "frames file") as z:
        frames = z.array("frames", "(N, H, W, 3) frames or (N, T, H, W, 3) clips, uint8 RGB")
        task = args.task if args.task is not None else z.text("task", "the goal, or give --task")
        given = z.array("pairs", "(M, 2) integer rows of frames") if args.pairs is None and "pairs" in z else None
    if frames.dtype != np.uint8 or frames.ndim not in (4, 5) or frames.shape[-1] != 3:
        raise DataFileError(
            args.frames,
            f"field 'frames' has shape {frames.shape} dtype {frames.dtype}, expected "
            "(N, H, W, 3) frames or (N, T, H, W, 3) clips of uint8 RGB",
        )
    if not task.strip():
        raise SimrealError('--task: expected the goal, e.g. "the red cube on the green target"')
    if args.pairs is not None:
        pairs = sample_pairs(len(frames), args.pairs, args.seed)
    elif given is not None:
        if (
            given.ndim != 2
            or given.shape[1] != 2
            or given.dtype.kind not in "iu"
            or (given.size and (given.min() < 0 or given.max() >= len(frames)))
        ):
            raise DataFileError(
                args.frames,
                f"field 'pairs' has shape {given.shape} dtype {given.dtype}, expected "
                f"(M, 2) integers in [0, {len(frames)})",
            )
        pairs = [tuple(p) for p in given.tolist()]
    else:
        raise SimrealError(f"{args.frames} has no field 'pairs': give --pairs N to label N random pairs")

    out = Path(args.out)
    cost_path = out.with_name(out.name + ".cost.json")
    digest = frame_digest(frames)
    old = Labels(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8), config.model, task, digest)
    cost_runs: list[Any] = []
    if out.exists():
        if not args.resume:
            raise SimrealError(f"{out} exists; pass --resume to add to it, or choose another --out")
        old = load_labels(out)
        for field, mine in (("model", config.model), ("task", task), ("frames_sha256", digest)):
            if getattr(old, field) != mine:
                raise DataFileError(
                    str(out),
                    f"field '{field}' is {getattr(old, field)!r}, this run's is {mine!r}: "
                    "resume with the same frames, task and model, or write another --out",
                )
        if cost_path.exists():
            cost_runs = _cost_runs(cost_path, read_text(cost_path, "cost report"))
    labelled = old.pairs()
    todo = [p for p in pairs if p not in labelled]

    account = CostAccount(budget=args.budget)
    chat = make_chat(config, account)
    cache = LabelCache(args.cache if args.cache is not None else default_cache_dir())
    progress = Progress(len(todo), unit="pairs")
    try:
        result = label_pairs(
            chat,
            cache,
            account,
            frames,
            todo,
            task,
            config.analysis_tokens,
            config.label_tokens,
            on_pair=lambda k: progress.update(
                k, force=k == len(todo), requests=account.requests, cached=account.pairs_cached
            ),
        )
    finally:
        progress.close()
    new_pairs = np.asarray(todo, np.int64).reshape(-1, 2)[result.done]
    labels = Labels(
        index_a=np.concatenate([old.index_a, new_pairs[:, 0]]),
        index_b=np.concatenate([old.index_b, new_pairs[:, 1]]),
        label=np.concatenate([old.label, result.labels]),
        model=config.model,
        task=task,
        frames_sha256=digest,
    )
    save_labels(out, labels)
    report = {
        "labels": str(out),
        "pairs_requested": len(pairs),
        "pairs_labelled": len(labels.label),
        "stopped": result.stopped,
        **account.report(),
        "label_counts": {str(v): int((labels.label == v).sum()) for v in (0, 1, -1)},
    }
    atomic_write_text(cost_path, json.dumps({"runs": [*cost_runs, report]}, indent=2) + "\n")
    print(json.dumps(report))
    if account.unparsed:
        print(
            f"simreal label: {account.unparsed} of {len(result.labels)} answers stated no label and count as -1; "
            f"their texts are kept in the cache ({cache.directory}), empty replies aside",
            file=sys.stderr,
        )
    if result.stopped:
        print(
            f"simreal label: stopped early: {result.stopped}; {len(labels.label)} of {len(pairs)} pairs labelled; "
            "run again with --resume and a larger --budget to go on",
            file=sys.stderr,
        )
    return 0


def _cost_runs(path: Path, text: str) -> list[Any]:
    """The ``runs`` list of an earlier cost report; a DataFileError for a damaged one."""
    from simreal.errors import DataFileError

    try:
        report = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFileError(
            str(path),
            f"not JSON ({e.msg} at line {e.lineno}); delete it to start the cost report "
            "anew (the labels are in the npz)",
        ) from None
    runs = report.get("runs") if isinstance(report, dict) else None
    if not isinstance(runs, list):
        raise DataFileError(
            str(path),
            "expected an object with a 'runs' list (simreal label's cost report); delete "
            "it to start the cost report anew",
        )
    return runs
