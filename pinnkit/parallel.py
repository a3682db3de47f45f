"""The device mesh: always one, with a single ``"data"`` axis over which points are sharded.

One CPU is a mesh of 1; eight GPUs are a mesh of 8. Parameters are replicated
(``P()``), point arrays sharded (``P("data")``).
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .errors import ConfigError


def make_mesh(n_devices: int = -1) -> Mesh:
    """A 1-D mesh named ``"data"`` over the first ``n_devices`` devices (-1: all)."""
    devices = jax.devices()
    n = len(devices) if n_devices == -1 else n_devices
    if n < 1 or n > len(devices):
        raise ConfigError(
            f"mesh.data={n_devices}: {len(devices)} {devices[0].platform} device(s) are "
            f"visible; use -1 (all) or a number from 1 to {len(devices)}"
        )
    return Mesh(np.asarray(devices[:n]), ("data",))


def replicate(tree, mesh: Mesh):
    """Places every array of ``tree`` on all devices of ``mesh``."""
    return jax.device_put(tree, NamedSharding(mesh, P()))


def shard_rows(tree, mesh: Mesh):
    """Places arrays sharded along their first axis over ``mesh``'s ``"data"`` axis."""
    return jax.device_put(tree, NamedSharding(mesh, P("data")))


def is_main_process() -> bool:
    """True on the process that writes files (process 0)."""
    return jax.process_index() == 0
