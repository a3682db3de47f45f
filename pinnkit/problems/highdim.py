r"""High-dimensional Poisson and Allen–Cahn problems in the unit ball with exact solutions
(the test problems of SDGD, Hu et al. 2024, and STDE, Shi et al. 2024).

In $B = \{x \in \mathbb{R}^d : \|x\| \le 1\}$, with fixed coefficients $c_i \sim N(0, 1)$
(``seed``),

$$u^*(x) = (1 - \|x\|^2) \sum_{i=1}^{d-1} c_i \sin\theta_i, \qquad
\theta_i = x_i + \cos x_{i+1} + x_{i+1} \cos x_i,$$

which couples neighbouring coordinates (not a sum of one-dimensional functions), and
$u^* = 0$ on the sphere, imposed exactly by the output transform
$u = (1 - \|x\|^2)\, N(x)$ (`BallDirichlet`; ``network.hard_constraint: true``) or as a
loss term. The sources are computed in closed form in $O(d)$ per point (no derivative of
$u^*$ is taken numerically): with $\varphi = 1 - \|x\|^2$, $g = \sum_i c_i \sin\theta_i$,

$$\Delta u^* = \varphi\, \Delta g - 4\, x \cdot \nabla g - 2 d\, g,$$

$$\Delta g = \sum_i c_i \big[\cos\theta_i\, (\partial_{i}^2\theta_i + \partial_{i+1}^2\theta_i)
  - \sin\theta_i\, ((\partial_i\theta_i)^2 + (\partial_{i+1}\theta_i)^2)\big], \quad
x \cdot \nabla g = \sum_i c_i \cos\theta_i\, (x_i \partial_i\theta_i + x_{i+1} \partial_{i+1}\theta_i),$$

$\partial_i\theta_i = 1 - x_{i+1}\sin x_i$, $\partial_{i+1}\theta_i = \cos x_i - \sin x_{i+1}$,
$\partial_i^2\theta_i = -x_{i+1}\cos x_i$, $\partial_{i+1}^2\theta_i = -\cos x_{i+1}$.

- `poisson_ball`: $\Delta u = \Delta u^*$;
- `allen_cahn_ball`: $\Delta u + u - u^3 = \Delta u^* + u^* - (u^*)^3$.

Both residuals are affine in $\Delta u$, so a stochastic Laplacian (``diffops.estimator``)
gives an unbiased residual, and the product of two independent ones an unbiased square.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._types import Point, Scalar
from ..geometry.hyperball import HyperBall
from ..physics.constraints import AbstractHardConstraint
from ..physics.problem import Problem
from ..physics.terms import Dirichlet, Equation


class BallDirichlet(AbstractHardConstraint):
    """The hard constraint $y \\mapsto (1 - \\|x\\|^2)\\, y$: zero on the unit sphere."""

    def __call__(self, x: Point, y):
        # x @ x, not sum(x * x): the Taylor rows' tangents then contract as one product
        # (points x directions) instead of a (points, directions, d) temporary
        return (1.0 - x @ x) * y


class _Solution:
    """$u^*$ and $\\Delta u^*$ (module docstring) for coefficients ``c`` (``d - 1``, numpy:
    constants of the traced functions)."""

    def __init__(self, c: np.ndarray):
        self.c = c

    def _theta(self, x):
        xi, xn = x[:-1], x[1:]
        theta = xi + jnp.cos(xn) + xn * jnp.cos(xi)
        return xi, xn, theta

    def value(self, x: Point) -> Scalar:
        _, _, theta = self._theta(x)
        c = jnp.asarray(self.c, x.dtype)
        return (1.0 - x @ x) * (c @ jnp.sin(theta))

    def laplacian(self, x: Point) -> Scalar:
        xi, xn, theta = self._theta(x)
        c = jnp.asarray(self.c, x.dtype)
        a = 1.0 - xn * jnp.sin(xi)  # d theta / d x_i
        b = jnp.cos(xi) - jnp.sin(xn)  # d theta / d x_{i+1}
        second = -xn * jnp.cos(xi) - jnp.cos(xn)  # the two pure second derivatives
        sin, cos = jnp.sin(theta), jnp.cos(theta)
        phi, d = 1.0 - x @ x, x.shape[0]
        # one sum of one elementwise expression (phi Δg - 4 x·∇g - 2d g, term by term):
        # XLA fuses it into a single pass over the d - 1 terms, with no (points, d - 1)
        # temporary per factor (9 of them at d = 10000 before)
        terms = phi * (cos * second - sin * (a * a + b * b)) - 4.0 * cos * (xi * a + xn * b) - 2.0 * d * sin
        return c @ terms


def _setup(dim: int, seed: int, sample_power: float = 0.0):
    if int(dim) != dim or dim < 2:
        raise ValueError(f"dim must be an integer >= 2 (the solution couples x_i and x_i+1): actual={dim!r}")
    c = np.random.default_rng(seed).standard_normal(int(dim) - 1)
    return HyperBall(int(dim), sample_power=sample_power), _Solution(c)


def _problem(domain, sol, pde, name, description) -> Problem:
    def exact(x):
        return sol.value(x)[None]

    return Problem(
        domain,
        ("u",),
        {"pde": Equation(pde), "boundary": Dirichlet("boundary")},
        reference=exact,
        hard_constraint=BallDirichlet(),
        enforced=("boundary",),
        name=name,
        description=description,
    )


def poisson_ball(dim: int = 100, seed: int = 0, sample_power: float = 0.0) -> Problem:
    """$\\Delta u = \\Delta u^*$ in the unit ball of dimension ``dim``, $u = 0$ on the sphere
    (module docstring); exact solution $u^*$ with coefficients from ``seed``. Interior
    points are drawn with density proportional to (1 - |x|²)^p, p = ``sample_power``
    (`pinnkit.geometry.hyperball`; 0: uniform, 2: where the hard constraint lets the error of
    $u$ show)."""
    domain, sol = _setup(dim, seed, sample_power)

    def pde(f, c):
        return f.laplacian("u") - sol.laplacian(f.point)

    return _problem(domain, sol, pde, "poisson_ball",
                    f"Δu = Δu* in the unit ball of R^{dim}, u* = (1-|x|²) Σ c_i sin(θ_i)")


def allen_cahn_ball(dim: int = 100, seed: int = 0, sample_power: float = 0.0) -> Problem:
    """$\\Delta u + u - u^3 = \\Delta u^* + u^* - (u^*)^3$ in the unit ball of dimension
    ``dim``, $u = 0$ on the sphere (module docstring); ``sample_power`` as `poisson_ball`."""
    domain, sol = _setup(dim, seed, sample_power)

    def pde(f, c):
        u, ue = f["u"], sol.value(f.point)
        return f.laplacian("u") + u - u**3 - (sol.laplacian(f.point) + ue - ue**3)

    return _problem(domain, sol, pde, "allen_cahn_ball",
                    f"Δu + u - u³ = f in the unit ball of R^{dim}, exact u* = (1-|x|²) Σ c_i sin(θ_i)")
