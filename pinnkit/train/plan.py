"""What a run would do, without training (``pinnkit train --dry-run``): the mesh, the
per-device batches, the parameter count and XLA's memory estimate of the first phase's
compiled chunk."""

from __future__ import annotations

import time

import jax
import numpy as np

from ..errors import ConfigError
from ..parallel.mesh import replicate
from .accumulate import AUTO, per_device_batch, resolve_accumulate
from .loss import make_loss
from .spec import Run
from .step import chunk_args, init_extra, initial_state, make_chunk, point_arrays, split_model, train_key


def check_accumulate(run: Run, accumulate: int) -> None:
    """Raises `ConfigError` unless every per-device batch splits into ``accumulate``
    equal micro-batches, and no phase needs the whole batch at once."""
    n_dev = run.mesh.size
    if accumulate < 1:
        raise ConfigError(f"accumulate={accumulate}: expected an integer >= 1")
    for name, n in sorted(per_device_batch(run).items()):
        if n % accumulate:
            raise ConfigError(
                f"accumulate={accumulate}: term {name!r} has {n} points per device "
                f"({n * n_dev} over {n_dev} devices), not divisible into {accumulate} "
                f"micro-batches; use an accumulate that divides {n} or change sampler.batch"
            )
    whole = sorted({ph.kind for ph in run.phases if ph.gauss_newton})
    if accumulate > 1 and whole:
        raise ConfigError(
            f"accumulate={accumulate}: a {whole[0]} phase forms its Gramian from the whole batch "
            "at once; use accumulate=1 (its networks are small) or another optimiser"
        )


def compiled_memory(compiled) -> dict[str, int]:
    """XLA's memory analysis of a compiled chunk, bytes per device, with
    ``peak_estimate_bytes`` = arguments + outputs − aliased + temporaries ({} if the
    backend gives none)."""
    mem = compiled.compiled.memory_analysis()  # eqx wraps jax.stages.Compiled
    if mem is None:
        return {}
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "generated_code_size_in_bytes")
    memory = {f: int(getattr(mem, f, 0) or 0) for f in fields}
    memory["peak_estimate_bytes"] = (memory["argument_size_in_bytes"] + memory["output_size_in_bytes"]
                                     - memory["alias_size_in_bytes"] + memory["temp_size_in_bytes"])
    return memory


def plan(run: Run, *, accumulate: int | str = 1, remat: str = "none", donate: bool = False) -> dict:
    """The plan of ``run`` (module docstring) as a JSON-able dict; compiles the first
    phase's chunk (``compile_s``) and trains nothing. ``accumulate="auto"``: the K that
    `fit` would choose (`pinnkit.train.accumulate`)."""
    params, static = split_model(run)
    n_params = sum(int(np.size(x)) for x in jax.tree_util.tree_leaves(params))
    arrays = point_arrays(run)
    if accumulate == AUTO:  # the K fit would choose (one extra compilation, CPU only)
        accumulate = resolve_accumulate(run, accumulate, make_loss(run, static, remat=remat),
                                        replicate(params, run.mesh), arrays, init_extra(run))
    check_accumulate(run, accumulate)
    loss = make_loss(run, static, accumulate=accumulate, remat=remat)
    ph = run.phases[0]
    n = min(run.chunk, ph.steps)
    state = initial_state(run, ph, params)
    chunk = make_chunk(loss, ph, n, train_key(run), donate=donate, run=run)
    t0 = time.perf_counter()
    compiled = chunk.lower(arrays, state, *chunk_args(ph, run.dtype, n)).compile()
    compile_s = time.perf_counter() - t0
    devs = run.mesh.devices.ravel()
    per_dev = per_device_batch(run)
    return {
        "mesh": {"axis": "data", "size": run.mesh.size, "platform": devs[0].platform,
                 "processes": jax.process_count(),
                 "devices_per_process": len([d for d in devs if d.process_index == jax.process_index()])},
        "per_device_batch": per_dev,
        **({"sampling_acceptance": acc} if (acc := run.sampler.acceptance(run.problem)) else {}),
        "micro_batch": {k: v // accumulate for k, v in per_dev.items()},
        "accumulate": accumulate,
        "remat": remat,
        "donate": donate,
        "parameters": n_params,
        "chunk_steps": n,
        "phase": ph.kind,
        "compile_s": round(compile_s, 3),
        "memory_per_device": compiled_memory(compiled),
    }
