"""Unitree G1 twin and driver at 500 Hz over DDS: state-to-command latency and message loss.

Two processes on one machine, Cyclone DDS on loopback, Unitree's own wire (``rt/lowstate``
``unitree_hg::msg::dds_::LowState_`` in, ``rt/lowcmd`` LowCmd_ with its CRC out):

- the *twin* (``--role twin`` subprocess, :mod:`simreal.hardware.unitree.twin`): MuJoCo at
  2 ms steps on a gantry, a LowState after every step, the newest LowCmd applied every step;
- the *controller* (this process): :class:`simreal.hardware.unitree.driver.UnitreeRobot` in a loop
  paced by the state stream: ``observation()`` (the next LowState), a PD hold pose with a
  0.1 rad, 0.5 Hz sway on every joint, ``send_action()`` (one LowCmd).

Measured on the one monotonic clock:

- *state-to-command* at the twin: LowState written -> the LowCmd answering it taken
  (matched through the LowCmd's ``reserve[0]`` = the state's ``tick``; two DDS hops, the
  decode, the controller, the CRC and the encode), after a 0.5 s warm-up;
- *in the controller*: LowState taken -> LowCmd written;
- loss: LowCmds sent by the controller and not taken by the twin; LowStates published
  between the controller's first and last one and not taken by it.

    python bench/bench_unitree_dds.py                 # 5 s, SCHED_FIFO if permitted
    python bench/bench_unitree_dds.py --seconds 10 --no-realtime
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

RATE_HZ = 500.0
WARMUP_S = 0.5
TARGET_P99_US = 2000.0


def run_twin(robot: str, domain: int, realtime: bool, out: str) -> None:
    """The twin until this process's stdin closes; its statistics go to ``out`` (JSON)."""
    from simreal.deploy.realtime import realtime_priority
    from simreal.hardware.unitree.twin import TwinConfig, UnitreeTwin

    twin = UnitreeTwin(TwinConfig(robot, domain_id=domain, state_rate_hz=RATE_HZ, gantry="always"))
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    with realtime_priority(realtime):
        stats = twin.run(stop=stop)
    with open(out, "w") as f:
        json.dump(dataclasses.asdict(stats), f)


def control(robot, seconds: float) -> dict[str, float | list[float]]:
    """The controller's loop on a connected :class:`UnitreeRobot` (module docstring)."""
    home = np.array([robot.spec.actuator(n).default for n in robot.names])
    s = robot.observation()
    first_tick, first_rx = int(robot.low_state["tick"]), robot.states_received
    compute, t0 = [], time.monotonic()
    while (now := time.monotonic()) - t0 < seconds:
        s = robot.observation()
        robot.send_action(home + 0.1 * np.sin(np.pi * (now - t0)))
        compute.append(time.monotonic() - float(s["t_s"]))
    published = int(robot.low_state["tick"]) - first_tick
    return {"compute_s": compute, "states_expected": published, "states_taken": robot.states_received - first_rx}


def measure(
    robot: str = "g1", seconds: float = 5.0, *, domain: int | None = None, realtime: bool = True
) -> dict[str, float]:
    """Run the twin in a subprocess and the controller here for ``seconds``; returns the table's numbers."""
    from simreal.deploy.realtime import frozen_heap, realtime_priority
    from simreal.hardware.unitree.driver import UnitreeConfig, UnitreeRobot

    domain = domain if domain is not None else 100 + os.getpid() % 50
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "twin.json")
        twin = subprocess.Popen(
            [sys.executable, __file__, "--role", "twin", "--robot", robot, "--domain", str(domain), "--out", out]
            + ([] if realtime else ["--no-realtime"]),
            stdin=subprocess.PIPE,
        )
        try:
            cfg = UnitreeConfig(robot, domain_id=domain, tick_probe=True, connect_timeout_s=60.0)
            with realtime_priority(realtime) as rt, UnitreeRobot(cfg) as bot, frozen_heap():
                loop = control(bot, seconds)
            time.sleep(0.3)  # the last commands in flight
        finally:
            twin.stdin.close()
            twin.wait(timeout=60)
        with open(out) as f:
            tw = json.load(f)
    lat = np.asarray(tw["latency_s"][int(WARMUP_S * RATE_HZ) :]) * 1e6
    comp = np.asarray(loop["compute_s"]) * 1e6
    return {
        "n": int(lat.size),
        "p50_us": float(np.percentile(lat, 50)),
        "p99_us": float(np.percentile(lat, 99)),
        "max_us": float(lat.max()),
        "ctrl_p50_us": float(np.percentile(comp, 50)),
        "ctrl_p99_us": float(np.percentile(comp, 99)),
        "ctrl_max_us": float(comp.max()),
        "commands_sent": bot.commands_sent,
        "commands_lost": bot.commands_sent - tw["commands_received"],
        "commands_bad_crc": tw["commands_bad_crc"],
        "states_expected": loop["states_expected"],
        "states_lost": loop["states_expected"] - loop["states_taken"],
        "twin_overruns": tw["overruns"],
        "realtime": bool(rt),
    }


def table(r: dict[str, float], robot: str, seconds: float, load: tuple[float, float, float]) -> str:
    verdict = "met" if r["p99_us"] < TARGET_P99_US else "MISSED"
    cpu = platform.processor() or platform.machine()
    return "\n".join(
        [
            f"Unitree twin benchmark (`python bench/bench_unitree_dds.py --seconds {seconds:g}`): {robot}, "
            f"{RATE_HZ:g} Hz, Cyclone DDS on loopback, twin and controller in two processes, SCHED_FIFO "
            f"{'on' if r['realtime'] else 'off'}; {os.cpu_count()} CPUs ({cpu}), load average "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start (the machine is shared).",
            "",
            "| metric [us] | n | p50 | p99 | max | target (p99) |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
            f"| state-to-command: LowState written -> LowCmd taken (twin) | {r['n']} | {r['p50_us']:.0f} | "
            f"{r['p99_us']:.0f} | {r['max_us']:.0f} | < {TARGET_P99_US:.0f} {verdict} |",
            f"| in the controller: LowState taken -> LowCmd written | | {r['ctrl_p50_us']:.0f} | "
            f"{r['ctrl_p99_us']:.0f} | {r['ctrl_max_us']:.0f} | |",
            "",
            "| messages | sent | lost | bad CRC |",
            "| --- | ---: | ---: | ---: |",
            f"| LowCmd (controller -> twin) | {r['commands_sent']} | {r['commands_lost']} | {r['commands_bad_crc']} |",
            f"| LowState (twin -> controller, during the loop) | {r['states_expected']} | {r['states_lost']} | |",
            f"| twin physics steps behind real time (overruns) | | {r['twin_overruns']} | |",
        ]
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=5.0, help="measurement time [s]")
    p.add_argument("--robot", default="g1", help="robot spec (g1, g1_23dof, h1)")
    p.add_argument("--no-realtime", dest="realtime", action="store_false", help="skip SCHED_FIFO")
    p.add_argument("--json", help="also write the numbers as JSON here")
    p.add_argument("--role", default="bench", choices=("bench", "twin"), help=argparse.SUPPRESS)
    p.add_argument("--domain", type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.role == "twin":
        run_twin(a.robot, a.domain, a.realtime, a.out)
        return 0
    load = os.getloadavg()
    r = measure(a.robot, a.seconds, realtime=a.realtime)
    print(table(r, a.robot, a.seconds, load))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
