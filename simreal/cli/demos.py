"""``simreal demos``: record demonstrations of a privileged teacher as a LeRobot v3 dataset.

    simreal demos arm-reach --teacher scripted --episodes 50 --out data/reach50
    simreal demos arm-push env.action_scale=1.5 --teacher scripted --episodes 50 --only-success --out data/push
    simreal demos arm-push-pixels env.action_scale=1.5 --teacher scripted --episodes 20 --camera front \\
        --image-size 96x96 --out data/push_px
    simreal demos arm-reach --teacher runs/arm-reach/20261121-120000 --episodes 200 --out data/reach_ppo
    simreal demos arm-push env.action_scale=1.5 --teacher scripted --drive runs/arm-push/bc1 --episodes 50 \
        --append --out data/push      # DAgger: the BC run acts, the teacher labels, the dataset grows

The teacher (``simreal/policies/demos/teachers.py``) is ``scripted`` (the task's controller, from the full
simulator state), ``random`` (held random actions: exploration, the broad coverage a reward
model's frames need, not a demonstration to imitate) or a trained run's directory (its
deterministic policy). It drives the task's
env through the env's own reset and step, in batches of ``--num-envs``; each env's first episode
is one dataset episode: ``observation.state`` (the policy's observation), ``action`` (the
normalised action the env applied), ``next.reward``, ``next.done``, ``next.success``, camera
videos ``observation.images.<camera>`` for each ``--camera``, and the episode's instruction as its
task string (``simreal/policies/demos/record.py``, ``simreal/policies/vla/instructions.py``).
``key=value`` overrides set the task's config (or the run's) as for ``simreal train``;
``meta/simreal.yaml`` keeps the resolved config and the teacher, so ``simreal train-bc`` rebuilds the same env.

``--drive RUN`` lets a trained run's policy act while the teacher only labels (DAgger: the
states a cloned policy visits, labelled with what the teacher would do there; the success
printed is the driver's), and ``--append`` adds the episodes to the dataset already in ``--out``
(recorded in the same task; its ``meta/simreal.yaml`` keeps the first recording's config and lists
each append's teacher, driver, seed and episodes). Aggregate and retrain with ``simreal train-bc``
until the clone stops failing. An append checks the dataset's files first (a missing or cut data or
video file is refused, naming it) and, without ``--seed``, takes one past the dataset's largest seed.

Progress (frames/s, episodes, success, ETA) goes to stderr; the last line is the success rate
of whoever acted (the teacher, or the driver) over the episodes run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simreal.config import positive_int_arg, seed_arg

HELP = "record demonstrations of a teacher as a LeRobot dataset"


def _image_size(text: str) -> tuple[int, int]:
    """``HxW`` -> (H, W) [px]."""
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HEIGHTxWIDTH in pixels (e.g. 96x96), got {text!r}") from None
    if h < 1 or w < 1:
        raise argparse.ArgumentTypeError(f"expected positive sizes, got {text!r}")
    return h, w


def _holds_episodes(root: Path) -> bool:
    """Whether the dataset at ``root`` reads back with at least one whole episode."""
    from simreal.dataset.reader import Dataset

    try:
        ds = Dataset(root)
        ds.check_files()
        return ds.num_episodes > 0
    except Exception:  # unreadable or cut short: nothing to keep
        return False


def _check_frames_fit(cameras: dict[str, tuple[int, int]], frames: int) -> None:
    """ConfigError naming ``--image-size`` when one batch's camera frames (``frames`` per camera,
    RGB bytes, held until the batch is written) would take more than half of this machine's
    memory: a 5000x5000 camera once grew to 24 GB and was killed with no word."""
    import os

    from simreal.errors import ConfigError

    need = frames * sum(h * w * 3 for h, w in cameras.values())
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > have // 2:
        raise ConfigError(
            "--image-size",
            f"a batch of {frames} frames per camera at "
            f"{', '.join(f'{h}x{w}' for h, w in cameras.values())} takes "
            f"{need / 2**30:.1f} GiB, more than half of this machine's "
            f"{have / 2**30:.0f} GiB; use smaller images or fewer --num-envs",
        )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="registered task name (see `simreal list`)")
    p.add_argument("overrides", nargs="*", default=[], help="config overrides key=value (e.g. env.action_scale=1.5)")
    p.add_argument(
        "--teacher",
        required=True,
        help="'scripted' (the task's controller), 'random' (held random actions: "
        "exploration for a reward model's data) or a trained run's directory",
    )
    p.add_argument("--episodes", type=positive_int_arg, required=True, help="episodes to write")
    p.add_argument("--out", required=True, help="dataset folder (new or empty)")
    p.add_argument("--camera", action="append", default=[], help="record this model camera (repeatable)")
    p.add_argument(
        "--image-size",
        type=_image_size,
        default=None,
        metavar="HxW",
        help="image size of every --camera in pixels (default: each camera's own)",
    )
    p.add_argument(
        "--seed",
        type=seed_arg,
        default=None,
        help="seeds the episodes (default 0; with --append, one past the dataset's largest seed, so "
        "the new episodes are not the old ones again)",
    )
    p.add_argument(
        "--only-success", action="store_true", help="keep only successful episodes (running up to ten times --episodes)"
    )
    p.add_argument("--num-envs", type=positive_int_arg, default=16, help="episodes run side by side")
    p.add_argument(
        "--drive",
        default=None,
        metavar="RUN",
        help="a trained run's directory whose policy acts while the teacher labels (DAgger)",
    )
    p.add_argument("--append", action="store_true", help="add the episodes to the dataset in --out (same task)")


def run(args: argparse.Namespace) -> int:
    import shutil
    import sys
    import time

    from simreal.dataset.writer import DatasetWriter
    from simreal.errors import ConfigError, DataFileError
    from simreal.policies.demos.record import (
        Tally,
        camera_sizes,
        features,
        note_append,
        read_source,
        record,
        reports_success,
        used_seeds,
        write_source,
    )
    from simreal.policies.demos.teachers import load_teacher
    from simreal.progress import Progress
    from simreal.stop_signal import stop_on_signals

    out = Path(args.out)
    if args.append:
        source = read_source(out) if (out / "meta" / "info.json").is_file() else None
        if source is None:
            raise DataFileError(str(out), "holds no dataset recorded by simreal demos to --append to")
        if source["config"]["task"] != args.task:
            raise ConfigError("--append", f"{out} was recorded in {source['config']['task']}, not {args.task}")
        appending = DatasetWriter.resume(out)  # checks its files now, before the env is built
        seed = max(used_seeds(source)) + 1 if args.seed is None else args.seed
        if seed in used_seeds(source) and args.drive is None:
            print(
                f"simreal demos: warning: {out} was already recorded with --seed {seed}; the same teacher "
                "repeats those episodes",
                file=sys.stderr,
            )
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):  # before the env is built
        raise DataFileError(str(out), "exists and is not an empty folder; choose a new --out (or --append)")
    else:
        seed = 0 if args.seed is None else args.seed
    if args.image_size is not None and not args.camera:
        raise ConfigError("--image-size", "sets the size of --camera images; no --camera given")
    cfg, env, teacher = load_teacher(args.teacher, args.task, args.overrides)
    driver = None
    if args.drive is not None:
        _, drive_env, driver = load_teacher(args.drive, args.task, args.overrides, flag="--drive")
        if drive_env.observation_size != env.observation_size or drive_env.action_size != env.action_size:
            raise ConfigError(
                "--drive",
                f"{args.drive} observes {drive_env.observation_size} and acts with "
                f"{drive_env.action_size}; this env {env.observation_size} and {env.action_size}",
            )
    cameras = camera_sizes(env, args.camera, cfg.task, args.image_size)
    _check_frames_fit(cameras, min(args.num_envs, args.episodes) * env.episode_steps)
    fps = round(env.robot.control_rate_hz)
    if abs(fps - env.robot.control_rate_hz) > 1e-9:
        raise ConfigError(
            "control_rate_hz",
            f"{env.robot.control_rate_hz} Hz is not a whole number of frames per "
            "second, which a LeRobot dataset's fps must be",
        )
    t0 = time.time()
    tally = Tally()
    batch = min(args.num_envs, args.episodes)  # record() runs whole batches: count their frames
    progress = Progress(-(-args.episodes // batch) * batch * env.episode_steps)
    frames = 0
    success = reports_success(env)

    def on_step(n: int) -> None:
        nonlocal frames
        frames += n
        if success:
            progress.update(frames, episodes=tally.ran, success=tally.rate)
        else:
            progress.update(frames, episodes=tally.ran)

    writer = (
        appending
        if args.append
        else DatasetWriter.create(out, fps=fps, features=features(env, cameras), robot_type=env.robot.name)
    )
    before = writer.num_episodes
    # Ctrl-C / SIGTERM end the recording between two steps: a KeyboardInterrupt raised inside the
    # physics callback was a traceback, and one inside the writer could break the dataset
    try:
        with stop_on_signals("stopping after this step and keeping the finished episodes") as stop, writer:
            if not args.append:
                write_source(out, cfg, args.teacher, seed, cameras)  # now: an interrupted recording is still usable
            for ep in record(
                env,
                teacher,
                cfg.task,
                args.episodes,
                seed=seed,
                num_envs=args.num_envs,
                cameras=cameras,
                only_success=args.only_success,
                tally=tally,
                on_step=on_step,
                driver=driver,
                stop=lambda: stop.requested,
            ):
                for t in range(ep.length):
                    writer.add_frame({k: v[t] for k, v in ep.frames.items()}, task=ep.instruction)
                writer.save_episode()
    except Exception:  # a full disk: a new folder holding metadata only would block a rerun, and --append
        if not args.append and not _holds_episodes(out):
            shutil.rmtree(out, ignore_errors=True)
        raise
    progress.close()
    if args.append:
        assert source is not None  # --append: read above (a DataFileError when there is none)
        note_append(out, source, args.teacher, args.drive, seed, writer.num_episodes - before)
    if stop.requested:
        if not args.append and writer.num_episodes == 0:  # a new folder holding metadata only would block a rerun
            shutil.rmtree(out, ignore_errors=True)
            print(
                f"simreal demos: stopped by {stop.name} before the first episode finished; {out} removed",
                file=sys.stderr,
            )
        else:
            print(
                f"simreal demos: stopped by {stop.name}: {out} keeps its {writer.num_episodes} finished episodes "
                f"({writer.num_episodes - before} recorded now); --append records more",
                file=sys.stderr,
            )
        return stop.exit_code
    if not args.append:
        write_source(out, cfg, args.teacher, seed, cameras, tally)
    print(f"dataset: {out} ({writer.num_episodes} episodes, {writer.num_frames} frames, {time.time() - t0:.1f} s)")
    if success:
        who = "teacher" if driver is None else "driver"
        print(f"{who} success: {tally.succeeded}/{tally.ran} episodes ({100.0 * tally.rate:.1f}%)")
    kept = writer.num_episodes - before
    if kept < args.episodes:
        print(
            f"simreal demos: only {kept} of {args.episodes} episodes succeeded within {tally.ran} attempts",
            file=sys.stderr,
        )
        return 1
    return 0
