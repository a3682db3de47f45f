"""poisson_domain: Poisson on shapes (a hole, a re-entrant corner, a cube minus a ball,
a triangle-mesh torus). The exact solutions zero every term; the tiny configs train."""

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from pinnkit.diffops import Autodiff
from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.build import build_problem, build_run
from pinnkit.run.config import load_config
from pinnkit.run.metrics import evaluate
from pinnkit.train.loop import RESULTS, fit

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny"
NAMES = ["poisson_hole", "poisson_lshape", "poisson_ball_hole", "poisson_mesh"]


@pytest.mark.parametrize("name", NAMES)
def test_exact_solution_zeroes_every_term(name, x64):
    p = build_problem(load_config(TINY / f"{name}.yaml", ["network.hard_constraint=false"]))
    batch = {k: p.domain.sample(jax.random.key(i), 128, t.where, jnp.float64)
             for i, (k, t) in enumerate(sorted(p.terms.items()))}
    res = p.residuals(p.reference, p.coeffs, batch, Autodiff())
    # sources are O(10) (O(r^-1/3) near the L-shape's corner); x64 leaves ~1e-12 of them
    assert all(float(jnp.max(jnp.abs(r))) < 1e-8 for r in res.values()), res
    wrong = lambda x: p.reference(x) * 1.01  # noqa: E731
    assert float(jnp.max(jnp.abs(p.residuals(wrong, p.coeffs, batch, Autodiff())["pde"]))) > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_tiny_config_trains(name):
    run = build_run(load_config(TINY / f"{name}.yaml"), mesh=make_mesh(1))
    before = evaluate(run.network, run.problem, 21)[0]["rel_l2"]["u"]
    res = fit(run, progress=False)
    after = evaluate(res.network, run.problem, 21)[0]["rel_l2"]["u"]
    assert res.result is RESULTS.successful
    # 300 Adam steps of a 16x2 net: the error falls 1.7x (cube minus ball: 1.03 -> 0.61) to
    # 25x (hole); a broken sampler, normal or hard constraint leaves it where it was
    assert after < 0.75 * before, (before, after)


@pytest.mark.trained
def test_corner_enrichment_passes_the_corner_floor(trained):
    """The tiny L-shape (16x2 tanh, 300 Adam steps, float32) with `network.singular`: the
    trainable r^(2/3), r^(4/3) terms carry the corner, so the error falls below what the
    same network reaches without them (rel. L2 0.27 at seed 0: u/phi ~ r^(-1/3) is not
    representable). Measured over seeds 0-2 x default/AVX2/AVX (scripts/trained_margins.py,
    fresh caches): 0.068-0.103 (AVX2 equals default here; AVX differs at seed 0 only);
    bound 0.15: worst margin 1.46x, and 1.8x below the un-enriched 0.27."""
    cfg = load_config(TINY / "poisson_lshape.yaml", [f"train.seed={trained.seed}"])
    run = build_run(cfg, mesh=make_mesh(1))
    res = fit(run, progress=False)
    assert res.result is RESULTS.successful
    trained.check("rel_l2 u", evaluate(res.network, run.problem, 41)[0]["rel_l2"]["u"], "<", 0.15)
