"""State-in to command-out latency and timer jitter of the DDS policy runner at 500 Hz.

Two processes on one machine, Cyclone DDS on loopback, ROS 2 wire types:

- the *robot* (this process): publishes ``nav_msgs/Odometry`` at 500 Hz from an
  absolute-deadline timer and takes every ``px4_msgs/ActuatorMotors`` command;
- the *runner* (``--role runner`` subprocess): ``simreal.deploy`` PolicyRunner +
  DdsPolicyNode with a random-weight MLP bundle (2 x 256 tanh, 22 -> 4) at 500 Hz.

Measured (all on CLOCK_MONOTONIC / CLOCK_REALTIME of the one machine):

- ``trigger: state`` (a command per state message):
  *state in -> command out* inside the runner: DDS take of the state -> the command's
  write returned (deserialize, observation, ONNX inference, safety, serialize, write);
  *round trip* at the robot: state stamped and written -> command taken (two DDS hops +
  the runner), matched through ``ActuatorMotors.timestamp_sample`` = the state's stamp.
- ``trigger: timer`` (fixed-rate ticks with the newest state):
  *timer jitter*: tick start - scheduled deadline; *tick compute*: tick start -> write
  returned.

    python bench/bench_latency.py                      # 15 s per run, SCHED_FIFO if permitted
    python bench/bench_latency.py --seconds 30 --no-realtime
    python bench/bench_latency.py --write docs/benchmarks-log.md   # replace this benchmark's section in the log

Prints a markdown table (and with ``--write`` puts it between this benchmark's markers in
the given file, leaving the rest of the file alone).
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
from pathlib import Path

# Bundles made without training live with the test fixtures (tests/fixtures/bundles.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np

RATE_HZ = 500.0
MARK_BEGIN, MARK_END = "<!-- bench_latency:begin -->", "<!-- bench_latency:end -->"


def run_runner(bundle: str, domain: int, trigger: str, seconds: float, realtime: bool, out: str) -> None:
    import gc

    from simreal.bundle import load_bundle
    from simreal.deploy.realtime import realtime_priority
    from simreal.deploy.runner import PolicyRunner
    from simreal.deploy.transport_dds import DdsPolicyNode, DdsTransport

    runner = PolicyRunner(
        load_bundle(bundle),
        overrides={"trigger": trigger, "start": {"ramp_s": 0.0}, "watchdog": {"timeout_s": 0.1, "latch": False}},
    )
    with realtime_priority(realtime) as rt, DdsTransport(domain) as tr:
        node = DdsPolicyNode(runner, tr, keep_timing=True)
        gc.collect()
        gc.freeze()  # keep the setup's objects out of the collector's way during the run
        node.spin(seconds)
    np.savez(out, **node.timing.arrays(), realtime=rt, overruns=node.timer_overruns, ticks=node.ticks)


def run_robot(domain: int, seconds: float, realtime: bool) -> dict[str, np.ndarray]:
    from fixtures.bundles import FakeRobot
    from simreal.deploy.realtime import realtime_priority
    from simreal.deploy.transport_dds import PeriodicTimer

    with realtime_priority(realtime):
        robot = FakeRobot(domain)
        if not robot.wait_for_runner(30.0):
            raise RuntimeError("runner did not subscribe within 30 s")
        sent = []
        timer = PeriodicTimer(1.0 / RATE_HZ)
        end = time.monotonic() + seconds
        k = 0
        while time.monotonic() < end:
            timer.wait(robot.transport)
            sent.append(robot.publish_state(pos_w=(0.01 * np.sin(k / 50.0), 0.0, 1.0)))
            k += 1
        robot.spin(0.3)
        cmds = robot.commands
        robot.close()
    return {
        "sent_ns": np.asarray(sent, np.int64),
        "rx_ns": np.asarray([t_ns for _, t_ns, _ in cmds], np.int64),
        "sample_us": np.asarray([m.timestamp_sample for _, _, m in cmds], np.int64),
    }


def one_run(bundle: str, trigger: str, seconds: float, realtime: bool) -> dict:
    from fixtures.bundles import random_domain_id

    domain = random_domain_id()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "runner.npz")
        proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--role",
                "runner",
                "--bundle",
                bundle,
                "--domain",
                str(domain),
                "--trigger",
                trigger,
                "--seconds",
                str(seconds + 4.0),
                "--out",
                out,
            ]
            + ([] if realtime else ["--no-realtime"])
        )
        try:
            robot = run_robot(domain, seconds, realtime)
        finally:
            proc.wait(timeout=seconds + 60)
        r = dict(np.load(out))
    return {"runner": r, "robot": robot}


def _stats_us(x: np.ndarray) -> dict[str, float]:
    x = np.asarray(x, np.float64) * 1e6
    x = x[np.isfinite(x)]
    return {
        "n": int(x.size),
        "p50": float(np.percentile(x, 50)),
        "p99": float(np.percentile(x, 99)),
        "max": float(x.max()),
    }


def analyse(res_state: dict, res_timer: dict, warmup_s: float = 1.0) -> dict[str, dict[str, float]]:
    rs, rb = res_state["runner"], res_state["robot"]
    ok = rs["by_state"] & (rs["start"] > rs["start"][0] + warmup_s)
    out = {"state_to_command_runner": _stats_us((rs["written"] - rs["state_rx"])[ok])}
    sent = rb["sent_ns"] // 1000
    first = {}
    for s_us, rx in zip(rb["sample_us"], rb["rx_ns"]):
        first.setdefault(int(s_us), int(rx))
    idx = np.searchsorted(sent, list(first))
    matched = [(first[s], s) for s, i in zip(first, idx) if i < sent.size and sent[i] == s]
    rtt = np.array([rx / 1e3 - s for rx, s in matched]) / 1e6  # [s]
    rtt = rtt[len(rtt) // 15 :]  # drop the first ~1 s
    out["round_trip_robot"] = _stats_us(rtt)
    out["round_trip_robot"]["answered"] = len(matched) / max(1, sent.size)
    rt = res_timer["runner"]
    ok = rt["start"] > rt["start"][0] + warmup_s
    out["timer_jitter"] = _stats_us((rt["start"] - rt["deadline"])[ok])
    out["timer_tick_compute"] = _stats_us((rt["written"] - rt["start"])[ok])
    out["timer_overruns"] = {"n": int(rt["overruns"])}
    out["realtime"] = {"runner": bool(rs["realtime"]) and bool(rt["realtime"])}
    return out


def table(results: dict[str, dict], seconds: float, load: tuple[float, float, float]) -> str:
    rows = [
        ("state in -> command out (runner; trigger: state)", "state_to_command_runner", "< 1000"),
        ("round trip: state written -> command taken (robot; 2 DDS hops)", "round_trip_robot", ""),
        ("timer jitter at 500 Hz (trigger: timer)", "timer_jitter", "< 500"),
        ("tick compute: tick start -> command written (trigger: timer)", "timer_tick_compute", ""),
    ]
    lines = []
    for label, res in results.items():
        lines += [
            f"**{label}**",
            "",
            "| metric [us] | n | p50 | p99 | max | target (p99) |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for name, key, target in rows:
            s = res[key]
            verdict = ""
            if target:
                verdict = f"{target} {'met' if s['p99'] < float(target.split()[-1]) else 'MISSED'}"
            lines.append(f"| {name} | {s['n']} | {s['p50']:.0f} | {s['p99']:.0f} | {s['max']:.0f} | {verdict} |")
        lines.append(f"| timer overruns (missed deadlines) | | | | {res['timer_overruns']['n']} | |")
        lines.append(
            f"| commands answered / states sent (trigger: state) | | | | {res['round_trip_robot']['answered']:.4f} | |"
        )
        lines.append("")
    cpu = platform.processor() or platform.machine()
    head = (
        f"Latency benchmark (`python bench/bench_latency.py --seconds {seconds:g}`): MLP 22-256-256-4 tanh, "
        f"ONNX Runtime 1 thread, Cyclone DDS on loopback, ROS 2 types (Odometry in, ActuatorMotors out), "
        f"{RATE_HZ:g} Hz; {os.cpu_count()} CPUs ({cpu}), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
        f"at the start (the machine is shared)."
    )
    return "\n".join([head, ""] + lines)


def write_section(path: Path, text: str) -> None:
    section = f"{MARK_BEGIN}\n## Deploy: state-to-command latency over DDS\n\n{text}\n{MARK_END}\n"
    old = path.read_text() if path.is_file() else "# Benchmarks\n\n"
    if MARK_BEGIN in old and MARK_END in old:
        pre, rest = old.split(MARK_BEGIN, 1)
        post = rest.split(MARK_END, 1)[1].lstrip("\n")
        new = pre + section + post
    else:
        new = old.rstrip("\n") + "\n\n" + section
    path.write_text(new)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=15.0, help="measurement time per run [s]")
    p.add_argument("--no-realtime", dest="realtime", action="store_false", help="skip SCHED_FIFO")
    p.add_argument("--both", action="store_true", help="run with and without SCHED_FIFO")
    p.add_argument("--write", help="put the table into this markdown file (between this benchmark's markers)")
    p.add_argument("--json", help="also write raw statistics as JSON here")
    p.add_argument("--role", default="bench", choices=("bench", "runner"), help=argparse.SUPPRESS)
    p.add_argument("--bundle", help=argparse.SUPPRESS)
    p.add_argument("--domain", type=int, help=argparse.SUPPRESS)
    p.add_argument("--trigger", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.role == "runner":
        run_runner(a.bundle, a.domain, a.trigger, a.seconds, a.realtime, a.out)
        return 0

    from fixtures.bundles import make_mlp_bundle

    load = os.getloadavg()
    results = {}
    modes = [True, False] if a.both else [a.realtime]
    with tempfile.TemporaryDirectory() as tmp:
        bundle = str(make_mlp_bundle(Path(tmp) / "mlp", hidden=(256, 256), control_rate_hz=RATE_HZ))
        for rt in modes:
            res_state = one_run(bundle, "state", a.seconds, rt)
            res_timer = one_run(bundle, "timer", a.seconds, rt)
            stats = analyse(res_state, res_timer)
            label = (
                "SCHED_FIFO (deploy's default where permitted)"
                if stats["realtime"]["runner"]
                else "default scheduler (SCHED_OTHER)"
            )
            results[label] = stats
    text = table(results, a.seconds, load)
    print(text)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    if a.write:
        write_section(Path(a.write), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
