"""Errors against the reference solution on an evaluation grid.

For each field $u$: relative $L^2$ error $\\|u - u^*\\|_2 / \\|u^*\\|_2$ over the grid points
(the absolute RMS error when $u^*$ is zero to rounding, `relative_errors`) and $L^\\infty$
error $\\max |u - u^*|$. Fields with a gauge (``problem.gauge``: pressure) are compared
less their means over the same points: one mean (``mean``) or the spatial mean at each
time (``mean_per_time``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from ..nn.evaluate import _jacobians as _jacobians
from ..nn.evaluate import _values as _values
from ..nn.evaluate import predict as predict  # moved to pinnkit.nn.evaluate; path kept one release
from ..parallel.mesh import gauge_groups, gauge_of, relative_errors
from ..physics.problem import Problem


class Predictor:
    """The trained network as a numpy function of points, what `Problem.metrics` receives.

    ``predictor(points (n, dim)) -> (n, m)`` values (`predict`), and
    ``predictor.jacobian(points) -> (n, m, dim)``, $\\partial y_i/\\partial x_j$ by `jax.jacfwd`
    (exact derivatives for forces and fluxes; float64 when ``dtype`` is).
    ``predictor.coeffs``: the problem's scalar coefficients, physical values as floats (the
    trained ones where learnt, e.g. a shedding frequency; default: none).
    """

    def __init__(self, fn: Callable, batch: int = 16384, dtype=jnp.float32,
                 coeffs: dict[str, float] | None = None):
        self.fn, self.batch, self.dtype = fn, batch, dtype
        self.coeffs = dict(coeffs or {})

    def __call__(self, points: np.ndarray) -> np.ndarray:
        return predict(self.fn, np.asarray(points), self.batch, self.dtype)

    def jacobian(self, points: np.ndarray) -> np.ndarray:
        return predict(self.fn, np.asarray(points), self.batch, self.dtype, jacobian=True)


def field_errors(problem: Problem, pred: np.ndarray, ref: np.ndarray,
                 points: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """``{"rel_l2": {field: e}, "linf": {field: e}}`` from ``(n, m)`` predictions/references
    at ``points`` (needed only for a ``mean_per_time`` gauge), fields with a gauge compared
    less their means; ``rel_l2`` also of each of `Problem.vectors` as a whole."""
    gauge = gauge_of(getattr(problem, "gauge_map", None) or problem.mean_free)
    level = None
    if "mean_per_time" in gauge.values():
        level, _ = gauge_groups(problem, points)
    num, den, linf = [], [], {}
    for i, name in enumerate(problem.out_names):
        p = pred[:, i].astype(np.float64)
        r = ref[:, i].astype(np.float64)
        if gauge.get(name) == "mean_per_time":
            for k in np.unique(level):
                at = level == k
                p[at], r[at] = p[at] - p[at].mean(), r[at] - r[at].mean()
        elif name in gauge:
            p, r = p - p.mean(), r - r.mean()
        diff = p - r
        num.append(np.sum(diff**2))
        den.append(np.sum(r**2))
        linf[name] = float(np.max(np.abs(diff)))
    return {"rel_l2": relative_errors(problem.out_names, num, den, pred.shape[0], problem.vectors),
            "linf": linf}


def evaluate(network, problem: Problem, resolution: int = 101, batch: int = 16384, dtype=jnp.float32):
    """Errors of ``network`` against ``problem.reference`` on the bounding-box grid (its
    points in the domain, for a shape that does not fill its box).

    **Returns:** ``(errors, grid)`` where ``grid`` holds ``points``, ``shape``,
    ``pred`` and ``ref`` arrays for plotting; ``errors`` is empty if there is no
    reference.
    """
    pts, shape = problem.domain.grid(resolution)
    pred = predict(network, pts, batch, dtype)
    grid = {"points": pts, "shape": shape, "pred": pred, "ref": None}
    if problem.reference is None:
        return {}, grid
    ref = predict(problem.reference, pts, batch, dtype)
    grid["ref"] = ref
    inside = problem.error_mask(pts)  # shapes: errors over the grid points in the domain
    if inside is not None:
        return field_errors(problem, pred[inside], ref[inside], pts[inside]), grid
    return field_errors(problem, pred, ref, pts), grid
