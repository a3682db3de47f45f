"""The one place pinnkit writes `jax.config`: the command line, before any computation.

The library itself never touches global JAX state (importing pinnkit, building a run or
training changes nothing); the ``pinnkit`` command calls these before it builds anything
(`xla_cpu_flags` before anything at all), and scripts that want the command's behaviour
call them too.

JAX's persistent compilation cache is on by default in the command (`compilation_cache`):
a second run of the same config (same shapes, options and versions) loads its compiled
chunks from disk instead of compiling them again. ``PINNKIT_JAX_CACHE=off`` turns it off,
``PINNKIT_JAX_CACHE=DIR`` moves it; JAX's own ``JAX_COMPILATION_CACHE_DIR`` wins over both.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

# XLA:CPU of jaxlib 0.10 hands dots and reductions to YNNPACK ("ynn fusions"). Its
# reductions over a middle axis, which the Taylor rows' reverse pass is full of (a sum
# over the d direction rows of a (points, d, width) product), run at a sixth of XLA's own
# loops: the d = 100 natural gradient's residual Jacobian took 0.52 s a step with them and
# 0.28 s without. Leaving YNNPACK only the dots made the point-space solve's J J^T 2.6x
# slower, so it is off altogether: XLA's own dots are as fast there, and Adam steps are
# within a few per cent (docs/benchmarks.md, `scripts/bench_jacobian.py`). Only for the
# jaxlib range this was measured on: XLA aborts on a flag it does not know, and the
# option is experimental.
_YNN_OPTION = "--xla_cpu_experimental_ynn_fusion_type"
_YNN_VALUE = ""  # no fusion type: YNNPACK off
_MEASURED_JAXLIB = (0, 10)


def xla_cpu_flags(environ: dict | None = None) -> str | None:
    """Adds pinnkit's XLA:CPU compiler option to ``XLA_FLAGS`` of ``environ`` (default
    ``os.environ``): ``--xla_cpu_experimental_ynn_fusion_type=`` (no YNNPACK fusions: XLA
    compiles dots and reductions itself; the comment above says why). Returns the
    flag added, or None when nothing was added: ``XLA_FLAGS`` names the option already
    (the user's choice wins, whatever its value) or jaxlib is not 0.10.x. XLA reads
    ``XLA_FLAGS`` once, when JAX's first backend starts, so call this before any
    computation (the ``pinnkit`` command does it first thing); later it changes nothing in
    this process."""
    from importlib import metadata

    env = os.environ if environ is None else environ
    flags = env.get("XLA_FLAGS", "")
    if _YNN_OPTION in flags:
        return None
    try:
        version = tuple(int(v) for v in metadata.version("jaxlib").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return None
    if version != _MEASURED_JAXLIB:
        return None
    flag = f"{_YNN_OPTION}={_YNN_VALUE}"
    env["XLA_FLAGS"] = f"{flags} {flag}".strip()
    return flag


CACHE_ENV = "PINNKIT_JAX_CACHE"


class CacheWarning(UserWarning):
    """The compilation cache's directory could not be created (the run goes on without)."""


_CACHE_OFF = ("off", "0", "false", "no", "none")


def cache_dir(environ: dict | None = None) -> Path | None:
    """Where the command keeps JAX's persistent compilation cache, from ``environ``
    (default ``os.environ``): ``$PINNKIT_JAX_CACHE`` if set (None for ``off``, ``0``,
    ``false``, ``no``, ``none``: no cache), else ``$XDG_CACHE_HOME/pinnkit/jax``, else
    ``~/.cache/pinnkit/jax``."""
    env = os.environ if environ is None else environ
    value = env.get(CACHE_ENV, "").strip()
    if value.lower() in _CACHE_OFF:
        return None
    if value:
        return Path(value).expanduser()
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pinnkit" / "jax"


def compilation_cache(environ: dict | None = None) -> str | None:
    """Turns on JAX's persistent compilation cache in `cache_dir` (created if missing),
    for every program however small or quick to compile (JAX's defaults skip those
    compiled in under a second: many of a run's evaluation programs). Returns the
    directory, or None when nothing was changed: the cache is off (``PINNKIT_JAX_CACHE=off``),
    JAX's own ``jax_compilation_cache_dir`` is set already (``JAX_COMPILATION_CACHE_DIR``
    or the caller's `jax.config`: theirs wins, thresholds included), or the directory
    cannot be created (one warning line; the run goes on without a cache). Call it before
    the first compilation: JAX opens the cache once per process."""
    import jax

    if jax.config.jax_compilation_cache_dir:
        return None
    path = cache_dir(environ)
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        warnings.warn(f"no compilation cache: cannot create {path} ({e.strerror or e}); set "
                      f"{CACHE_ENV}=DIR to put it elsewhere or {CACHE_ENV}=off", CacheWarning, stacklevel=2)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return str(path)


def apply_numerics(cfg, devices: int | None) -> None:
    """``numerics.x64`` and ``numerics.matmul_precision`` of ``cfg`` (a `RunConfig`), and
    ``devices`` virtual CPU devices when more than one is asked for (only the CPU backend
    reads that option: fake devices for tests and CPU clusters); then the persistent
    compilation cache (`compilation_cache`)."""
    import jax

    if devices is not None and devices > 1:
        try:  # too late once a backend exists; harmless then (the devices are what they are)
            jax.config.update("jax_num_cpu_devices", devices)
        except RuntimeError:
            pass
    jax.config.update("jax_enable_x64", bool(cfg.numerics.x64))
    jax.config.update("jax_default_matmul_precision", cfg.numerics.matmul_precision)
    compilation_cache()


def multiprocess_options() -> None:
    """What a multi-process job needs before `pinnkit.parallel.distributed.initialize`:
    CPU collectives over gloo (the default CPU backend has none across processes), and
    JAX's own preemption service off (pinnkit handles SIGTERM/SIGUSR1 itself and agrees
    on the stop step with `pinnkit.parallel.distributed.agree_any`)."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_enable_preemption_service", False)
