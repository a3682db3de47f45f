"""What accuracy can a network whose first layer has k < d units reach on `poisson_ball`?
(issue 19, d = 100: docs/benchmarks.md, "High-dimensional Poisson").

The hard constraint makes $u = (1 - \\lVert x\\rVert^2)\\, N(x)$, and an MLP's first layer
sees $x$ only through $Wx + b$ with $W$ of shape ``(k, d)``: $N(x) = F(Px)$ for the
projection $P$ onto $W$'s row space, so $N$ is constant along $d - k$ directions while
$g = u^*/(1 - \\lVert x\\rVert^2) = \\sum_i c_i \\sin\\theta_i$ is not (its Hessian is
tridiagonal-ish of full rank $d$). Two measurements, float64, rel. L2 of $u$ on points
uniform in the unit ball:

1. least squares of $u^*$ on $(1 - \\lVert x\\rVert^2)\\,f(x)$ for feature sets $f$: affine;
   affine plus the one quadratic $q_r(x) = \\sum_{j \\le r} \\lambda_j (v_j \\cdot x)^2$, the
   Hessian of $g$ at 0 truncated to its ``r`` largest eigenvalues (by modulus); affine
   plus all neighbour quadratics $x_i^2, x_i x_{i+1}$; plus the neighbour cubics; plus the
   quartics. Fitted on ``--points``, measured on as many fresh ones.
2. the floor of *any* function of $Px$ for a ``k``-dimensional $P$ (the span of the
   gradient of $g$ at 0 and the top ``k - 1`` eigenvectors of its Hessian: for the
   quadratic part of $g$ the best such subspace): the best $N$ given $a = Px$ is
   $E[\\varphi^2 g \\mid a] / E[\\varphi^2 \\mid a]$, $\\varphi = 1 - \\lVert x\\rVert^2$, and its
   error $E[\\varphi^2 (g - N)^2]$ is estimated by Monte Carlo: for each of ``--outer``
   points, ``--inner`` fresh draws of the other $d - k$ coordinates (uniform in the ball
   of radius $\\sqrt{1 - \\lVert a\\rVert^2}$ that is left; the conditional mean taken from
   the same draws biases the estimate low by $\\sqrt{(\\text{inner} - 1)/\\text{inner}}$,
   0.8 % at 64). No training is involved: this is a lower bound for every network of
   first-layer width ``k`` with that $P$.

With ``--run DIR`` (a trained `poisson_ball` run) it instead splits that run's error
$e = u - u^*$: least squares of $e$ on the same feature sets, and the part of $e$ each
leaves (rel. to $\\lVert u^* \\rVert$, fresh points): what the network has not learnt yet.

    taskset -c 1 .venv/bin/python scripts/highdim_floor.py [--dim 100] [--widths 32,64,80,96]
    taskset -c 1 .venv/bin/python scripts/highdim_floor.py --run runs/d100
"""

from __future__ import annotations

import argparse

import numpy as np


