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


@pytest.fixture(autouse=True)
def _restore_xla_flags():
    """Tests that call the CLI in this process let it add its XLA:CPU option to
    ``XLA_FLAGS`` (`pinnkit.cli.jaxsetup.xla_cpu_flags`); this process's backend is up
    already, so only later subprocesses would see it: each test starts and ends with the
    session's own value."""
    old = os.environ.get("XLA_FLAGS")
    yield
    if old is None:
        os.environ.pop("XLA_FLAGS", None)
    else:
        os.environ["XLA_FLAGS"] = old


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
# The `pinnkit` commands that tests start as subprocesses use the same directory, never the
# user's own cache (the command turns one on by default: `pinnkit.cli.jaxsetup.compilation_cache`).
_CACHE = os.environ.get("PINNKIT_TEST_JAX_CACHE", "/tmp/pinnkit-test-jax-cache")
# JAX writes a cache entry in place (no temp file and rename without `filelock`), so two
# pytest-xdist workers sharing one folder could read each other's half-written entry:
# each worker (and the CLI processes it starts) gets a folder of its own.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _CACHE = os.path.join(_CACHE, os.environ["PYTEST_XDIST_WORKER"])
os.environ["PINNKIT_JAX_CACHE"] = _CACHE
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# ------------------------------------------------------------------ trained tests
# A test marked `trained` asserts on what training reached (an error, a loss ratio).
# Such a number depends on the CPU's instruction set (float32 rounding differs between
# AVX, AVX2 and AVX-512 kernels) and on the seed, so each bound is set from margins
# measured over seeds 0, 1, 2 and XLA_FLAGS=--xla_cpu_max_isa=AVX / AVX2 / default
# (scripts/trained_margins.py runs that matrix; the figures are in each test's comment).
# PINNKIT_TEST_SEED picks the seed (default 0); with PINNKIT_TEST_MARGINS=FILE every
# `trained.check` appends its value and bound to FILE (JSON lines).

TRAINED_SEED = int(os.environ.get("PINNKIT_TEST_SEED", "0"))


class Trained:
    """The seed of a trained test and its checks (`check` records, then asserts)."""

    def __init__(self, nodeid: str):
        self.nodeid = nodeid
        self.seed = TRAINED_SEED

    def check(self, name: str, value: float, op: str, bound: float) -> None:
        import json

        value = float(value)
        ok = value < bound if op == "<" else value > bound
        path = os.environ.get("PINNKIT_TEST_MARGINS")
        if path:
            # margin: how far inside the bound, as a factor (> 1 passes)
            margin = (bound / value if value > 0 else float("inf")) if op == "<" else value / bound
            with open(path, "a") as f:
                f.write(json.dumps({"test": self.nodeid, "check": name, "value": value, "op": op,
                                    "bound": bound, "margin": margin, "seed": self.seed,
                                    "xla_flags": os.environ.get("XLA_FLAGS", "")}) + "\n")
        assert ok, f"{name}: {value!r} {op} {bound!r} fails (seed {self.seed})"


@pytest.fixture
def trained(request):
    assert request.node.get_closest_marker("trained"), "mark the test @pytest.mark.trained"
    return Trained(request.node.nodeid)


def train_tiny(config, out, *sets: str) -> None:
    """Trains ``config`` through the CLI (quiet, no plots, the trained tests' seed) into ``out``."""
    from pinnkit.cli import main

    args = ["train", str(config), "--out", str(out), "--quiet", "--no-plots",
            "--set", f"train.seed={TRAINED_SEED}"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 0


def check_force_metrics(run, reference: dict, trained: Trained, bound: float = 0.5) -> None:
    """A trained DFG run's ``summary.json``: finite c_D, c_L, Δp (surface and volume), the
    reference stored with them, and the last loss below ``bound`` × the first."""
    import json
    import math

    summary = json.loads((run / "summary.json").read_text())
    m = summary["metrics"]
    for k in ("c_D", "c_L", "delta_p", "c_D_volume", "c_L_volume"):
        assert math.isfinite(m[k]), m
    assert m["reference"] == reference
    first = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    trained.check("final/first loss", summary["final_loss"] / first["loss"], "<", bound)
