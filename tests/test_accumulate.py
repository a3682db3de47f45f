"""``train.accumulate: auto`` (pinnkit.train.accumulate): the chooser's decisions on
synthetic memory figures, the cache read from sysfs, and auto's K training the same
losses as one batch."""

from pathlib import Path

import numpy as np
import pytest

from pinnkit.errors import ConfigError
from pinnkit.parallel.mesh import make_mesh
from pinnkit.run import memplan
from pinnkit.run.build import build_problem, build_run
from pinnkit.run.config import from_dict, load_config
from pinnkit.train import accumulate as acc
from pinnkit.train.loop import fit
from pinnkit.train.plan import plan

MIB = 2**20
SOFT = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "poisson2d_soft.yaml"


@pytest.mark.parametrize("temp_mib, batch, want", [
    # the peer protocols' figures on a 2 MiB L2 (docs/benchmarks.md, issue 32)
    (39.5, {"pde": 4096, "boundary": 1024}, 32),  # P1: 1.2 MiB per micro-batch
    (43.2, {"pde": 4096, "initial": 512, "boundary": 512}, 32),  # P3
    (66.9, {"momentum": 4096, "continuity": 4096, "boundary": 1024}, 32),  # P2: 128 points cap it
    # shipped configs: below 16 x the cache, one batch
    (31.5, {"pde": 4096, "initial": 256, "boundary": 256}, 1),  # configs/burgers.yaml
    (24.8, {"momentum": 2048, "continuity": 2048}, 1),  # configs/ns_kovasznay.yaml
    (4.7, {"pde": 1024}, 1),  # configs/poisson2d.yaml
    # the smallest power of two that fits the cache, within what the batches allow
    (40.0, {"pde": 4096}, 32),
    (64.0, {"pde": 65536}, 32),  # 2 MiB each: fits
    (65.0, {"pde": 65536}, 64),
    (40.0, {"pde": 4096, "boundary": 1000}, 8),  # 1000 = 8 x 125: 16 does not divide it
    (40.0, {"pde": 2048, "boundary": 2048}, 16),  # 128 points per micro-batch at most
    (40.0, {"pde": 4095}, 1),  # odd: no split
])
def test_choice_on_synthetic_figures(temp_mib, batch, want):
    assert acc.choose_accumulate(int(temp_mib * MIB), batch, 2 * MIB) == want


def test_choice_stays_one_where_it_cannot_help():
    p1 = (int(39.5 * MIB), {"pde": 4096, "boundary": 1024})
    assert acc.choose_accumulate(*p1, 2 * MIB) == 32
    assert acc.choose_accumulate(*p1, 2 * MIB, platform="tpu") == 1  # launches, not cache
    assert acc.choose_accumulate(*p1, 2 * MIB, platform="gpu") == 1
    assert acc.choose_accumulate(*p1, 2 * MIB, whole_batch=True) == 1  # Gauss-Newton
    assert acc.choose_accumulate(*p1, None) == 1  # cache unknown
    assert acc.choose_accumulate(*p1, 4 * MIB) == 1  # below 16 x a larger cache
    assert acc.choose_accumulate(int(39.5 * MIB), {}, 2 * MIB) == 1
    assert acc.largest_accumulate({"pde": 4096, "boundary": 1024}) == 32
    assert acc.largest_accumulate({"pde": 100}) == 1


def test_cache_bytes_from_sysfs(tmp_path):
    def index(i, level, kind, size):
        d = tmp_path / f"index{i}"
        d.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (d / name).write_text(text + "\n")

    assert acc.cache_bytes(tmp_path) is None
    index(0, "1", "Data", "48K")
    index(1, "1", "Instruction", "32K")
    assert acc.cache_bytes(tmp_path) is None
    index(2, "2", "Unified", "2048K")
    index(3, "3", "Unified", "307200K")
    assert acc.cache_bytes(tmp_path) == 2 * MIB
    assert acc.cache_bytes(tmp_path / "missing") is None


def test_auto_trains_the_losses_of_one_batch(monkeypatch):
    """With a cache small enough that auto splits the tiny config (pde 256, boundary 64
    points: K = 2 by the 128-point rule), the run is the explicit K's program to the bit
    and one batch's losses to float32 rounding; with this machine's cache it stays 1."""
    cfg = load_config(SOFT, ["train.steps=10", "train.chunk=5", "train.log_every=1"])

    def losses(k):
        res = fit(build_run(cfg, mesh=make_mesh(1)), progress=False, accumulate=k)
        return res.accumulate, np.array([h["loss"] for h in res.history if "loss" in h])

    k_auto, auto = losses("auto")  # the real cache: a 0.3 MiB step stays whole
    assert k_auto == 1
    monkeypatch.setattr(acc, "cache_bytes", lambda: 1024)
    k_auto, auto = losses("auto")
    assert k_auto == 2
    k1, one = losses(1)
    np.testing.assert_array_equal(auto, losses(2)[1])
    np.testing.assert_allclose(auto, one, rtol=2e-6)
    assert len(auto) == 10


def test_auto_in_configs_and_the_memory_plan():
    base = {"network": {"width": 32, "depth": 3}, "sampler": {"batch": {"pde": 4096, "boundary": 1024}},
            "optim": {"phases": [{"kind": "adam"}]}, "eval": {"batch": 256}}
    cfg = from_dict(dict(base, train={"steps": 10, "chunk": 10, "accumulate": "auto"}))
    assert cfg.train.accumulate == "auto"
    with pytest.raises(ConfigError, match="train.accumulate"):
        from_dict(dict(base, train={"accumulate": "fast"}))
    one = from_dict(dict(base, train={"steps": 10, "chunk": 10}))
    problem = build_problem(one)
    low = {p.what: p.bytes for p in memplan.lower_bounds(one, problem, 1)}
    low_auto = {p.what: p.bytes for p in memplan.lower_bounds(cfg, problem, 1)}
    # a lower bound: auto may take up to 32 micro-batches here
    assert low_auto["activations of term 'pde'"] == low["activations of term 'pde'"] / 32


def test_dry_run_plan_and_command_line(monkeypatch):
    """``--dry-run`` (`plan`) reports the K that training would take; the command line
    takes ``--accumulate auto`` and refuses other words with one line."""
    import argparse

    from pinnkit.cli.main import _accumulate_arg

    cfg = load_config(SOFT, [])
    monkeypatch.setattr(acc, "cache_bytes", lambda: 1024)
    info = plan(build_run(cfg, mesh=make_mesh(1)), accumulate="auto")
    assert info["accumulate"] == 2 and info["micro_batch"] == {"boundary": 32, "pde": 128}
    assert _accumulate_arg("auto") == "auto" and _accumulate_arg("4") == 4
    with pytest.raises(argparse.ArgumentTypeError, match="integer >= 1 or 'auto'"):
        _accumulate_arg("fast")
