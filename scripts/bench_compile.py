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
``--phase N`` measures phase N's first chunk instead (from the initial state: the program
does not depend on the values), ``--set KEY=VALUE`` overrides the configs as the command's
option does. Where `fit` redraws the adaptive point sets between chunks
(`pinnkit.train.step.redraw_between_chunks`), the chunk is compiled without them, as there,
and the redraws' own program is compiled after it and reported beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import resource
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def probe_ms() -> float:
    """CPU milliseconds of a fixed pure-Python loop (18-22 ms on this machine's cores): the
    machine's speed for this process at that moment, beside the chunk's figure."""
    c0 = time.process_time()
    sum(i * i for i in range(400_000))
    return round(1e3 * (time.process_time() - c0), 1)


def first_chunk(config: str, cache: str | None, where: int = 0, overrides: list[str] | None = None,
                phase: int = 0) -> dict:
    """In this process: build ``config``'s run (``--set`` ``overrides``) and compile the first
    chunk of its phase ``phase``."""
    from pinnkit.cli import jaxsetup

    jaxsetup.xla_cpu_flags()
    import jax

    from pinnkit.run.build import build_run
    from pinnkit.run.config import load_config
    from pinnkit.train import step as st
    from pinnkit.train.loss import make_loss

    cfg = load_config(config, overrides)
    if cache is not None:  # the command's own settings when it has them, else the same by hand
        os.environ["PINNKIT_JAX_CACHE"] = cache
    jaxsetup.apply_numerics(cfg, None)
    if cache is not None and not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    run = build_run(cfg)
    params, static = st.split_model(run)
    if not 0 <= phase < len(run.phases):
        raise SystemExit(f"--phase {phase}: {config} has phases 0..{len(run.phases) - 1}")
    loss, ph = make_loss(run, static), run.phases[phase]
    state = st.initial_state(run, ph, params)
    n = min(run.chunk, ph.end - ph.start)
    arrays = st.point_arrays(run)
    args = st.chunk_args(ph, run.dtype, n)
    between = st.redraw_between_chunks(run, ph, ph.start, run.chunk)  # as `fit` decides
    fn = st.make_chunk(loss, ph, n, st.train_key(run), run=run, redraw=not between)
    probe = probe_ms()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    c0, w0 = time.process_time(), time.perf_counter()
    lowered = fn.lower(arrays, state, *args)
    c1 = time.process_time()
    text = lowered.as_text()
    row = {"config": config, "phase": ph.kind, "steps": n, "lower_cpu_s": round(c1 - c0, 2),
           "stablehlo_lines": text.count("\n"),
           "stablehlo_sha1": hashlib.sha1(text.encode()).hexdigest()[:12]}
    if where:  # no compilation: where the traced program's equations come from
        return row | {"where": _where(fn, (arrays, state, *args), where)}
    compiled = lowered.compile()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    # The kernel's share, the page faults that needed a read and the probe before and after:
    # a figure inflated by the machine (a slowed core, memory pressure re-reading evicted
    # library pages) rather than by the program shows there.
    row |= {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "instructions": _instructions(compiled),
            "probe_ms": [probe, probe_ms()], "sys_s": round(r1.ru_stime - r0.ru_stime, 2),
            "major_faults": r1.ru_majflt - r0.ru_majflt}
    if between and st.redraw_steps(run, ph, ph.start):  # the redraws' program, compiled at the first
        c0 = time.process_time()
        compiled = st.make_redraw(run, loss, st.train_key(run)).lower(state).compile()
        row |= {"redraw_cpu_s": round(time.process_time() - c0, 2),
                "redraw_instructions": _instructions(compiled)}
    return row


def _instructions(compiled) -> int:
    """Instructions of XLA's optimised program."""
    text = compiled.compiled.as_text() if hasattr(compiled, "compiled") else compiled.as_text()
    return sum(" = " in line for line in text.splitlines())


def _where(fn, args, top: int) -> list[tuple[str, int]]:
    """The ``top`` pinnkit source lines (innermost pinnkit frame of each equation's
    traceback) with the most jaxpr equations in ``fn``'s program, sub-programs included."""
    import jax
    from jax._src import core, source_info_util

    counts: dict[str, int] = {}

    def subs(v):
        if isinstance(v, core.ClosedJaxpr):
            yield v.jaxpr
        elif isinstance(v, core.Jaxpr):
            yield v
        elif isinstance(v, (tuple, list)):
            for w in v:
                yield from subs(w)

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            inner = [j for v in eqn.params.values() for j in subs(v)]
            for j in inner:
                walk(j)
            if inner:
                continue
            key = "(no pinnkit frame)"
            for f in source_info_util.user_frames(eqn.source_info.traceback):
                if "/pinnkit/" in f.file_name:
                    key = f"{f.file_name.split('/pinnkit/')[-1]}:{f.start_line} ({f.function_name})"
                    break
            counts[key] = counts.get(key, 0) + 1

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return [("(all equations)", sum(counts.values()))] + sorted(counts.items(), key=lambda kv: -kv[1])[:top]


