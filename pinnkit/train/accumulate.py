r"""``train.accumulate: auto``: the number of micro-batches per step chosen from the step's
working set and the core's cache.

With ``accumulate = K`` each step's batch runs as K equal micro-batches one after another
in a scan (`pinnkit.train.loss.Loss`): the same loss and gradient to rounding, with one
micro-batch's temporaries alive. On a CPU whose step streams tens of MiB of temporaries
from beyond its cache, blocks that fit the cache make the step 1.4-1.6x faster (the peer
protocols P1-P3 of docs/benchmarks.md, issue 32); a small step only pays the scan's fixed
cost per micro-batch (``configs/poisson2d.yaml``: 0.63x at K = 16). `choose_accumulate`
is the rule, a pure function of figures measured elsewhere:

- K = 1 off CPUs (an accelerator's small step is bound by launches, and a scan of K
  micro-batches is K times the launches), with a phase that needs the whole batch at
  once (Gauss-Newton), or when the cache size is unknown;
- K = 1 while the step's temporaries (XLA's memory analysis of the compiled gradient at
  K = 1) are below `GATE` times the cache: there the measured gain is within the noise
  or a loss (docs/benchmarks.md, issue 32, session 24);
- otherwise the smallest power of two K with temporaries / K within the cache, as long as
  K divides every term's per-device batch and the largest term keeps `MIN_POINTS`
  points per micro-batch.

`resolve_accumulate` measures the figures (one extra compilation of the step's gradient,
on CPU only) and applies the rule; in a multi-process job every process takes process
0's K.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import jax
import numpy as np

from ..errors import ConfigError
from ..parallel.distributed import broadcast_from_main

AUTO = "auto"
GATE = 16  # temporaries over the cache below which K stays 1
MIN_POINTS = 128  # points of the largest term per micro-batch, at least


def cpu_caches(cpu_dir: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> list[tuple[str, str, str]]:
    """``(level, type, size)`` of each cache of one core as Linux's sysfs writes them, e.g.
    ``("2", "Unified", "2048K")``; empty where sysfs has none."""
    out = []
    for index in sorted(Path(cpu_dir).glob("index*")):
        try:
            out.append(tuple((index / f).read_text().strip() for f in ("level", "type", "size")))
        except OSError:
            continue
    return out


def cache_bytes(cpu_dir: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Bytes of the level-2 cache of one core (Linux's sysfs), or None if not found.
    One core's: training runs one XLA thread per process here, and level 3 is shared."""
    for level, kind, size in cpu_caches(cpu_dir):
        if level == "2" and kind in ("Unified", "Data"):
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:].upper(), 1)
            digits = size[:-1] if scale != 1 else size
            return int(digits) * scale if digits.isdigit() else None
    return None


def _fits(batch: Mapping[str, int], k: int) -> bool:
    """K divides every term's batch and leaves the largest term `MIN_POINTS` points."""
    return all(n % k == 0 for n in batch.values()) and max(batch.values()) // k >= MIN_POINTS


def largest_accumulate(batch: Mapping[str, int]) -> int:
    """The largest K that `choose_accumulate` can return for these per-device batches."""
    k = 1
    while batch and _fits(batch, 2 * k):
        k *= 2
    return k


def choose_accumulate(temp_bytes: int, batch: Mapping[str, int], cache: int | None, *,
                      platform: str = "cpu", whole_batch: bool = False) -> int:
    """Micro-batches per step (module docstring).

    **Arguments:**
    - `temp_bytes`: temporaries of one step's gradient at K = 1 (XLA's memory analysis).
    - `batch`: points per device of each term.
    - `cache`: bytes of one core's cache (`cache_bytes`), or None if unknown.
    - `platform`: the devices' platform (``"cpu"``, ``"tpu"``, ``"gpu"``).
    - `whole_batch`: a phase needs the whole batch at once (Gauss-Newton).
    """
    if platform != "cpu" or whole_batch or not cache or cache <= 0 or not batch:
        return 1
    if temp_bytes < GATE * cache:
        return 1
    k = 1
    while temp_bytes / k > cache and _fits(batch, 2 * k):
        k *= 2
    return k


def per_device_batch(run) -> dict[str, int]:
    """Points (or observations) per device for each term, per step."""
    n_dev = run.mesh.size if run.mesh is not None else 1
    out = {}
    for name, term in sorted(run.problem.terms.items()):
        n = term.rows().shape[0] if term.where == "data" else run.sampler.batch[name]
        out[name] = n // n_dev
    return out


def step_temp_bytes(loss, params, arrays, extra) -> int:
    """Temporaries of one step's value and gradient of ``loss`` (K = 1), by XLA's memory
    analysis of the compiled program (0 if the backend gives none)."""
    ctx = loss.context(extra, 0)
    grad = jax.jit(lambda p, a, c: loss.value_and_grad(p, jax.random.key(0), a, c))
    mem = grad.lower(params, arrays, ctx).compile().memory_analysis()
    return int(mem.temp_size_in_bytes) if mem is not None else 0


def resolve_accumulate(run, accumulate, loss_at_one, params, arrays, extra, *,
                       progress: bool = False) -> int:
    """``accumulate`` as an integer: itself, or for ``"auto"`` `choose_accumulate`'s K
    from ``loss_at_one`` (the run's `Loss` at K = 1) compiled on ``params`` and
    ``arrays``; with ``progress``, the choice and its figures on stderr."""
    if accumulate != AUTO:
        if isinstance(accumulate, bool) or not isinstance(accumulate, int):
            raise ConfigError(f"accumulate={accumulate!r}: expected an integer >= 1 or 'auto'")
        return accumulate
    platform = run.mesh.devices.ravel()[0].platform
    whole = any(ph.gauss_newton for ph in run.phases)
    cache = cache_bytes() if platform == "cpu" else None
    if platform != "cpu" or whole or not cache:
        k, temp = 1, None
    else:
        temp = step_temp_bytes(loss_at_one, params, arrays, extra)
        k = choose_accumulate(temp, per_device_batch(run), cache, platform=platform)
    # every process runs process 0's K (hosts may differ in cache; a collective)
    k = int(broadcast_from_main(np.int64(k)))
    if progress and jax.process_index() == 0:
        if temp is not None:
            why = f"step temporaries {temp / 2**20:.1f} MiB, cache {cache / 2**20:.1f} MiB"
        else:
            why = "a Gauss-Newton phase" if whole else platform if platform != "cpu" else "cache size unknown"
        print(f"pinnkit: accumulate auto: {k} micro-batch{'es' if k > 1 else ''} per step ({why})",
              file=sys.stderr, flush=True)
    return k
