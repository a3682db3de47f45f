"""Compile time of each config's first training chunk, cold and from the persistent cache.

    taskset -c 1 python scripts/bench_compile.py [CONFIG ...]   # default: configs/*.yaml, configs/tiny/*.yaml

For every config, two fresh processes (each: imports, build the run, then trace, lower and
compile phase 0's first chunk, exactly as `pinnkit.train.loop.fit` does) share one new
cache folder: the first compiles cold and fills it, the second finds its program there
(the command's cache, `pinnkit.cli.jaxsetup.compilation_cache`, with its thresholds).
Prints one line per config, wall and process-CPU seconds of the chunk's compilation
(tracing and lowering included), and the size of XLA's optimised program; ``--json
FILE`` writes the rows. On a shared machine the CPU seconds are the figure to compare.
``--no-cache`` measures cold only (a checkout without the cache: main before issue 32).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def first_chunk(config: str, cache: str | None) -> dict:
    """In this process: build ``config``'s run and compile its first chunk."""
    from pinnkit.cli import jaxsetup

    jaxsetup.xla_cpu_flags()
    import jax
    import jax.numpy as jnp

    from pinnkit.parallel.mesh import replicate
    from pinnkit.run.build import build_run
    from pinnkit.run.config import load_config
    from pinnkit.train.loss import make_loss
    from pinnkit.train.step import (
        TrainState,
        init_extra,
        make_chunk,
        nan_loss,
        point_arrays,
        split_model,
        train_key,
    )

    cfg = load_config(config)
    if cache is not None:  # the command's own settings when it has them, else the same by hand
        os.environ["PINNKIT_JAX_CACHE"] = cache
    jaxsetup.apply_numerics(cfg, None)
    if cache is not None and not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    run = build_run(cfg)
    params, static = split_model(run)
    params = replicate(params, run.mesh)
    loss, ph = make_loss(run, static), run.phases[0]
    state = replicate(TrainState(params, ph.init(params), jnp.asarray(0, jnp.int32), init_extra(run)),
                      run.mesh)
    n = min(run.chunk, ph.end)
    arrays = point_arrays(run)
    args = (nan_loss(run.dtype),) if ph.stops_early else ()
    fn = make_chunk(loss, ph, n, train_key(run), run=run)
    c0, w0 = time.process_time(), time.perf_counter()
    compiled = fn.lower(arrays, state, *args).compile()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    text = compiled.compiled.as_text() if hasattr(compiled, "compiled") else compiled.as_text()
    return {"config": config, "phase": ph.kind, "steps": n, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "instructions": sum(1 for line in text.splitlines() if " = " in line)}


def _child(config: str, cache: str | None) -> dict:
    cmd = [sys.executable, __file__, "--child", config] + (["--cache", cache] if cache else [])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("JAX_COMPILATION_CACHE") and k != "PINNKIT_JAX_CACHE"}
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**env, "JAX_PLATFORMS": "cpu"})
    if out.returncode != 0:
        return {"config": config, "error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("configs", nargs="*")
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--no-cache", action="store_true", help="cold only")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--cache", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(first_chunk(a.child, a.cache)))
        return 0
    configs = a.configs or sorted(str(c.relative_to(ROOT)) for d in ("configs", "configs/tiny")
                                  for c in (ROOT / d).glob("*.yaml"))
    rows = []
    for config in configs:
        with tempfile.TemporaryDirectory(prefix="pinnkit-bench-cache-") as cache:
            cold = _child(config, None if a.no_cache else cache)
            warm = None if a.no_cache or "error" in cold else _child(config, cache)
        rows.append({"config": config, "cold": cold, "cached": warm})
        if "error" in cold:
            print(f"{config}: failed: {cold['error']}", flush=True)
            continue
        line = (f"{config}: {cold['phase']} {cold['steps']}-step chunk, {cold['instructions']} instructions; "
                f"cold {cold['cpu_s']:.1f} s CPU ({cold['wall_s']:.1f} s wall)")
        if warm is not None and "error" not in warm:
            line += f"; cached {warm['cpu_s']:.1f} s CPU ({warm['wall_s']:.1f} s wall)"
        print(line, flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