def _child(config: str, cache: str | None, core: int | None, extra: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--child", config] + (["--cache", cache] if cache else []) + extra
    if core is not None:
        cmd = ["taskset", "-c", str(core)] + cmd
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("JAX_COMPILATION_CACHE") and k != "PINNKIT_JAX_CACHE"}
    if cache is None:  # cold only: not the command's default cache folder either (a hit there)
        env["PINNKIT_JAX_CACHE"] = "off"
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**env, "JAX_PLATFORMS": "cpu"})
    if out.returncode != 0:
        return {"config": config, "error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _measure(config: str, cold_only: bool, core: int | None, extra: list[str]) -> dict:
    """Cold, then cached on the same new cache folder, both on ``core`` (``extra``: the
    children's ``--set`` and ``--phase`` options)."""
    with tempfile.TemporaryDirectory(prefix="pinnkit-bench-cache-") as cache:
        cold = _child(config, None if cold_only else cache, core, extra)
        warm = None if cold_only or "error" in cold else _child(config, cache, core, extra)
    return {"config": config, "cold": cold, "cached": warm}


def _line(row: dict) -> str:
    cold, warm = row["cold"], row["cached"]
    if "error" in cold:
        return f"{row['config']}: failed: {cold['error']}"
    line = (f"{row['config']}: {cold['phase']} {cold['steps']}-step chunk, "
            f"{cold['instructions']} instructions; "
            f"cold {cold['cpu_s']:.1f} s CPU ({cold['wall_s']:.1f} s wall, "
            f"lowering {cold['lower_cpu_s']:.1f} s, "
            f"system {cold.get('sys_s', 0):.1f} s, {cold.get('major_faults', 0)} major faults, "
            f"probe {cold.get('probe_ms', '?')} ms)")
    if "redraw_cpu_s" in cold:
        line += (f"; adaptive redraw between chunks: {cold['redraw_instructions']} instructions, "
                 f"{cold['redraw_cpu_s']:.1f} s CPU")
    if warm is not None and "error" not in warm:
        line += f"; cached {warm['cpu_s']:.1f} s CPU ({warm['wall_s']:.1f} s wall)"
        if "redraw_cpu_s" in warm:
            line += f", redraw {warm['redraw_cpu_s']:.1f} s CPU"
    return line


def table(before: list[dict], after: list[dict] | None = None, limit: float = 30.0) -> str:
    """A markdown table of one run's rows, or of two (``before``, ``after``) by config."""
    def cells(row):
        if row is None or "error" in row["cold"]:
            return ["failed" if row else "", "", ""]
        c, w = row["cold"], row["cached"]
        cold = f"{c['cpu_s']:.1f}" + (" **(> 30)**" if c["cpu_s"] > limit else "")
        return [f"{c['instructions']:,}".replace(",", " "), cold,
                "" if not w or "error" in w else f"{w['cpu_s']:.1f}"]

    by = {r["config"]: r for r in after or []}
    head = ["config", "phase, steps", "instructions", "cold CPU s", "cached CPU s"]
    if after is not None:
        head = ["config", "phase, steps", "instructions before", "cold CPU s before", "cached CPU s before",
                "instructions after", "cold CPU s after", "cached CPU s after"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in before:
        c = row["cold"]
        phase = "" if "error" in c else f"{c['phase']}, {c['steps']}"
        rest = cells(row) + (cells(by.get(row["config"])) if after is not None else [])
        out.append(f"| `{row['config']}` | {phase} | " + " | ".join(rest) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("configs", nargs="*")
    p.add_argument("--json", help="write the rows to this file (rewritten after each config)")
    p.add_argument("--no-cache", action="store_true", help="cold only")
    p.add_argument("--jobs", type=int, default=1,
                   help="configs measured at a time, each pinned to its own core of this process' "
                        "affinity mask (default 1: the first core)")
    p.add_argument("--table", nargs="+", metavar="JSON",
                   help="print the markdown table of one --json file, or of two (before, after)")
    p.add_argument("--where", type=int, default=0, metavar="N",
                   help="one process, cold, no cache: also print the N pinnkit source lines "
                        "with the most jaxpr equations")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config override, as the command's --set (repeatable; every config)")
    p.add_argument("--phase", type=int, default=0,
                   help="the phase whose first chunk is measured (default 0; the chunk starts "
                        "at the phase's first step, with the initial training state)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--cache", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(first_chunk(a.child, a.cache, overrides=a.set, phase=a.phase)))
        return 0
    if a.table:
        runs = [json.loads(Path(f).read_text()) for f in a.table]
        print(table(runs[0], runs[1] if len(runs) > 1 else None))
        return 0
    if a.where:
        for config in a.configs:
            row = first_chunk(config, None, a.where, a.set, a.phase)
            print(json.dumps({k: v for k, v in row.items() if k != "where"}))
            for src, n in row["where"]:
                print(f"{n:8d}  {src}")
        return 0
    configs = a.configs or sorted(str(c.relative_to(ROOT)) for d in ("configs", "configs/tiny")
                                  for c in (ROOT / d).glob("*.yaml"))
    cores = sorted(os.sched_getaffinity(0))[: max(a.jobs, 1)]
    free: queue.Queue = queue.Queue()
    for core in cores:
        free.put(core)
    done: dict[str, dict] = {}
    lock = threading.Lock()

    def work(config: str) -> None:
        core = free.get()
        try:
            row = _measure(config, a.no_cache, core,
                           [o for kv in a.set for o in ("--set", kv)] + ["--phase", str(a.phase)])
        finally:
            free.put(core)
        with lock:
            done[config] = row
            print(_line(row), flush=True)
            if a.json:
                rows = [done[c] for c in configs if c in done]
                Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")

    with ThreadPoolExecutor(len(cores)) as pool:
        list(pool.map(work, configs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
