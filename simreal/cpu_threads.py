"""How many threads PyTorch's CPU operations may use: the cores other processes leave free.

PyTorch's CPU build runs each operation on an OpenMP team of one thread per core, and idle team
threads wait by spinning. When another process already keeps cores busy (a JAX training, a
simulation, a second job on a shared machine) the team's threads queue for the same cores and
every small operation waits for the slowest of them. With the networks these verbs train (MLPs,
action-chunk and flow heads) one thread loses little on an idle machine and a full team loses
much on a busy one. ``simreal train-bc data/reach --policy flow`` on 2 cores (docs/benchmarks-log.md,
"Torch threads"): idle, 114 gradient steps/s on 2 threads against 95 on 1; with one core busy,
28 against 71-96; and ``train-bc --iql``'s critics beside a JAX training, 1 against 66.

So the torch verbs start with :func:`limit_torch_threads`. No library picks this for the
caller; ``OMP_NUM_THREADS``, when set, is the user's choice and is left alone.

The busy cores are counted now, not as the one-minute load average has them: that average lags
by a minute, so a training started right after another job ended (a benchmark's previous run)
took one thread on an idle machine and ran 30% slower for its whole hour (g1-velocity with
rsl_rl, 2 cores: 3.3k against 4.6k env-steps/s). :func:`busy_now` samples Linux's count of
runnable threads (``/proc/loadavg``'s fourth field) for a quarter of a second, less this one.
"""

from __future__ import annotations

import os
import time

LOADAVG = "/proc/loadavg"


def busy_now(samples: int = 5, interval_s: float = 0.05, path: str = LOADAVG) -> float | None:
    """Other threads runnable on the host right now, the mean over ``samples`` readings
    ``interval_s`` apart of ``/proc/loadavg``'s ``running/total`` less the reading thread itself;
    None where there is no such file (not Linux)."""
    counts = []
    for i in range(samples):
        try:
            with open(path) as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, IndexError, ValueError):
            return None
        counts.append(max(0, running - 1))
        if i + 1 < samples:
            time.sleep(interval_s)
    return sum(counts) / len(counts)


def free_cores(cpus: int | None = None, load: float | None = None, host_cpus: int | None = None) -> int:
    """The cores this process may run on less its share of the host's busy ones, at least 1:
    ``max(1, cpus - round(load * cpus / host_cpus))`` (a job pinned to some cores of a busy host
    counts the load on its share of them only).

    Args:
      cpus: cores available (default: this process's CPU affinity, else ``os.cpu_count()``).
      load: runnable processes on the host besides this one (default: :func:`busy_now`, else the
        one-minute ``os.getloadavg()[0]``, else 0).
      host_cpus: the host's cores (default: ``os.cpu_count()``, at least ``cpus``).
    """
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load is None:
        load = busy_now()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this platform
            load = 0.0
    host_cpus = max(host_cpus or os.cpu_count() or cpus, cpus)
    return max(1, cpus - round(load * cpus / host_cpus))


def limit_torch_threads() -> int:
    """Set torch's intra-op threads to :func:`free_cores` unless ``OMP_NUM_THREADS`` is set;
    returns the number torch now uses."""
    import torch

    if not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(free_cores())
    return torch.get_num_threads()
