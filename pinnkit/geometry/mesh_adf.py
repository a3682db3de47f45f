"""A smooth approximate distance function (ADF) for triangle meshes, for hard constraints.

A mesh's exact distance has kinks on its medial axis, and a point's distance is decided
by whichever triangle is nearest, so it cannot carry a hard Dirichlet constraint. The
ADF here blends smooth per-triangle ADFs over the triangles near the point:

- triangle $i$ (unit normal $n_i$, vertex $a_i$, inward in-plane edge normals $m_{ik}$
  through edge points $b_{ik}$): level $f_i = n_i\\cdot(x - a_i)$ and trimming
  $t_i = e_{i1} \\wedge e_{i2} \\wedge e_{i3}$, $e_{ik} = m_{ik}\\cdot(x - b_{ik})$
  (R-conjunction, $t_i \\ge 0$ exactly on the triangle), and
  $\\phi_i = $ `pinnkit.geometry.distance.trimmed` $(f_i, t_i)$ (Sukumar & Srivastava
  2022): zero on the triangle only, $\\approx |f_i|$ next to it;
- the blend is the inverse-distance (Shepard) mean of the planes' signed distances
  $-f_i$ (positive inside) with a smooth cut-off:

$$\\phi(x) = \\frac{-\\sum_i w_i \\phi_i^{-q} f_i + R^{1-q}}{\\sum_i w_i \\phi_i^{-q} + R^{-q}},
\\qquad w_i = \\big(1 - |x - g_i|^2/\\rho_i^2\\big)_+^3,\\quad \\rho_i = R + r_i,$$

with $g_i$ the centroid, $r_i$ its largest vertex distance and $q = 2$. $\\phi = 0$
exactly on the surface (value exact, derivatives 0 there, as in
`pinnkit.geometry.distance`), $\\phi = R$ farther than $R + r_i$ from every triangle, and
next to triangle $j$, $\\phi = -f_j + O(\\phi_j^{q})$: normalised to first order
($\\partial\\phi/\\partial n = -1$). The per-triangle ADFs only weigh; the values are the
planes' distances, so coplanar triangles give exactly the plane's distance (no ripple
over a finely tessellated face, unlike the R-equivalence of `pinnkit.geometry.distance`,
which gives $\\approx h/k$ above a vertex shared by $k$ triangles, or a mean of the
$\\phi_i$, whose Laplacian grows like $1/h$ at height $h$ above a tessellated plane).
$\\phi > 0$ inside wherever the nearest triangles' planes have $x$ on their inner side,
which fails only where a triangle whose plane $x$ is outside of outweighs the nearer
ones (near strongly re-entrant edges; checked on the torus's saddles in the tests).
$\\phi$ is $C^2$ in $x$ away from the surface except on the lines through each vertex
along its triangles' normals (where the R-conjunction of two edge functions has its
kink: second derivatives grow like $1/r$ with the distance $r$ to such a line,
integrable, as at a polygon's corner).

In the step: the triangles with $w_i > 0$ at $x$ are read from a table over a uniform
grid of cells (cell size $R/2$): a cell lists every triangle with
$|c - g_i| \\le \\rho_i + h$ ($c$ its centre, $h$ its half-diagonal), which holds every
triangle whose weight is non-zero somewhere in the cell, so the blend is the same
function in every cell (smooth across cells). The cost per point is one gather and
$K$ triangle ADFs, $K$ the longest list; building it refuses tables of more than
`MAX_PER_CELL` triangles per cell or `MAX_CELLS` cells (`pinnkit.errors.ConfigError`, one
paragraph: lower ``adf_radius``).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..errors import ConfigError
from .rfunctions import r_and, trimmed

Q = 2  # the blend's exponent (first-order normalisation needs q > 1; larger q is min-like)
Q_FAR = 2  # the far value's: a gentle saturation towards R (curvature ~ 2/R, not q/R)
MAX_PER_CELL = 1024  # triangles gathered per point (memory and time: points x K per step)
MAX_CELLS = 1 << 20


class MeshADF:
    """The ADF of a closed triangle soup ``triangles`` (T, 3, 3) with cut-off radius
    ``radius`` (module docstring). Host arrays; `__call__` is traced into the step."""

    def __init__(self, triangles: np.ndarray, radius: float):
        from scipy.spatial import cKDTree

        tri = np.asarray(triangles, np.float64)
        a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
        n = np.cross(b - a, c - a)
        n /= np.linalg.norm(n, axis=1, keepdims=True)
        # inward in-plane normal of edge k (from vertex k to k+1): n x (edge direction)
        edges = np.stack([b - a, c - b, a - c], 1)
        m = np.cross(n[:, None, :], edges)
        m /= np.linalg.norm(m, axis=2, keepdims=True)
        g = tri.mean(1)
        r = np.linalg.norm(tri - g[:, None, :], axis=2).max(1)
        self.radius = R = float(radius)
        rho = R + r
        lo, hi = tri.reshape(-1, 3).min(0), tri.reshape(-1, 3).max(0)
        size = R / 2
        cells = np.maximum(1, np.ceil((hi - lo) / size)).astype(int)
        if int(np.prod(cells)) > MAX_CELLS:
            raise ConfigError(self._refusal(f"{int(np.prod(cells)):,} grid cells (at most {MAX_CELLS:,})"))
        half = 0.5 * size * math.sqrt(3)
        axes = [lo[k] + size * (np.arange(cells[k]) + 0.5) for k in range(3)]
        centres = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
        lists = cKDTree(g).query_ball_point(centres, float(rho.max() + half))
        lists = [np.asarray(li, np.int64) for li in lists]
        lists = [li[np.linalg.norm(centres[k] - g[li], axis=1) <= rho[li] + half] if len(li) else li
                 for k, li in enumerate(lists)]
        width = max(1, max(len(li) for li in lists))
        if width > MAX_PER_CELL:
            raise ConfigError(self._refusal(f"{width} triangles within reach of one cell (at most "
                                           f"{MAX_PER_CELL})"))
        table = np.full((len(lists), width), len(tri), np.int32)  # padding: a zero-weight entry
        for k, li in enumerate(lists):
            table[k, :len(li)] = li
        self.width, self.cells, self.count = width, tuple(int(v) for v in cells), len(tri)
        self.lo, self.size = lo, size
        self.table = table
        pad = lambda v, fill: np.concatenate([v, np.full((1, *v.shape[1:]), fill)])  # noqa: E731
        # per triangle: a, n, edge points (the vertices) and normals, centroid, 1/rho^2
        self.a, self.n = pad(a, 0.0), pad(n, 0.0)
        self.b, self.m = pad(tri, 0.0), pad(m, 0.0)
        self.g, self.inv_rho2 = pad(g, 0.0), pad(1.0 / rho**2, 0.0)

    def _refusal(self, what: str) -> str:
        return (f"network.hard_constraint on a mesh: the distance function with adf_radius "
                f"{self.radius:g} needs {what}; give the mesh a smaller adf_radius (its "
                "default is a quarter of the smallest bounding-box side), or impose the "
                "Dirichlet data as a loss term (network.hard_constraint: false)")

    def __call__(self, x: Float[Array, " 3"]) -> Float[Array, ""]:
        """$\\phi(x)$ (module docstring), in the dtype of ``x``."""
        dt = x.dtype
        cell = jnp.clip(jnp.floor((x - jnp.asarray(self.lo, dt)) / self.size).astype(jnp.int32),
                        0, jnp.asarray(self.cells, jnp.int32) - 1)
        k = (cell[0] * self.cells[1] + cell[1]) * self.cells[2] + cell[2]
        idx = jnp.asarray(self.table)[k]
        take = lambda v: jnp.asarray(v, dt)[idx]  # noqa: E731
        f = jnp.sum(take(self.n) * (x[None, :] - take(self.a)), -1)
        e = jnp.sum(take(self.m) * (x[None, None, :] - take(self.b)), -1)  # (K, 3)
        t = r_and(r_and(e[:, 0], e[:, 1]), e[:, 2])
        phi = trimmed(f, t)
        s = 1.0 - jnp.sum((x[None, :] - take(self.g)) ** 2, -1) * take(self.inv_rho2)
        w = jnp.where((s > 0) & (idx < self.count), s, 0.0) ** 3  # the padding weighs 0
        R = jnp.asarray(self.radius, dt)
        # the blend divided through by min(phi)^-q over the weighted entries (no overflow)
        mn = jnp.minimum(jnp.min(jnp.where(w > 0, phi, R)), R)
        ok = mn > 0
        safe = jnp.where(ok, mn, 1.0)
        ratio = jnp.where(w > 0, safe / jnp.where(w > 0, phi, 1.0), 0.0)  # in [0, 1]
        v = w * ratio**Q
        v0 = (safe / R) ** Q_FAR
        num = -jnp.sum(v * f) + v0 * R  # the planes' signed distances, positive inside
        den = jnp.sum(v) + v0
        return jnp.where(ok, num / den, 0.0)
