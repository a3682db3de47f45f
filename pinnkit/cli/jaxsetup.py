"""The one place pinnkit writes `jax.config`: the command line, before any computation.

The library itself never touches global JAX state (importing pinnkit, building a run or
training changes nothing); the ``pinnkit`` command calls these before it builds anything,
and scripts that want the command's behaviour call them too.
"""

from __future__ import annotations


def apply_numerics(cfg, devices: int | None) -> None:
    """``numerics.x64`` and ``numerics.matmul_precision`` of ``cfg`` (a `RunConfig`), and
    ``devices`` virtual CPU devices when more than one is asked for (only the CPU backend
    reads that option: fake devices for tests and CPU clusters)."""
    import jax

    if devices is not None and devices > 1:
        try:  # too late once a backend exists; harmless then (the devices are what they are)
            jax.config.update("jax_num_cpu_devices", devices)
        except RuntimeError:
            pass
    jax.config.update("jax_enable_x64", bool(cfg.numerics.x64))
    jax.config.update("jax_default_matmul_precision", cfg.numerics.matmul_precision)


def multiprocess_options() -> None:
    """What a multi-process job needs before `pinnkit.parallel.distributed.initialize`:
    CPU collectives over gloo (the default CPU backend has none across processes), and
    JAX's own preemption service off (pinnkit handles SIGTERM/SIGUSR1 itself and agrees
    on the stop step with `pinnkit.parallel.distributed.agree_any`)."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_enable_preemption_service", False)
