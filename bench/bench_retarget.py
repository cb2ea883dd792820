"""Retargeting benchmark: frames/s and the quality metrics of both methods on the same clips.

    python bench/bench_retarget.py                        # g1 + h1, walking/running/dancing/crouching
    python bench/bench_retarget.py --robots g1 --clips walking --repeats 3 --json

Clips are synthesised (tests/fixtures/synth_motion.py: a LAFAN1-style rig, procedural gait with
planted footsteps), given mocap-like noise (``--noise`` degrees of smoothed joint jitter and a
few mm of root jitter), written as BVH (centimetres, Y-up, ZXY) and read back through the BVH
loader, so the benchmark covers the whole path a user's file takes. Timings are for the solve
alone (targets, contacts and the quality report are outside the timer), best of ``--repeats``;
wall time and process CPU time are both reported because the development machines are shared.
Prints a markdown table (for docs/benchmarks-log.md) and, with ``--json``, every number.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # small dense problems: BLAS threads only contend

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

# The synthesised clips live with the test fixtures (tests/fixtures/synth_motion.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fixtures import synth_motion as synth  # noqa: E402
from simreal.retarget.loaders import load_motion_source  # noqa: E402
from simreal.retarget.metrics import quality_report  # noqa: E402
from simreal.retarget.pipeline import METHODS  # noqa: E402
from simreal.retarget.robot import load_robot  # noqa: E402
from simreal.retarget.targets import build_targets  # noqa: E402


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def bench(robots, clips, methods, noise_deg, repeats, workdir: Path) -> list[dict]:
    rows = []
    sources = {}
    for name in clips:
        clip = synth.CLIPS[name]()
        if noise_deg > 0:
            clip = synth.with_noise(clip, noise_deg, seed=1)
        path = workdir / f"{name}.bvh"
        synth.write_bvh(path, clip, units="cm", up="y", order="ZXY")
        sources[name] = load_motion_source(path)
    for robot_name in robots:
        robot = load_robot(robot_name)
        for name in clips:
            targets = build_targets(sources[name], robot)
            for method in methods:
                best_wall, best_cpu, qpos, stats = float("inf"), float("inf"), None, None
                for _ in range(repeats):
                    w0, c0 = time.perf_counter(), time.process_time()
                    qpos, stats = METHODS[method](robot, targets)
                    best_wall = min(best_wall, time.perf_counter() - w0)
                    best_cpu = min(best_cpu, time.process_time() - c0)
                q = quality_report(robot, qpos, targets)
                T = targets.num_frames
                rows.append(
                    {
                        "robot": robot_name,
                        "clip": name,
                        "method": method,
                        "frames": T,
                        "fps_wall": T / best_wall,
                        "fps_cpu": T / best_cpu,
                        "quality": q,
                        "infeasible_frames": len(stats.get("infeasible_frames", [])),
                    }
                )
                print(f"  {robot_name} {name} {method}: {T / best_wall:.0f} frames/s", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    head = (
        "| robot | clip | method | frames | frames/s wall | frames/s CPU | penetration >1 cm: frames "
        "(ground/scene/self) | deepest [cm] | stance slide > 0.1 m/s | limit violations pos/vel | "
        "keypoint err mean/max [cm] | jitter [rad/s^2] | infeasible frames |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        q = r["quality"]
        p, s, lim, k = q["penetration"], q["foot_slide"], q["limits"], q["keypoint_error_m"]
        lines.append(
            f"| {r['robot']} | {r['clip']} | {r['method']} | {r['frames']} | {r['fps_wall']:.0f} | "
            f"{r['fps_cpu']:.0f} | "
            f"{p['any']['frames_over_1cm']} ({100 * p['any']['fraction']:.0f}%): {p['ground']['frames_over_1cm']}/"
            f"{p['scene']['frames_over_1cm']}/{p['self']['frames_over_1cm']} | {100 * p['any']['deepest_m']:.1f} | "
            f"{s['sliding']}/{s['stance_foot_frames']} ({100 * s['fraction']:.1f}%) | "
            f"{lim['position_violations']}/{lim['velocity_violations']} | {100 * k['mean']:.1f}/{100 * k['max']:.1f} | "
            f"{q['jitter_rad_s2']:.1f} | {r['infeasible_frames']} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robots", default="g1,h1")
    p.add_argument("--clips", default="walking,running,dancing,crouching")
    p.add_argument("--methods", default="ik,interaction")
    p.add_argument("--noise", type=float, default=0.5, help="joint jitter [deg] (0: clean clips)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    robots, clips, methods = a.robots.split(","), a.clips.split(","), a.methods.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        rows = bench(robots, clips, methods, a.noise, a.repeats, Path(tmp))
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"Command: python bench/bench_retarget.py {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    print(
        f"Machine: {_cpu_name()}, {os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f} (1/5/15 min); Python {platform.python_version()}; clips 30 Hz, noise {a.noise} deg; "
        f"best of {a.repeats}.\n"
    )
    print(table(rows))
    if a.json:
        print(json.dumps(rows, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
