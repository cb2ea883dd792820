"""Retargeting clips to files: one clip (repaired or cut into parts, each part's motion file and
video), a folder of them over worker processes, and what an earlier run finished (``--resume``).

``simreal retarget`` (simreal/cli/retarget.py) is this module's command line; its docstring
says what a user sees (part names, resume, stop, exit codes).
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable
from pathlib import Path

from simreal.errors import SimrealError

#: The motion sources a folder run picks up.
SUFFIXES = (".bvh", ".npz", ".csv")


#: (robot, map, scene, overrides) -> the loaded robot: one load per process for a folder's clips.
_ROBOTS: dict = {}


def robot_for(opts: dict):
    """The retarget robot ``opts`` names (``simreal retarget``'s options as plain data), loaded once."""
    from simreal.retarget.robot import load_robot
    from simreal.retarget.scene import load_scene

    key = (opts["robot"], opts["map"], opts["scene"], json.dumps(opts["overrides"], sort_keys=True))
    if key not in _ROBOTS:
        _ROBOTS[key] = load_robot(opts["robot"], opts["map"], load_scene(opts["scene"]), opts["overrides"])
    return _ROBOTS[key]


class NothingWritten(SimrealError):
    """A clip that read fine but whose retargeted frames all failed the checks (exit 1, not 2:
    the input was not bad, the result was)."""


def part_paths(path: str, n: int) -> list[str]:
    """Where the ``n`` parts of a clip go: ``path`` itself for one, else ``STEM.partK.SUFFIX``."""
    return [path] if n == 1 else [_part_path(path, k) for k in range(1, n + 1)]


def _written_before(path: str) -> list[Path]:
    """The files an earlier run wrote for ``path``: ``path`` itself and its ``STEM.partK.SUFFIX``."""
    p = Path(path)
    return [q for q in (p, *p.parent.glob(f"{glob.escape(p.stem)}.part*{p.suffix}")) if q.is_file()]


def _part_path(path: str, k: int) -> str:
    """``STEM.partK.SUFFIX`` beside ``path``: where part ``k`` (from 1) of a cut clip goes."""
    p = Path(path)
    return str(p.with_name(f"{p.stem}.part{k}{p.suffix}"))


def retarget_file(src: str, out: str, video: str | None, opts: dict, progress: bool = False) -> dict:
    """Retarget one file, repair or cut its defective frames and write its motion file(s) (and
    videos, with a progress line if ``progress``); returns a summary dict: the clip, the defects
    record and each part's output, source frames and quality report."""
    from simreal.motion_file import save_motion
    from simreal.retarget.loaders import load_motion_source
    from simreal.retarget.pipeline import retarget
    from simreal.retarget.repair import DefectConfig, fix_defects

    robot = robot_for(opts)
    human = load_motion_source(
        src,
        units=opts["units"],
        up=opts["up"],
        fps=opts["source_fps"],
        body_models=opts["body_models"],
        joint_map=opts["joint_map"],
    )
    result = retarget(human, robot, opts["method"], opts["joint_map"], opts["fps"])
    cfg = DefectConfig(mode=opts["defects"])
    parts, record = fix_defects(robot, result, cfg)
    if not parts:
        raise NothingWritten(
            f"{src}: every part between its defective frames is shorter than {cfg.min_part_s:g} "
            "s; nothing written (--defects keep writes the clip as it is, defects flagged)"
        )
    outs = part_paths(out, len(parts))
    videos = part_paths(video, len(parts)) if video else [None] * len(parts)
    earlier = {*_written_before(out), *(_written_before(video) if video else ())}  # an earlier run's files
    for k, (part, path, vid) in enumerate(zip(parts, outs, videos), 1):
        if len(parts) > 1:  # so --resume can tell a clip whose parts were all written
            part.result.motion.provenance["part"] = {"index": k, "of": len(parts)}
        if vid:  # before the motion file, which marks the part done for --resume
            from simreal.retarget.video import render_video

            render_video(vid, robot, part.result, progress=progress)
        save_motion(path, part.result.motion)  # atomic: replaces an earlier run's file of that name
    # what an earlier run wrote beside ours (another part count) goes only now, so a run stopped
    # before its last file (Ctrl-C in a minutes-long render, no GL) leaves the earlier outputs whole
    for stale in earlier - {Path(p) for p in (*outs, *videos) if p}:
        stale.unlink(missing_ok=True)
    return {
        "clip": src,
        "defects": record,
        "parts": [
            {"out": path, "video": vid, "frames": [p.first, p.last], "quality": p.result.motion.quality}
            for p, path, vid in zip(parts, outs, videos)
        ],
    }


def retarget_or_error(src: str, out: str, video: str | None, opts: dict) -> dict:
    """:func:`retarget_file`, or the clip's one-line error as its summary (a worker's result)."""
    try:
        return retarget_file(src, out, video, opts)
    except SimrealError as e:
        return {"clip": src, "out": out, "error": str(e)}


def clips_in(folder: Path) -> list[Path]:
    """Motion sources under ``folder``, skipping simreal motion files (earlier outputs)."""
    from simreal.errors import DataFileError
    from simreal.npz import open_npz

    out = []
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.suffix.lower() not in SUFFIXES:
            continue
        if p.suffix.lower() == ".npz":
            try:
                with open_npz(p) as z:
                    if "dof_pos" in z.files and "joint_names" in z.files:
                        continue
            except DataFileError:
                pass  # unreadable: its clip's loader reports it in the summary
        out.append(p)
    return out


def done_before(src: str, out: str, video: str | None, robot: str, method: str) -> dict | None:
    """The summary of a clip an earlier run wrote (``out``, or its parts ``OUT.part1.npz``, ...),
    rebuilt from the motion files' stored reports; None when it has none, not all of its parts
    (each part's ``provenance.part`` says how many there are), not the ``video`` of each part this
    command asks for, or was made for another robot or with another method: to be retargeted."""
    from simreal.motion_file import load_motion

    paths = [out] if Path(out).is_file() else []
    while not Path(out).is_file() and Path(part := _part_path(out, len(paths) + 1)).is_file():
        paths.append(part)
    if not paths:
        return None
    parts, motions = [], [load_motion(path) for path in paths]
    if paths[0] != out and motions[0].provenance.get("part", {}).get("of") != len(paths):
        return None  # stopped between two parts: retarget it again
    made = motions[0].provenance
    if made.get("robot", {}).get("robot") != robot or made.get("method") != method:
        return None  # an earlier run for another robot or method: this command's clip is not done
    videos = part_paths(video, len(paths)) if video else [None] * len(paths)
    if any(v is not None and not Path(v).is_file() for v in videos):
        return None  # its video was not finished: retarget it again
    for path, vid, m in zip(paths, videos, motions):
        parts.append({"out": path, "video": vid, "frames": m.provenance["source_frames"], "quality": m.quality})
    return {"clip": src, "resumed": True, "defects": parts[0]["quality"]["defects"], "parts": parts}


def run_parallel(
    work: list[tuple[str, str, str | None]], opts: dict, jobs: int, stop: Callable[[], bool]
) -> dict[int, dict]:
    """Clips over ``jobs`` spawned processes (single-threaded BLAS each), with a progress bar;
    ``stop()`` true ends the run: with one job after the clip under way, with more at once,
    the worker processes terminated. Returns the finished clips' summaries by index in ``work``."""
    import concurrent.futures as cf
    import multiprocessing as mp

    from simreal.progress import Progress

    bar = Progress(len(work), unit="clips")
    bar.update(0)
    results: dict[int, dict] = {}

    def done(i: int, summary: dict) -> None:
        results[i] = summary
        bar.update(len(results), force=len(results) == len(work))  # the last one always shows

    if jobs == 1:
        for i, w in enumerate(work):
            if stop():
                break
            done(i, retarget_or_error(*w, opts))
    else:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")  # inherited by the spawned workers
        ex = cf.ProcessPoolExecutor(
            max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=worker_start, initargs=(os.getpid(),)
        )
        futures = {ex.submit(retarget_or_error, *w, opts): i for i, w in enumerate(work)}
        pending = set(futures)
        try:
            while pending and not stop():
                finished, pending = cf.wait(pending, timeout=0.1, return_when=cf.FIRST_COMPLETED)
                for fut in finished:
                    done(futures[fut], fut.result())
        finally:
            if pending:  # stopped (or failed): end the clips under way, which an executor would wait for
                for child in mp.active_children():
                    child.terminate()
            ex.shutdown(wait=True, cancel_futures=True)
    bar.close()
    return results


def worker_start(parent: int) -> None:
    """A worker ignores SIGINT: a terminal's Ctrl-C reaches the whole process group, and the
    parent decides what stops (it ends the workers with SIGTERM). And it ends with its parent:
    a parent killed outright (``kill -9``) once left its workers writing clips, then blocked on a
    pipe for ever, racing a ``--resume``. Linux's parent-death signal does it (prctl
    ``PR_SET_PDEATHSIG``); a parent already gone by then ends the worker at once."""
    import ctypes
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)


#: prctl(2)'s option number for the parent-death signal (linux/prctl.h).
PR_SET_PDEATHSIG = 1
