"""Ghia, Ghia & Shin (1982), J. Comput. Phys. 48:387: the lid-driven cavity's centreline
velocities (Table I: $u$ on the vertical line $x = 0.5$; Table II: $v$ on the horizontal
line $y = 0.5$) for Re = 100, 400 and 1000, and the deviation of a solution from them
(the cavity has no full-field reference: `pinnkit.problems.cavity`)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

# Re = 100 as in the benchmark P4; Re = 400 and 1000 as printed in the paper.
GHIA_Y = np.array([1.0, 0.9766, 0.9688, 0.9609, 0.9531, 0.8516, 0.7344, 0.6172, 0.5, 0.4531,
                   0.2813, 0.1719, 0.1016, 0.0703, 0.0625, 0.0547, 0.0])
GHIA_X = np.array([1.0, 0.9688, 0.9609, 0.9531, 0.9453, 0.9063, 0.8594, 0.8047, 0.5, 0.2344,
                   0.2266, 0.1563, 0.0938, 0.0781, 0.0703, 0.0625, 0.0])
GHIA_U = {
    100: np.array([1.0, 0.84123, 0.78871, 0.73722, 0.68717, 0.23151, 0.00332, -0.13641, -0.20581,
                   -0.21090, -0.15662, -0.10150, -0.06434, -0.04775, -0.04192, -0.03717, 0.0]),
    400: np.array([1.0, 0.75837, 0.68439, 0.61756, 0.55892, 0.29093, 0.16256, 0.02135, -0.11477,
                   -0.17119, -0.32726, -0.24299, -0.14612, -0.10338, -0.09266, -0.08186, 0.0]),
    1000: np.array([1.0, 0.65928, 0.57492, 0.51117, 0.46604, 0.33304, 0.18719, 0.05702, -0.06080,
                    -0.10648, -0.27805, -0.38289, -0.29730, -0.22220, -0.20196, -0.18109, 0.0]),
}
GHIA_V = {
    100: np.array([0.0, -0.05906, -0.07391, -0.08864, -0.10313, -0.16914, -0.22445, -0.24533,
                   0.05454, 0.17527, 0.17507, 0.16077, 0.12317, 0.10890, 0.10091, 0.09233, 0.0]),
    # x = 0.9063 (NaN): the paper prints -0.23827, which is not monotone between its
    # neighbours (-0.22847, -0.44993) and ~15% off grid-converged solutions (~-0.388);
    # left out rather than guessed.
    400: np.array([0.0, -0.12146, -0.15663, -0.19254, -0.22847, np.nan, -0.44993, -0.38598,
                   0.05186, 0.30174, 0.30203, 0.28124, 0.22965, 0.20920, 0.19713, 0.18360, 0.0]),
    1000: np.array([0.0, -0.21388, -0.27669, -0.33714, -0.39188, -0.51550, -0.42665, -0.31966,
                    0.02526, 0.32235, 0.33075, 0.37095, 0.32627, 0.30353, 0.29012, 0.27485, 0.0]),
}


def ghia_points() -> tuple[np.ndarray, np.ndarray]:
    """``(points_u, points_v)``: the Ghia sample points $(0.5, y_i)$ and $(x_i, 0.5)$, ``(17, 2)``."""
    pu = np.stack([np.full_like(GHIA_Y, 0.5), GHIA_Y], axis=1)
    pv = np.stack([GHIA_X, np.full_like(GHIA_X, 0.5)], axis=1)
    return pu, pv


def ghia_deviation(run_or_network, Re: float | None = None) -> dict[str, float]:
    r"""Maximum absolute deviation of a cavity solution from Ghia et al.'s centreline data.

    **Arguments:**
    - `run_or_network`: a `pinnkit.RunData` (from `pinnkit.load_run`), or any pointwise
      callable ``(x, y) -> (u, v, ...)`` (a trained `Network`, a reference function).
    - `Re`: 100, 400 or 1000; default: the run's ``problem.params.Re``.

    **Returns:** ``{"u": max_i |u(0.5, y_i) - u_i|, "v": max_i |v(x_i, 0.5) - v_i|,
    "max": the larger}`` (points the tables leave out, NaN, are skipped).
    """
    from ..nn.evaluate import predict

    if hasattr(run_or_network, "predict"):
        run = run_or_network
        names = run.problem.out_names
        Re = float(run.config.problem.params.get("Re", 100.0)) if Re is None else Re
        evaluate = run.predict
    else:
        names = getattr(run_or_network, "out_names", ("u", "v"))
        dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
        evaluate = functools.partial(predict, run_or_network, dtype=dtype)
        Re = 100.0 if Re is None else Re
    key = int(round(Re))
    if key not in GHIA_U or abs(Re - key) > 1e-9:
        raise ValueError(f"Ghia et al.'s tables cover Re = {sorted(GHIA_U)}: actual Re={Re}")
    pu, pv = ghia_points()
    u = evaluate(pu)[:, names.index("u")]
    v = evaluate(pv)[:, names.index("v")]
    du = float(np.nanmax(np.abs(u - GHIA_U[key])))
    dv = float(np.nanmax(np.abs(v - GHIA_V[key])))
    return {"u": du, "v": dv, "max": max(du, dv)}
