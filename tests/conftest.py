"""Test configuration (equinox / jinns style).

- 4 virtual CPU devices, so the sharded training loop runs on meshes of 1, 2 and 4;
- rank promotion raises, which catches silent broadcasting bugs;
- ``--gpu`` runs the tests marked ``gpu``; ``slow`` tests always run (they are marked only
  so that ``-m "not slow"`` gives a quick local loop).

Tests that need float64 use the ``x64`` fixture, which enables it for the test only.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Compile caches and thread pools are per process; keep tests on the CPU they have.

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_num_cpu_devices", 4)
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_addoption(parser):
    parser.addoption("--gpu", action="store_true", help="run tests marked gpu")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--gpu"):
        return
    skip = pytest.mark.skip(reason="needs --gpu")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def x64():
    """Runs the test with float64 enabled, restoring the previous setting after."""
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)


# Many tests compile the same tiny training step; a persistent compilation cache (per
# test session) turns the repeats into cache hits without changing any number.
_CACHE = os.environ.get("PINNKIT_TEST_JAX_CACHE", "/tmp/pinnkit-test-jax-cache")
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
