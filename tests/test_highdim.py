"""d-dimensional ball (`pinnkit.geometry.hyperball.HyperBall`) and the high-dimensional
problems (`pinnkit.problems.highdim`).

- uniform in the ball in any d: the radius law P(r <= rho) = rho^d (Kolmogorov–Smirnov
  on r^d, 20000 points, p > 1e-4: a false alarm once in 10^4 runs), the direction's
  second moments E[x_i^2] = E[r^2]/d, and the boundary on the sphere;
- weighted interior points (``sample_power`` p): r^2 ~ Beta(d/2, p + 1) (the same KS test
  on scipy's I_{r^2}(d/2, p + 1)), isotropic; the Beta quantile against scipy's
  (float64: 1e-12 in t; float32: I_t within 4 (a + b) eps of q, t**a turning t's rounding
  eps into a eps), also inside `jax.shard_map` (where training draws points);
- the problems' exact solution zeroes the PDE residual (float64; the closed-form source
  against nested reverse mode at d = 5, and the Taylor engine at d = 40), a perturbed one
  does not, and the hard constraint makes u = 0 on the sphere.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
import scipy.stats
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from pinnkit.diffops import Autodiff, Taylor
from pinnkit.geometry.hyperball import HyperBall, beta_quantile
from pinnkit.problems import PROBLEMS
from pinnkit.problems.highdim import _setup


@pytest.mark.parametrize("d", [2, 7, 100, 1000])
def test_ball_is_uniform(d):
    ball = HyperBall(d, radius=2.0, center=np.linspace(-1, 1, d))
    n = 20000
    x = np.asarray(ball.sample(jax.random.key(d), n), np.float64) - np.asarray(ball.center)
    r = np.linalg.norm(x, axis=1) / 2.0
    assert r.max() <= 1.0 + 1e-6
    assert scipy.stats.kstest(r**d, "uniform").pvalue > 1e-4
    # E[x_i^2] = E[|x|^2] / d for each coordinate (isotropy); 5 standard errors
    second = x**2 / np.mean(np.sum(x**2, axis=1)) * d
    assert np.all(np.abs(second.mean(0) - 1.0) < 5 * second.std(0) / np.sqrt(n))
    s = np.asarray(ball.sample(jax.random.key(1), 1000, "boundary"), np.float64) - np.asarray(ball.center)
    np.testing.assert_allclose(np.linalg.norm(s, axis=1), 2.0, rtol=1e-6)
    y = ball.center + s[0]
    np.testing.assert_allclose(ball.normal(jnp.asarray(y), "boundary"), s[0] / 2.0, rtol=1e-5, atol=1e-6)
    assert bool(ball.contains(jnp.asarray(y))) and not bool(ball.contains(jnp.asarray(y + 0.01 * s[0])))


@pytest.mark.parametrize(("d", "p"), [(2, 1), (7, 2), (100, 2), (1000, 3)])
def test_weighted_ball_radius_law(d, p):
    ball = HyperBall(d, radius=2.0, center=np.linspace(-1, 1, d), sample_power=p)
    n = 20000
    x = np.asarray(ball.sample(jax.random.key(d + p), n), np.float64) - np.asarray(ball.center)
    t = np.sum(x**2, axis=1) / 4.0  # r^2 of the unit ball
    assert t.max() <= 1.0 + 1e-6
    law = scipy.special.betainc(d / 2, p + 1, np.minimum(t, 1.0))  # uniform if r^2 ~ Beta(d/2, p+1)
    assert scipy.stats.kstest(law, "uniform").pvalue > 1e-4
    # the weight moves points inwards: E[1 - r^2] = (p + 1)/(d/2 + p + 1), not 1/(d/2 + 1)
    mean, se = np.mean(1 - t), np.std(1 - t) / np.sqrt(n)
    assert abs(mean - (p + 1) / (d / 2 + p + 1)) < 5 * se
    second = x**2 / np.mean(np.sum(x**2, axis=1)) * d
    assert np.all(np.abs(second.mean(0) - 1.0) < 5 * second.std(0) / np.sqrt(n))


@pytest.mark.parametrize(("a", "b"), [(1.0, 1), (1.5, 2), (50.0, 3), (500.0, 3), (3.5, 6)])
def test_beta_quantile_matches_scipy(x64, a, b):
    q = np.linspace(0.0, 1.0 - 1e-6, 1001)
    ref = scipy.special.betaincinv(a, b, q)
    np.testing.assert_allclose(np.asarray(beta_quantile(a, b, jnp.asarray(q))), ref, rtol=0, atol=1e-12)
    # float32: the backward error (the forward one is that / the density, unbounded at q -> 1)
    q32 = q.astype(np.float32)
    got32 = np.asarray(beta_quantile(a, b, jnp.asarray(q32)))
    assert got32.dtype == np.float32
    back = scipy.special.betainc(a, b, got32.astype(np.float64)) - q32
    # t**a has the relative error a * eps of t's rounding: the bound grows with a
    assert np.abs(back).max() < 4 * (a + b) * np.finfo(np.float32).eps


def test_weighted_ball_samples_inside_shard_map():
    ball = HyperBall(100, sample_power=2)
    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    draw = jax.shard_map(lambda k: ball.sample(k, 64), mesh=mesh, in_specs=P(), out_specs=P("data"))
    x = np.asarray(jax.jit(draw)(jax.random.key(0)))  # the same points, to float32 rounding
    np.testing.assert_allclose(x, np.asarray(ball.sample(jax.random.key(0), 64)), rtol=0, atol=1e-6)


def test_ball_grid_and_errors():
    pts, shape = HyperBall(50).grid(11)
    assert pts.shape == (121, 50) and shape == (121,) and np.all(np.linalg.norm(pts, axis=1) <= 1.0)
    with pytest.raises(ValueError, match="dimension"):
        HyperBall(0)
    with pytest.raises(ValueError, match="radius"):
        HyperBall(3, radius=-1.0)
    for bad in (-1, 1.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="sample_power must be an integer >= 0"):
            HyperBall(3, sample_power=bad)
    with pytest.raises(ValueError, match="integer b >= 1"):
        beta_quantile(2.0, 0, jnp.zeros(3))


def _residual(problem, fn, method, n=16):
    pts = problem.domain.sample(jax.random.key(0), n, "interior", jnp.float64)
    pde = problem.without(problem.enforced)  # the boundary term is the hard constraint's
    return np.asarray(pde.residuals(fn, problem.coeffs, {"pde": pts}, method)["pde"])


@pytest.mark.parametrize("name", ["poisson_ball", "allen_cahn_ball"])
@pytest.mark.parametrize("d,method", [(5, Autodiff()), (40, Taylor())])
def test_exact_solution_zeroes_the_residual(x64, name, d, method):
    problem = PROBLEMS[name](dim=d, seed=3)
    exact = problem.reference
    # sources are O(d^1.5) (the -2 d g term, g ~ sqrt(d)); float64 leaves ~1e-13 of that
    scale = d**1.5
    assert np.abs(_residual(problem, exact, method)).max() < 1e-11 * scale
    wrong = lambda x: exact(x) * (1.0 + 0.1 * x[0])  # noqa: E731
    assert np.abs(_residual(problem, wrong, method)).max() > 1e-3
    on_sphere = problem.domain.sample(jax.random.key(2), 8, "boundary", jnp.float64)
    constrained = jax.vmap(lambda x: problem.hard_constraint(x, jnp.ones(1)))(on_sphere)
    np.testing.assert_allclose(constrained, 0.0, atol=1e-14)
    np.testing.assert_allclose(jax.vmap(exact)(on_sphere), 0.0, atol=1e-13 * d)


def _laplacian_numpy(c: np.ndarray, x: np.ndarray) -> float:
    """Δu* term by term (module docstring of `pinnkit.problems.highdim`), float64 numpy:
    the reference for the fused one-sum form that the problems trace."""
    xi, xn = x[:-1], x[1:]
    theta = xi + np.cos(xn) + xn * np.cos(xi)
    a, b = 1.0 - xn * np.sin(xi), np.cos(xi) - np.sin(xn)
    second = -xn * np.cos(xi) - np.cos(xn)
    g = np.sum(c * np.sin(theta))
    lap_g = np.sum(c * (np.cos(theta) * second - np.sin(theta) * (a * a + b * b)))
    x_grad_g = np.sum(c * np.cos(theta) * (xi * a + xn * b))
    return (1.0 - x @ x) * lap_g - 4.0 * x_grad_g - 2.0 * x.shape[0] * g


def test_fused_source_equals_the_term_by_term_one_at_d10000(x64):
    # the traced source is one sum of one elementwise expression (no (points, d)
    # temporary per factor); it must be the same number as the three separate sums.
    # float64, 10^4 terms of size O(d) = 1e4 with cancellation down to |Δu*| ~ d^1.5:
    # round-off ~ 1e4 * 1e4 * 1e-16 = 1e-8 absolute, rtol 1e-12 of the O(1e6) terms' scale
    d = 10000
    domain, sol = _setup(d, seed=1)
    c = np.asarray(sol.c)
    pts = domain.sample(jax.random.key(4), 4, "interior", jnp.float64)
    got = np.asarray(jax.jit(jax.vmap(sol.laplacian))(pts))
    want = np.array([_laplacian_numpy(c, np.asarray(x)) for x in pts])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * 2 * d * np.sqrt(d))


def test_the_old_module_path_gives_the_same_class():
    """`pinnkit.geometry.ball` (renamed `hyperball`, beside round.py's 3-D `Ball`) stays."""
    from pinnkit.geometry import ball

    assert ball.HyperBall is HyperBall and ball.beta_quantile is beta_quantile
