"""How many threads PyTorch's CPU operations may use: the cores other processes leave free.

PyTorch's CPU build runs each operation on an OpenMP team of one thread per core, and idle team
threads wait by spinning. When another process already keeps cores busy (a JAX training, a
simulation, a second job on a shared machine) the team's threads queue for the same cores and
every small operation waits for the slowest of them. With the networks these verbs train (MLPs,
action-chunk and flow heads) one thread loses little on an idle machine and a full team loses
much on a busy one. ``simreal train-bc data/reach --policy flow`` on 2 cores (BENCHMARKS.md,
"Torch threads"): idle, 114 gradient steps/s on 2 threads against 95 on 1; with one core busy,
28 against 71-96; and ``train-bc --iql``'s critics beside a JAX training, 1 against 66.

So the torch verbs start with :func:`limit_torch_threads`. No library picks this for the
caller; ``OMP_NUM_THREADS``, when set, is the user's choice and is left alone.
"""

from __future__ import annotations

import os


def free_cores(cpus: int | None = None, load: float | None = None, host_cpus: int | None = None) -> int:
    """The cores this process may run on less its share of the host's busy ones, at least 1:
    ``max(1, cpus - round(load * cpus / host_cpus))`` (a job pinned to some cores of a busy host
    counts the load on its share of them only).

    Args:
      cpus: cores available (default: this process's CPU affinity, else ``os.cpu_count()``).
      load: runnable processes on the host, averaged over the last minute (default:
        ``os.getloadavg()[0]``, 0 where the platform has none).
      host_cpus: the host's cores (default: ``os.cpu_count()``, at least ``cpus``).
    """
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
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
