"""Real-time rehearsals of one bundle over many seeds: does the policy survive its deployment?

Runs ``simreal deploy sim BUNDLE --latency-ms L --drop P --seed k --json`` for k = 0..n-1 (one
at a time, each the real two-process rehearsal over DDS) and tabulates pass/fail, the hover
error after settling, the sim-to-sim gate, the envelope, the fault response's landing, how far
the vehicle went beyond the geofence and how fast it met the ground::

    python bench/bench_rehearsal.py runs/quadrotor-hover/RUN/bundle --seeds 10
    python bench/bench_rehearsal.py BUNDLE --latency-ms 10 --drop 0.05 --duration 10 --label "default hover"
    python bench/bench_rehearsal.py BUNDLE --set trigger=state        # a deploy config override
    python bench/bench_rehearsal.py BAD_BUNDLE --set fault.response=safe --set envelope.geofence_max_m=[1,1,3]

Prints one markdown table row per seed and a summary line (passes out of seeds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def rehearse(bundle: str, seed: int, latency_ms: float, drop: float, duration: float, overrides: list[str]) -> dict:
    """One ``simreal deploy sim`` run's JSON report (plus its exit code and wall time)."""
    t0 = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "simreal.cli",
        "deploy",
        "sim",
        bundle,
        "--latency-ms",
        str(latency_ms),
        "--drop",
        str(drop),
        "--duration",
        str(duration),
        "--seed",
        str(seed),
        "--json",
        *[f"--set={o}" for o in overrides],
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        report = {"passed": False, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return {**report, "exit": proc.returncode, "wall_s": time.monotonic() - t0}


def row(seed: int, r: dict) -> str:
    robot = r.get("robot") or {}
    hover, gate, runner = robot.get("hover") or {}, robot.get("gate") or {}, r.get("runner") or {}
    err = hover.get("max_error_after_settle_m")
    gate_v = gate.get("value")
    trip = runner.get("envelope_trip_s")
    fence, safety = robot.get("geofence") or {}, runner.get("safety") or {}
    outside, ground = fence.get("max_outside_m"), fence.get("ground_speed_m_s")
    return (
        f"| {seed} | {'pass' if r.get('passed') else 'FAIL'} | {'-' if err is None else f'{err:.3f}'} | "
        f"{'-' if gate_v is None else f'{gate_v:.3f}'} | "
        f"{'-' if trip is None else f'{trip:.2f} s: ' + runner.get('envelope_trip', '')} | "
        f"{safety.get('recovery_end') or '-'} | {'-' if outside is None else f'{outside:.2f}'} | "
        f"{'-' if ground is None else f'{ground:.2f}'} | {r.get('error', '')} |"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--latency-ms", type=float, default=10.0)
    p.add_argument("--drop", type=float, default=0.05)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--label", default="")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="deploy config override passed to every run (e.g. trigger=state)",
    )
    a = p.parse_args()
    load = os.getloadavg()
    print(
        f"`{' '.join(['python', 'bench/bench_rehearsal.py', *sys.argv[1:]])}`; {os.cpu_count()} CPUs, load "
        f"{load[0]:.2f} at the start; {time.strftime('%Y-%m-%d')}.\n"
    )
    print(
        "| seed | result | hover max error after settle [m] | gate [m] | envelope trip | landing | "
        "beyond fence [m] | ground speed [m/s] | error |"
    )
    print("| ---: | :---: | ---: | ---: | --- | --- | ---: | ---: | --- |")
    passed = 0
    for seed in range(a.seeds):
        r = rehearse(a.bundle, seed, a.latency_ms, a.drop, a.duration, a.overrides)
        passed += bool(r.get("passed"))
        print(row(seed, r), flush=True)
    print(
        f"\n{a.label + ': ' if a.label else ''}{passed} of {a.seeds} rehearsals passed at {a.latency_ms:g} ms "
        f"latency, {a.drop:g} drops, {a.duration:g} s."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
