"""Streamed evaluation of large grids: the same errors as one pass, in bounded memory."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.parallel import mesh as mesh_mod
from pinnkit.parallel.mesh import evaluate_sharded, make_mesh
from pinnkit.problems import PROBLEMS


@pytest.mark.parametrize("name", ["poisson2d", "kovasznay"])  # kovasznay: p is mean-free
def test_streamed_errors_equal_one_pass(name, monkeypatch):
    problem = PROBLEMS[name]()
    net = eqx.nn.MLP(2, len(problem.out_names), 8, 1, key=jax.random.key(0))
    mesh = make_mesh(2)
    whole, grid = evaluate_sharded(net, problem, mesh, 41, 64, jnp.float32, grid=True)
    monkeypatch.setattr(mesh_mod, "STREAM_ROWS", 500)  # 1681 points: 4 blocks, the last partial
    streamed, coarse = evaluate_sharded(net, problem, mesh, 41, 64, jnp.float32, grid=True)
    # Same float32 predictions; only the float64 summation order differs.
    for kind in ("rel_l2", "linf"):
        for k, v in whole[kind].items():
            assert streamed[kind][k] == pytest.approx(v, rel=1e-12), (kind, k)
    assert "p" not in problem.mean_free or whole["rel_l2"]["p"] > 0
    # The plotting grid of a streamed evaluation is the coarsest with at most STREAM_ROWS points.
    assert coarse["points"].shape[0] <= 500 < grid["points"].shape[0]
    assert coarse["pred"].shape == (coarse["points"].shape[0], len(problem.out_names))
    np.testing.assert_array_equal(np.isfinite(coarse["pred"]), True)
