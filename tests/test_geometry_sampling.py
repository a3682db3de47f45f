"""Shapes in the sampler: fixed sets (host rejection) identical for 1, 2, 4 devices;
per-step uniform / Sobol candidates selected inside shard_map land on their pieces."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train.loop import RESULTS, fit, point_arrays

CFG = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "expr_poisson_hole.yaml"
SOFT = ["network.hard_constraint=false", "sampler.batch={pde: 256, outer: 128, hole: 64}"]


def _cfg(*over):
    return load_config(CFG, [*SOFT, *over])


def test_fixed_sets_same_history_on_one_two_four_devices():
    """Host-drawn sets do not depend on the device count: the same global means up to
    float32 reduction order (rtol 1e-5, as for boxes in test_train)."""
    cfg = _cfg("train.steps=40")
    hist = {}
    for n in (1, 2, 4):
        res = fit(build_run(cfg, mesh=make_mesh(n)), progress=False)
        hist[n] = np.array([[h["loss"], *h["terms"].values()] for h in res.history])
    np.testing.assert_allclose(hist[2], hist[1], rtol=1e-5)
    np.testing.assert_allclose(hist[4], hist[1], rtol=1e-5)


@pytest.mark.parametrize("method", ["uniform", "sobol"])
def test_per_step_points_lie_on_their_pieces(method):
    run = build_run(_cfg("sampler.resample=true", f"sampler.method={method}"), mesh=make_mesh(4))
    dom, arrays = run.problem.domain, point_arrays(run)

    def per_device(key, arrays):
        return run.sampler.local_batch(key, run.problem, arrays, 4, run.dtype)

    draw = jax.jit(jax.shard_map(per_device, mesh=run.mesh, in_specs=(P(), P("data")), out_specs=P("data")))
    for step in range(2):
        b = draw(jax.random.key(step), arrays)
        assert b["pde"].shape == (256, 2) and b["hole"].shape == (64, 2) and b["outer"].shape == (128, 2)
        assert float(jnp.max(jax.vmap(dom.sdf)(b["pde"]))) < 0
        np.testing.assert_allclose(jnp.hypot(b["hole"][:, 0] - 0.3, b["hole"][:, 1] - 0.2), 0.4, rtol=1e-5)
        edge = jnp.max(jnp.abs(b["outer"]), axis=1)
        np.testing.assert_allclose(edge, 1.0, rtol=1e-6)
        # four devices, four different shards: no point repeats
        assert len(np.unique(np.asarray(b["pde"]), axis=0)) == 256
    assert not np.allclose(draw(jax.random.key(0), arrays)["pde"], draw(jax.random.key(1), arrays)["pde"])


@pytest.mark.parametrize("method", ["uniform", "sobol"])
def test_resampling_on_two_devices_learns(method):
    cfg = _cfg("train.steps=150", "sampler.resample=true", f"sampler.method={method}")
    res = fit(build_run(cfg, mesh=make_mesh(2)), progress=False)
    losses = [h["loss"] for h in res.history]
    assert res.result is RESULTS.successful and losses[-1] < losses[0] / 5


def test_acceptances_in_one_program_equal_one_by_one_and_work_while_tracing():
    """The Monte Carlo acceptances of all pieces come from one compiled program; each must
    be the figure of its own one-piece estimate (the counts are exact integers), and a
    shape asked for one inside an outer `jit` trace still gets a concrete number."""
    from pinnkit.geometry.config import build_shape
    from pinnkit.geometry.rejection import estimate_acceptance, estimate_acceptances

    spec = {"union": [{"disk": {"center": [0.1 * i, 0.05 * (i % 2)], "radius": 0.08, "name": f"d{i}"}}
                      for i in range(4)]}
    shape = build_shape(spec, "domain", None, None, _features=[])
    pieces = [pc for pc in shape.pieces() if pc != "boundary"]
    together = estimate_acceptances(shape, pieces)
    for pc in pieces:
        assert together[pc] == estimate_acceptance(shape, pc)
    assert 0.0 < together["d1"] < 1.0  # trimmed by both neighbours: a real estimate
    fresh = build_shape(spec, "domain", None, None, _features=[])
    got = jax.jit(lambda x: x * fresh.acceptance("d1"))(1.0)
    assert float(got) == pytest.approx(together["d1"], rel=1e-6)