def ball(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """``n`` points uniform in the unit ball of R^d (Gaussian direction, radius U^(1/d))."""
    z = rng.standard_normal((n, d))
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    return z * rng.random((n, 1)) ** (1.0 / d)


class Target:
    """$g$ of `pinnkit.problems.highdim` in numpy, its gradient and Hessian at 0."""

    def __init__(self, d: int, seed: int):
        self.c = np.random.default_rng(seed).standard_normal(d - 1)  # as highdim._setup
        # at 0: theta_i = 1, d theta_i / d(x_i, x_i+1) = (1, 1), second derivatives
        # diag(0, -1), mixed 0 (module docstring of pinnkit/problems/highdim.py)
        self.grad, self.hess = np.zeros(d), np.zeros((d, d))
        block = np.cos(1.0) * np.diag([0.0, -1.0]) - np.sin(1.0) * np.ones((2, 2))
        for i, ci in enumerate(self.c):
            self.grad[i:i + 2] += ci * np.cos(1.0)
            self.hess[i:i + 2, i:i + 2] += ci * block

    def __call__(self, x: np.ndarray) -> np.ndarray:
        xi, xn = x[..., :-1], x[..., 1:]
        return np.sin(xi + np.cos(xn) + xn * np.cos(xi)) @ self.c


def check_against_pinnkit(target: Target, x: np.ndarray, seed: int) -> None:
    """The numpy $u^*$ equals the problem's reference (float32 JAX: rtol 1e-5)."""
    import jax.numpy as jnp

    from pinnkit.problems.highdim import _setup

    _, sol = _setup(x.shape[1], seed)
    ref = np.array([float(sol.value(jnp.asarray(p, jnp.float32))) for p in x])
    mine = (1.0 - np.sum(x * x, axis=1)) * target(x)
    np.testing.assert_allclose(mine, ref, rtol=1e-5, atol=1e-6)


def feature_floors(target: Target, rng, n: int, network=None) -> None:
    """Least squares on the feature sets of $u^*$, or with ``network`` (points -> u) of
    its error $u - u^*$; the error left, rel. to $u^*$, on fresh points."""
    d = target.c.shape[0] + 1
    lam, vec = np.linalg.eigh(target.hess)
    order = np.argsort(-np.abs(lam))
    lam, vec = lam[order], vec[:, order]
    train, test = ball(rng, n, d), ball(rng, n, d)

    def aff(x):
        return np.hstack([np.ones((len(x), 1)), x])

    def quad(x):
        return np.hstack([x**2, x[:, :-1] * x[:, 1:]])

    def cubic(x):
        return np.hstack([x**3, x[:, :-1] ** 2 * x[:, 1:], x[:, :-1] * x[:, 1:] ** 2])

    def quartic(x):
        a, b = x[:, :-1], x[:, 1:]
        return np.hstack([x**4, a**3 * b, a**2 * b**2, a * b**3])

    sets = {"affine": aff}
    for r in (32, 64, d):
        sets[f"affine + q_{r} (Hessian at 0, rank {r})"] = (
            lambda x, r=r: np.hstack([aff(x), ((x @ vec[:, :r]) ** 2 @ lam[:r])[:, None]]))
    sets["affine + neighbour quadratics"] = lambda x: np.hstack([aff(x), quad(x)])
    sets["... + neighbour cubics"] = lambda x: np.hstack([aff(x), quad(x), cubic(x)])
    sets["... + neighbour quartics"] = lambda x: np.hstack([aff(x), quad(x), cubic(x), quartic(x)])

    def u(x):
        return (1.0 - np.sum(x * x, axis=1)) * target(x)

    def y(x):  # what is fitted
        return u(x) if network is None else network(x) - u(x)

    what = "rel. L2 of u" if network is None else "the network's error left when they are removed, rel. to u*"
    print(f"| features | count | {what} (fresh points) |\n|---|---|---|")
    if network is not None:
        print(f"| none | 0 | {np.linalg.norm(y(test)) / np.linalg.norm(u(test)):.2e} |")
    for name, f in sets.items():
        a = (1.0 - np.sum(train**2, axis=1))[:, None] * f(train)
        w = np.linalg.lstsq(a, y(train), rcond=None)[0]
        b = (1.0 - np.sum(test**2, axis=1))[:, None] * f(test)
        err = np.linalg.norm(b @ w - y(test)) / np.linalg.norm(u(test))
        print(f"| {name} | {a.shape[1]} | {err:.2e} |", flush=True)


def projection_floor(target: Target, rng, k: int, outer: int, inner: int) -> float:
    d = target.c.shape[0] + 1
    lam, vec = np.linalg.eigh(target.hess)
    vec = vec[:, np.argsort(-np.abs(lam))]
    basis = np.linalg.qr(np.hstack([target.grad[:, None], vec[:, :k - 1]]))[0]  # (d, k)
    rest = np.linalg.qr(np.hstack([basis, rng.standard_normal((d, d - k))]))[0][:, k:]
    a = ball(rng, outer, d) @ basis  # the projections Px of uniform points
    num = den = 0.0
    for start in range(0, outer, 100):
        aj = a[start:start + 100]
        radius = np.sqrt(np.maximum(1.0 - np.sum(aj**2, axis=1), 0.0))
        other = ball(rng, len(aj) * inner, d - k).reshape(len(aj), inner, d - k) * radius[:, None, None]
        x = aj[:, None, :] @ basis.T + other @ rest.T  # (m, inner, d): same Px, fresh rest
        phi, g = 1.0 - np.sum(x**2, axis=-1), target(x)
        best = np.sum(phi**2 * g, axis=1) / np.sum(phi**2, axis=1)
        num += np.sum(phi**2 * (g - best[:, None]) ** 2)
        den += np.sum((phi * g) ** 2)
    return float(np.sqrt(num / den))


def split_run_error(run_dir: str, n: int) -> int:
    from pinnkit.run.rundir import load_run

    data = load_run(run_dir)
    problem = data.config.problem
    if problem.name != "poisson_ball":
        raise SystemExit(f"--run {run_dir}: expected a poisson_ball run, found {problem.name!r}")
    params = dict(problem.params or {})
    dim, seed = int(params.get("dim", 100)), int(params.get("seed", 0))
    target = Target(dim, seed)
    rng = np.random.default_rng(1)
    check_against_pinnkit(target, ball(rng, 8, dim), seed)
    feature_floors(target, rng, n, network=lambda x: np.asarray(data.predict(x), np.float64).reshape(-1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="the problem's seed (its coefficients)")
    ap.add_argument("--widths", default="32,64,80,96", help="first-layer widths k < dim")
    ap.add_argument("--points", type=int, default=20000, help="least-squares fit and test points")
    ap.add_argument("--outer", type=int, default=4000, help="projections Px per width")
    ap.add_argument("--inner", type=int, default=64, help="fresh draws of the rest per Px")
    ap.add_argument("--run", help="a trained poisson_ball run folder: split its error instead")
    args = ap.parse_args()
    if args.run:
        return split_run_error(args.run, args.points)
    widths = [int(v) for v in args.widths.split(",")]
    if not all(1 <= k < args.dim for k in widths):
        ap.error(f"--widths: each k must be in [1, dim - 1] = [1, {args.dim - 1}]: actual={widths}")
    rng = np.random.default_rng(1)
    target = Target(args.dim, args.seed)
    check_against_pinnkit(target, ball(rng, 8, args.dim), args.seed)
    feature_floors(target, rng, args.points)
    print("\n| first-layer width k | floor of any N(Px), rel. L2 of u |\n|---|---|")
    for k in widths:
        floor = projection_floor(target, rng, k, args.outer, args.inner)
        print(f"| {k} | {floor:.2e} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
