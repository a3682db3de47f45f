"""The memory plan: a config that cannot fit is refused before anything is allocated.

Two stages, both before training (`check`):

1. **Lower bounds, nothing allocated.** The problem is built (cheap: references are
   lazy), the network only as shapes (`equinox.filter_eval_shape`), and from the config
   alone: parameters $P$ (replicated), the optimiser state of the most demanding phase
   (Adam $2P$, L-BFGS $2mP$, natural gradient's Gramian $P^2$ plus its $N\\times P$
   Jacobian), the point arrays, the forward activations the backward pass keeps (at
   least per-device micro-batch × width × depth values per term), the evaluation chunk,
   and on the host the evaluation grid. Each part is a *lower* bound of what XLA will
   need, so exceeding the available memory means the run cannot fit.
2. **The compiled plan** (`pinnkit --dry-run`'s `plan`: XLA's memory analysis of the
   compiled chunk) when the lower bound reaches a quarter of the available memory,
   where the bound alone could be too optimistic. Small runs skip it (it costs one
   compilation).

A refusal is a `ConfigError` naming the GiB needed, the GiB available and the key to
change (the largest part's). Available memory: a GPU/TPU device's ``bytes_limit`` less
``bytes_in_use``; the CPU backend's devices share the host, whose available memory is
``MemAvailable`` (``/proc/meminfo``) capped by the cgroup limit (SLURM, containers).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ConfigError
from ..parallel.mesh import STREAM_ROWS
from .config import RunConfig

GIB = 2**30
COMPILED_FRACTION = 0.25  # compile the plan when the lower bound reaches this share

@dataclass(frozen=True)
class Part:
    """One lower-bound term of the plan: ``bytes`` and the config key that sets it;
    ``when``: ``"train"`` (the training step), ``"eval"`` (an evaluation chunk: not at
    the same time as the step's temporaries), ``"always"`` (parameters) or ``"host"``
    (host memory: the evaluation grid)."""

    what: str
    bytes: float
    key: str
    when: str = "train"


def _cgroup_left() -> float:
    """Bytes left under the cgroup v2 (or v1) memory limit; inf without one."""
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                         "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            lim = Path(limit).read_text().strip()
            if lim == "max" or int(lim) >= 2**60:
                return math.inf
            return max(0.0, int(lim) - int(Path(used).read_text().strip()))
        except (OSError, ValueError):
            continue
    return math.inf


def host_available() -> float:
    """Bytes the host can still give this process."""
    avail = math.inf
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            pass
    return min(avail, _cgroup_left())


def device_available(device) -> float:
    """Bytes free on ``device`` (a GPU's allocator limit less use); for a CPU device,
    the host's share of one of the process's CPU devices."""
    if device.platform == "cpu":
        return host_available() / max(1, jax.local_device_count("cpu"))
    try:
        stats = device.memory_stats() or {}
    except Exception:  # a backend without statistics: nothing to say
        return math.inf
    if "bytes_limit" not in stats:
        return math.inf
    return float(stats["bytes_limit"] - stats.get("bytes_in_use", 0))


def grid_points(domain, resolution: int) -> int:
    """Points of ``domain.grid(resolution)`` without building it (`AbstractDomain.grid_size`:
    a tensor grid has ``resolution**dim``, a ball's uniform set ``resolution**2``)."""
    return domain.grid_size(resolution)


def _optimizer_words(cfg: RunConfig, n_params: int, rows: int) -> tuple[float, str]:
    """Words of optimiser state of the most demanding phase, and its key."""
    worst, key = 0.0, "optim.phases"
    for i, ph in enumerate(cfg.optim.phases):
        words = ph.state_words(n_params, rows)
        if words > worst:
            worst, key = words, (f"network.width (the optimiser state grows with the {n_params:,} "
                                 f"parameters) or optim.phases.{i}.kind (here {ph.kind}; lbfgs "
                                 "and adam keep a few vectors of the parameters' size)")
    return worst, key


def lower_bounds(cfg: RunConfig, problem, n_devices: int) -> list[Part]:
    """The plan's lower-bound parts (bytes per device; host parts flagged)."""
    from ..train.accumulate import largest_accumulate
    from .build import build_network

    dtype = jnp.float64 if cfg.numerics.x64 else jnp.float32
    size = np.dtype(dtype).itemsize
    # The problem stays concrete (closed over): building may read its arrays on the host
    # (a mesh's bounding box); only the network's initialisation is traced.
    shapes = eqx.filter_eval_shape(lambda key: build_network(cfg, problem, key, dtype),
                                   jax.random.key(0))
    n_params = sum(math.prod(x.shape) for x in jax.tree_util.tree_leaves(shapes)
                   if isinstance(x, jax.ShapeDtypeStruct) and jnp.issubdtype(x.dtype, jnp.inexact))
    d = problem.domain.dim
    n = cfg.network
    width, depth = n.width, n.depth + 1
    if n.fourier is not None:
        width = max(width, n.fourier.dim)
    dropped = set(problem.enforced) if n.hard_constraint else set()
    batch = {k: v for k, v in cfg.sampler.batch.items() if k not in dropped}
    per_dev = {k: math.ceil(v / n_devices) for k, v in batch.items()}
    rows = sum(per_dev.values())
    parts = [Part("parameters", n_params * size, "network.width / network.depth", "always")]
    words, okey = _optimizer_words(cfg, n_params, rows)
    parts.append(Part("optimiser state", words * size, okey))
    pool = cfg.sampler.adaptive.pool if cfg.sampler.adaptive is not None else 1
    # "auto" chooses at most largest_accumulate micro-batches: a lower bound takes that many
    k_most = (largest_accumulate(per_dev) if cfg.train.accumulate == "auto"
              else max(1, cfg.train.accumulate))
    for k, b in per_dev.items():
        term = problem.terms.get(k)
        # a shape sampled by rejection draws more candidates than it keeps
        drawn = b if term is None or term.where == "data" else problem.domain.unit_rows(b, term.where)
        parts.append(Part(f"points of term {k!r}", drawn * d * size * pool, f"sampler.batch.{k}"))
        micro = math.ceil(b / k_most)
        parts.append(Part(f"activations of term {k!r}", micro * width * depth * size,
                          f"sampler.batch.{k} (or raise train.accumulate)"))
    ev = cfg.eval
    parts.append(Part("evaluation chunk", min(ev.batch, STREAM_ROWS) * (width + d) * size,
                      "eval.batch", "eval"))
    # Host: the grid (float64, built through meshgrid: twice) and, streamed or not, at most
    # STREAM_ROWS rows of predictions and references.
    pts = grid_points(problem.domain, ev.resolution)
    m = len(problem.out_names)
    parts.append(Part("evaluation grid (host)", 2.0 * pts * d * 8 + min(pts, STREAM_ROWS) * 2 * m * 8,
                      "eval.resolution", "host"))
    return parts


def _refuse(parts: list[Part], need: float, avail: float, where: str, detail: str) -> None:
    top = max(parts, key=lambda p: p.bytes)
    listing = ", ".join(f"{p.what} {p.bytes / GIB:.3g}" for p in sorted(parts, key=lambda p: -p.bytes)[:4])
    raise ConfigError(
        f"the run needs {detail}{need / GIB:.3g} GiB {where} but {avail / GIB:.3g} GiB are "
        f"available (largest parts, GiB: {listing}). Change {top.key} to make "
        f"{top.what} smaller, or run on a device with more memory. `pinnkit train CONFIG "
        "--dry-run` prints the compiled plan."
    )


def check_prediction(n_points: int, dim: int, n_fields: int, batch: int, width: int, mesh,
                     dtype, points_key: str) -> None:
    """Refuses a prediction (`pinnkit predict`) of ``n_points`` points of ``dim``
    coordinates and ``n_fields`` fields, in batches of ``batch`` rows per device of a
    network ``width`` wide, that cannot fit, before any point is built. Lower bounds: on
    the host the float64 points (a grid is built through meshgrid: about three copies, and
    the padded batches one more) and the fields (the sharded values, their assembly, the
    gridded copy); per device one batch of inputs, outputs and two layers' activations."""
    host = n_points * 8.0 * (4 * dim + 4 * n_fields) + n_points
    if host > (avail := host_available()):
        raise ConfigError(
            f"{points_key}: {n_points:,} points need at least {host / GIB:.3g} GiB of host memory "
            f"but {avail / GIB:.3g} GiB are available. Ask for fewer points (a coarser grid, or "
            "x=lo:hi:n for the part you need), or split the points into several files"
        )
    device = mesh.devices.ravel()[0]
    per_dev = max(1, min(batch, math.ceil(n_points / mesh.size)))
    need = per_dev * (2 * width + dim + n_fields) * np.dtype(dtype).itemsize
    if need > (avail := device_available(device)):
        raise ConfigError(
            f"--batch {batch}: {per_dev:,} points per {device.platform} device need at least "
            f"{need / GIB:.3g} GiB but {avail / GIB:.3g} GiB are available; give a smaller --batch"
        )


def check(cfg: RunConfig, problem, mesh, build, fit_options: dict):
    """Refuses ``cfg`` if it cannot fit; otherwise returns ``build()`` (the `Run`),
    compiling the plan first when the run is large (see the module docstring)."""
    device = mesh.devices.ravel()[0]
    parts = lower_bounds(cfg, problem, mesh.size)

    def total(*when):
        return sum(p.bytes for p in parts if p.when in when)

    # The step and an evaluation take turns on the device; parameters stay throughout.
    dev = [p for p in parts if p.when != "host"]
    need_dev, avail_dev = max(total("always", "train"), total("always", "eval")), device_available(device)
    need_host = total("host")
    if device.platform == "cpu":  # the devices' memory is the host's too
        need_host += need_dev * jax.local_device_count("cpu")
    if need_host > host_available():
        _refuse(parts, need_host, host_available(), "of host memory", "at least ")
    if need_dev > avail_dev:
        _refuse(dev, need_dev, avail_dev, f"per {device.platform} device", "at least ")
    run = build()
    if need_dev >= COMPILED_FRACTION * avail_dev:
        from ..train.plan import plan

        opts = {k: fit_options[k] for k in ("accumulate", "remat", "donate") if k in fit_options}
        peak = plan(run, **opts)["memory_per_device"].get("peak_estimate_bytes", 0)
        if peak > avail_dev:
            _refuse(dev, peak, avail_dev, f"per {device.platform} device",
                    "(XLA's compiled estimate) ")
    return run
