"""Devices and processes: the ``data`` mesh, sharding helpers, sharded evaluation, and
multi-process jobs (`jax.distributed`, agreed stops, the stall watchdog)."""

from .mesh import evaluate_sharded as evaluate_sharded
from .mesh import is_main_process as is_main_process
from .mesh import make_mesh as make_mesh
from .mesh import replicate as replicate
from .mesh import shard_rows as shard_rows
