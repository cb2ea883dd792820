"""Data-parallel training: the env batch split over the devices of a one-axis mesh.

    mesh = data_mesh(cfg.devices)                  # 1: one device; 0: every device
    shardings = split_envs(mesh, jax.eval_shape(init), batched=("env_state",))
    step = jax.jit(iterate, in_shardings=(shardings,), out_shardings=(shardings, replicated(mesh)))

The training state's env states (leading axis: the env) are split along the mesh's
``data`` axis, everything else (networks, optimiser moments, normaliser, keys, replay
buffer) is replicated. The jitted iteration is the same program as on one device: XLA's
SPMD partitioner (GSPMD) runs each device's envs where they live and inserts the
all-reduces that the batch means and gradients need. So a run on N devices computes what
one device computes on the same global batch, up to the order of floating-point sums.

Several hosts (one process per host, or per GPU): :func:`initialize_distributed` calls
``jax.distributed.initialize()`` when a launcher says so (SLURM with more than one task, or
``JAX_COORDINATOR_ADDRESS`` set), after which ``jax.devices()`` lists every host's devices
and the same mesh spans them (docs/training.md has the launch commands).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from simreal.errors import ConfigError

DATA = "data"

#: XLA options of a training state's initialisation (networks, optimiser, the batched env
#: reset): one program run once, so compiled without LLVM's optimisations. Run op by op, each
#: initialiser compiled alone; jitted at the default level it compiled in about 4.3 s, at this
#: one in about 2.1 s (hover, 512 envs, 2 cores).
INIT_COMPILE = {"xla_backend_optimization_level": 0}


def initialize_distributed() -> bool:
    """Join the other processes of a multi-host job; True when joined. Under SLURM with more
    than one task JAX reads the cluster from SLURM's variables; elsewhere every process sets
    ``JAX_COORDINATOR_ADDRESS`` (host:port of process 0), ``JAX_NUM_PROCESSES`` and
    ``JAX_PROCESS_ID``."""
    if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        jax.distributed.initialize()
        return True
    address = os.environ.get("JAX_COORDINATOR_ADDRESS")
    if not address:
        return False
    try:
        n, rank = int(os.environ["JAX_NUM_PROCESSES"]), int(os.environ["JAX_PROCESS_ID"])
    except (KeyError, ValueError):
        raise ConfigError(
            "JAX_NUM_PROCESSES",
            "with JAX_COORDINATOR_ADDRESS set, JAX_NUM_PROCESSES and JAX_PROCESS_ID must be integers",
        ) from None
    jax.distributed.initialize(coordinator_address=address, num_processes=n, process_id=rank)
    return True


def data_mesh(devices: int, num_envs: int) -> Mesh:
    """A mesh over the first ``devices`` devices (0: all), axis ``data``; ``num_envs`` must split
    evenly over them."""
    found = jax.devices()
    n = len(found) if devices == 0 else devices
    if n > len(found):
        raise ConfigError("train.devices", f"{n} requested, {len(found)} {found[0].platform} device(s) present")
    if num_envs % n:
        raise ConfigError("train.num_envs", f"{num_envs} envs do not split evenly over {n} devices")
    return Mesh(np.array(found[:n]), (DATA,))


def replicated(mesh: Mesh) -> NamedSharding:
    """Every device holds the whole array."""
    return NamedSharding(mesh, PartitionSpec())


def split_envs(mesh: Mesh, state: Any, batched: Iterable[str]) -> Any:
    """Shardings for a ``flax.struct`` state (arrays or shape structs): the fields named in
    ``batched`` split along their leading (env) axis, every other leaf replicated."""
    split, whole = NamedSharding(mesh, PartitionSpec(DATA)), replicated(mesh)
    out = jax.tree.map(lambda _: whole, state)
    return out.replace(
        **{name: jax.tree.map(lambda x: split if x.ndim else whole, getattr(state, name)) for name in batched}
    )
