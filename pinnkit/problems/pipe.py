r"""Checks of a flow through a pipe (issue 33's mesh pipe, `scripts/make_meshes.py`
``bent_pipe``): the volume flux through cross-sections and the distance of a section's
profile from Poiseuille's.

A cross-section is the disk of radius $R$ about ``center`` perpendicular to the unit
``normal`` (the centre line's direction there). Its rule (`disk_rule`) is Gauss–Legendre in
the radius (the area element $r\,dr$ included) times the trapezoidal rule in the angle,
as `pinnkit.problems.dfg.annulus_rule` with inner radius 0: exact for the flux of a
profile polynomial in $r$ of degree $2n_r - 2$ and for any angular mode below
$n_\theta$. For incompressible flow with no-slip walls every section carries the inflow's
flux $Q$; far from a bend a steady Stokes or low-Re flow is Poiseuille's,
$u_P(r) = \frac{2Q}{\pi R^2}\,(1 - r^2/R^2)$ along the normal.
"""

from __future__ import annotations

import numpy as np

from .dfg import annulus_rule


def disk_rule(center, normal, radius: float, n_r: int = 16, n_theta: int = 64):
    """Points ``(n_r * n_theta, 3)``, weights (summing to $\\pi R^2$) and radii of the
    cross-section's rule (module docstring)."""
    c = np.asarray(center, np.float64)
    n = np.asarray(normal, np.float64)
    if c.shape != (3,) or n.shape != (3,) or not np.isfinite(c).all() or not np.linalg.norm(n) > 0:
        raise ValueError(f"a pipe section needs a 3-D center and a non-zero 3-D normal: actual "
                         f"center={center!r}, normal={normal!r}")
    if not (np.isfinite(radius) and radius > 0):
        raise ValueError(f"a pipe section's radius must be > 0: actual={radius!r}")
    n = n / np.linalg.norm(n)
    e1 = np.cross(n, np.eye(3)[np.argmin(np.abs(n))])  # any unit vector perpendicular to n
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    pts2, w, r = annulus_rule((0.0, 0.0), 0.0, radius, n_r, n_theta)
    return c[None] + pts2[:, :1] * e1[None] + pts2[:, 1:] * e2[None], w, r


def section_flux(predict, center, normal, radius: float, n_r: int = 16, n_theta: int = 64) -> float:
    """$\\int u\\cdot n\\,dA$ over the cross-section; ``predict(points (n, 3)) -> (n, m)``
    with the velocity in the first three columns."""
    pts, w, _ = disk_rule(center, normal, radius, n_r, n_theta)
    n = np.asarray(normal, np.float64) / np.linalg.norm(normal)
    u = np.asarray(predict(pts), np.float64)[:, :3]
    return float(np.sum(w * (u @ n)))


def poiseuille_error(predict, center, normal, radius: float, n_r: int = 16, n_theta: int = 64) -> float:
    """$\\max |u\\cdot n - u_P(r)| / \\max u_P$ on the section's rule points, $u_P$ the
    Poiseuille profile with the section's own flux (module docstring): 0 for a developed
    flow, whatever its flux."""
    pts, w, r = disk_rule(center, normal, radius, n_r, n_theta)
    n = np.asarray(normal, np.float64) / np.linalg.norm(normal)
    un = np.asarray(predict(pts), np.float64)[:, :3] @ n
    peak = 2 * float(np.sum(w * un)) / (np.pi * radius**2)
    if peak == 0:
        return float("inf") if np.any(un) else 0.0
    return float(np.max(np.abs(un - peak * (1 - (r / radius) ** 2))) / abs(peak))
