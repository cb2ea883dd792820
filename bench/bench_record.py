"""Teleoperated recording on the twins: dropped frames, late ticks, gaps between episodes.

    python bench/bench_record.py                           # 10 episodes of 10 s, two 640x480 cameras at 30 fps
    python bench/bench_record.py --episodes 3 --episode-s 5 --size 320x240

Runs the README's command against the SO-100 twins (``simreal record so100 --twin --teleop
leader``: the follower and the leader are two Feetech buses on pseudo-terminals, each backed
by MuJoCo) with two test-pattern cameras, so the loop does everything a real session does
(bus transactions, two camera threads, background video encoding, parquet writes) plus the
two twins' physics, which a real session does not. The issue's target: at 30 fps with two
640x480 cameras on 2 cores, no dropped frames over 10 episodes and at most 1 s between one
episode's end and the next one's start.

Prints the load average before and after and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--episode-s", type=float, default=10.0)
    p.add_argument("--reset-s", type=float, default=0.0)
    p.add_argument("--size", default="640x480")
    p.add_argument("--fps", type=int, default=30)
    args = p.parse_args()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ds")
        cmd = [
            sys.executable,
            "-m",
            "simreal.cli",
            "record",
            "so100",
            "--twin",
            "--teleop",
            "leader",
            "--camera",
            "front=pattern",
            "--camera",
            "wrist=pattern",
            "--camera-size",
            args.size,
            "--task",
            "benchmark",
            "--episodes",
            str(args.episodes),
            "--episode-s",
            str(args.episode_s),
            "--reset-s",
            str(args.reset_s),
            "--fps",
            str(args.fps),
            "--out",
            out,
            "--json",
        ]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return r.returncode
        res = json.loads(r.stdout.strip().splitlines()[-1])
        size_mb = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs) / 1e6
    load1 = os.getloadavg()
    frames = args.episodes * round(args.episode_s * args.fps)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"load {load0[0]:.2f} before, {load1[0]:.2f} after"
    )
    print(f"command: {' '.join(cmd[2:])}\n")
    print(
        "| episodes | frames (expected) | cameras | late ticks | dropped frames | longest gap [s] | wall [s] | "
        "dataset [MB] |"
    )
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {res['episodes']} | {res['frames']} ({frames}) | 2 x {args.size} @ {args.fps} fps | {res['late_ticks']} "
        f"| {res['dropped_frames']} | {res['max_gap_s']:.2f} | {wall:.1f} | {size_mb:.1f} |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
