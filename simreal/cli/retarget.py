"""``simreal retarget``: human motion capture -> humanoid reference motion (the motion file).

    simreal retarget walk.bvh --robot g1 --out walk_g1.npz
    simreal retarget walk.bvh --robot h1 --out walk_h1.npz --method ik --json
    simreal retarget walk.bvh --robot g1 --out walk_g1.npz --strict    # exit 1 if the verdict is fail
    simreal retarget walk.bvh --robot g1 --out walk_g1.npz --video walk_g1.mp4
    simreal retarget dance.bvh --robot g1 --out dance_g1.npz --defects cut  # dance_g1.part1.npz, ...
    simreal retarget clips/ --robot g1 --out out/ --jobs 2            # a folder, in parallel
    simreal retarget clips/ --robot g1 --out out/ --jobs 2 --resume   # go on after an interruption
    simreal retarget amass/0005_Walking001_poses.npz --robot g1 --out a.npz --body-models ~/smpl
    simreal retarget take.csv --robot my_robot.xml --map my_robot.yaml --out take.npz
    simreal retarget walk.bvh --robot g1 --out w.npz --set interaction.window=6 --set contacts.height_m=0.04

Sources: BVH (any rig, units and up axis guessed unless ``--units``/``--up``), AMASS SMPL /
SMPL+H / SMPL-X npz (with ``--body-models``), CSV or npz of named keypoints. Robots: ``g1``,
``h1``, a robot spec YAML, or an MJCF / URDF with a keypoint map (``--map``). Methods:
``interaction`` (default; interaction mesh with hard contact, collision and limit constraints)
and ``ik`` (mink differential IK). Each clip's quality report is printed (``--json`` for all
of it) and stored in the motion file: the physical metrics (:mod:`metrics`) and the graded
checks with their verdict, ok / warn / fail (:mod:`checks`, PD playback in :mod:`feasibility`).
``--strict`` exits 1 when any clip fails a check. ``--set key=value`` overrides the map's solver
settings (``ik.*``, ``interaction.*``, ``contacts.*``).

Frames a check of the result fails on are never written as they are (:mod:`repair`):
``--defects repair`` (default) bridges short ranges and cuts the rest, ``cut`` cuts them,
``keep`` keeps them flagged. A clip cut in pieces is written as ``OUT.part1.npz``,
``OUT.part2.npz``, ... (videos the same), each with its source frames and its own report;
pieces shorter than 1 s are dropped, and a single piece left is written as ``OUT``.

A folder run stops on Ctrl-C or SIGTERM: with ``--jobs`` above 1 the clips under way are
stopped (their worker processes ended, nothing half-written: motion files are written
atomically), with one job after the clip under way; the finished clips' reports are printed
and ``--resume`` goes on from there (a clip counts as done when all its parts are there, made
for the same robot with the same method). A clip's output replaces what an earlier run wrote
for the same ``--out`` (its parts included); two clips of a folder that would write the same
file (``walk.bvh``, ``walk.csv``) are refused.

Exit codes: 0 done; 1 a clip could not be retargeted (folder runs finish the others) or, with
``--strict``, a clip's verdict is fail; 2 bad input (a file, a robot, a setting); 130 / 143
stopped by SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from simreal.config import positive_float_arg, positive_int_arg

HELP = "retarget human motion capture to a robot (BVH, AMASS, keypoints)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("motion", help="a clip (.bvh, .npz, .csv) or a folder of clips")
    p.add_argument("--robot", required=True, help="g1, h1, a robot spec .yaml, or an MJCF .xml / URDF .urdf")
    p.add_argument("--out", required=True, help="motion file (.npz); for a folder of clips, an output folder")
    p.add_argument("--method", choices=("interaction", "ik"), default="interaction")
    p.add_argument("--video", help="render the robot beside the source skeleton to this .mp4 (a folder for a folder)")
    p.add_argument("--json", action="store_true", help="print the full quality report(s) as JSON")
    p.add_argument("--strict", action="store_true", help="exit 1 when any clip's quality verdict is fail")
    p.add_argument(
        "--defects",
        choices=("repair", "cut", "keep"),
        default="repair",
        help="frames the quality checks fail on: bridge short ranges and cut the rest (repair), "
        "cut them (cut; a clip cut in pieces is written as OUT.part1.npz, ...), or keep them "
        "flagged (keep)",
    )
    p.add_argument("--map", help="keypoint map YAML (default configs/retarget/<robot>.yaml)")
    p.add_argument("--joint-map", help="YAML of canonical keypoint: source joint name, for unrecognised rigs")
    p.add_argument("--scene", help="scene YAML with boxes (terrain, obstacles)")
    p.add_argument("--units", default="auto", help="source length unit: auto, m, cm, mm, in, ft, or metres per unit")
    p.add_argument("--up", choices=("auto", "y", "z"), default="auto", help="source up axis")
    p.add_argument("--fps", type=positive_float_arg, help="resample the output to this frame rate [Hz]")
    p.add_argument(
        "--source-fps", type=positive_float_arg, help="frame rate of a keypoint file without a time column [Hz]"
    )
    p.add_argument("--body-models", help="folder of SMPL / SMPL+H / SMPL-X body models (AMASS)")
    p.add_argument(
        "--jobs", type=positive_int_arg, default=None, help="parallel processes for a folder (default: CPU count)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="for a folder: skip the clips whose motion file (or its parts) is already in --out, so an "
        "interrupted run goes on where it stopped",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a solver setting (interaction.window=6, ik.iterations=3, contacts.height_m=0.04)",
    )


def _options(args: argparse.Namespace) -> dict:
    """Everything a worker needs, as plain data (picklable for spawned processes)."""
    from simreal.config import parse_overrides
    from simreal.yaml_io import load_yaml

    units: str | float = args.units
    joint_map = {str(k): str(v) for k, v in load_yaml(args.joint_map).items()} if args.joint_map else None
    return {
        "robot": args.robot,
        "map": args.map,
        "scene": args.scene,
        "method": args.method,
        "overrides": parse_overrides(args.overrides),
        "units": units,
        "up": args.up,
        "fps": args.fps,
        "source_fps": args.source_fps,
        "body_models": args.body_models,
        "joint_map": joint_map,
        "defects": args.defects,
    }


def _print(summary: dict) -> None:
    from simreal.retarget.checks import verdict_lines
    from simreal.retarget.metrics import summary_line

    if "error" in summary:
        print(f"{summary['clip']}: error: {summary['error']}")
        return
    rec = summary["defects"]
    if rec["defective_frames"]:
        spans = {k: ", ".join(f"{a}-{b}" for a, b in rec[k]) for k in ("repaired", "cut", "dropped")}
        done = "; ".join(f"{k} {v}" for k, v in spans.items() if v) or "kept as they are (--defects keep)"
        print(f"{summary['clip']}: {rec['defective_frames']} defective frames ({', '.join(rec['why'])}); {done}")
    whole = not (rec["cut"] or rec["dropped"])
    for part in summary["parts"]:
        q = part["quality"]
        a, b = part["frames"]
        print(
            f"{summary['clip']}{'' if whole else f' frames {a}-{b}'} -> {part['out']}"
            f"{' (an earlier run, --resume)' if summary.get('resumed') else ''}: "
            f"{q['frames']} frames @ {q['fps']:g} Hz, "
            f"{q['method']} {q['solver']['frames_per_s']:.0f} frames/s"
            + (
                f", {len(q['solver']['infeasible_frames'])} infeasible frames (slack)"
                if q["solver"].get("infeasible_frames")
                else ""
            )
        )
        print(f"  {summary_line(q)}")
        for line in verdict_lines(q):
            print(f"  {line}")


def run(args: argparse.Namespace) -> int:
    from simreal.errors import ConfigError, DataFileError
    from simreal.retarget.batch import (
        SUFFIXES,
        NothingWritten,
        clips_in,
        done_before,
        retarget_file,
        robot_for,
        run_parallel,
    )
    from simreal.stop_signal import stop_on_signals

    src = Path(args.motion).expanduser()
    opts = _options(args)
    if not src.exists():
        raise DataFileError(str(src), "file or folder not found")
    if src.is_file():
        if Path(args.out).suffix.lower() != ".npz":  # the motion file is an npz whatever it is called
            raise ConfigError("out", f"expected the motion file to write, a path ending in .npz; got {args.out}")
        if args.resume:
            raise ConfigError("--resume", "goes on with a folder of clips; this is one clip")
        robot_for(opts)  # fail early on a bad robot or map
        try:
            summaries = [retarget_file(str(src), args.out, args.video, opts, progress=True)]
        except NothingWritten as e:
            print(f"simreal retarget: {e}", file=sys.stderr)
            return 1
        stopped = 0
    else:
        clips = clips_in(src)
        if not clips:
            raise DataFileError(str(src), f"no clips ({', '.join(SUFFIXES)}) in this folder")
        out_dir = Path(args.out)
        if out_dir.suffix == ".npz":
            raise ConfigError("out", "for a folder of clips, --out must be a folder, not a .npz file")
        robot_for(opts)
        work = []
        for c in clips:
            rel = c.relative_to(src).with_suffix("")
            video = str(Path(args.video) / f"{rel}.mp4") if args.video else None
            if video:
                Path(video).parent.mkdir(parents=True, exist_ok=True)
            work.append((str(c), str(out_dir / f"{rel}.npz"), video))
        by_out: dict[str, str] = {}
        for clip, out, _ in work:  # walk.bvh and walk.npz would both write walk.npz: one lost, silently
            if out in by_out:
                raise DataFileError(str(src), f"clips {by_out[out]} and {clip} would both write {out}; rename one")
            by_out[out] = clip
        robot = robot_for(opts).source["robot"]
        before = (
            {i: done_before(w[0], w[1], w[2], robot, opts["method"]) for i, w in enumerate(work)} if args.resume else {}
        )
        done = {i: d for i, d in before.items() if d is not None}
        todo = [i for i in range(len(work)) if i not in done]
        jobs = max(1, min(args.jobs or os.cpu_count() or 1, len(todo) or 1))
        doing = (
            "stopping the clips under way and keeping the finished ones"
            if jobs > 1
            else "stopping after the clip under way"
        )
        with stop_on_signals(doing) as stop:
            finished = run_parallel([work[i] for i in todo], opts, jobs, lambda: stop.requested)
        results = {**done, **{todo[k]: r for k, r in finished.items()}}
        summaries = [results[i] for i in sorted(results)]
        stopped = stop.exit_code
        if stopped:
            print(
                f"simreal retarget: stopped by {stop.name}: {len(results)} of {len(work)} clips done "
                f"({len(finished)} now); the same command with --resume goes on",
                file=sys.stderr,
            )
    if args.json:
        print(json.dumps(summaries[0] if src.is_file() else summaries, indent=2, default=str))
    else:
        for s in summaries:
            _print(s)
    if stopped:
        return stopped
    failed = args.strict and any(p["quality"]["verdict"] == "fail" for s in summaries for p in s.get("parts", []))
    return 1 if failed or any("error" in s for s in summaries) else 0
