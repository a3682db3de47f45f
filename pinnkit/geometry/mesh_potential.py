"""A distance for hard constraints on triangle meshes from a surface potential, the same
function for every triangulation of the same surface.

For $p > 2$ the surface integral $I_p(x) = \\int_S |x - y|^{-p}\\,dA_y$ of an infinite plane
at distance $h$ is $2\\pi / ((p - 2) h^{p-2})$, so
$\\phi(x) = \\big((p - 2) I_p(x) / (2\\pi)\\big)^{-1/(p-2)}$ equals $h$ above a plane, is
$C^\\infty$ off the surface $S$, zero on it, and, next to a flat face, $\\phi = h + O(h^2)$:
normalised to first order ($\\partial\\phi/\\partial n = -1$). This is the "potential-based"
or $p$-distance of Belyaev & Fayolle (2015, "On variational and PDE-based distance
function approximations", Computer Graphics Forum 34(8)). Here $p = 3$:
$\\phi = 2\\pi / I_3$, and $I_3$ is a sum over the triangles $T$ of closed forms. With
$a, b, c$ the vertices of $T$ relative to $x$, the signed solid angle of $T$ (van
Oosterom & Strackee 1983, "The solid angle of a plane triangle", IEEE Trans. Biomed. Eng.
30(2)) is $\\Omega_T = 2\\,\\mathrm{atan2}(N, D)$, $N = a\\cdot(b\\times c) = 2 A_T h_T$
($h_T$ the signed height of $x$ over $T$'s plane, $A_T$ the area) and
$D = |a||b||c| + (a\\cdot b)|c| + (a\\cdot c)|b| + (b\\cdot c)|a|$; and
$\\Omega_T = \\int_T h_T/r^3\\,dA$, so

$$\\int_T r^{-3}\\,dA = \\frac{\\Omega_T}{h_T} = 4 A_T\\,\\frac{\\mathrm{atan2}(N, D)}{N},$$

positive for either winding. In $T$'s plane ($N \\to 0$, $D > 0$) the quotient is
$\\mathrm{atan}(z)/(z D)$, $z = N/D$, evaluated by its series for small $|z|$: finite and
smooth across the plane outside the triangle, so nothing divides by $h_T$. On the triangle
($N = 0$, $D \\le 0$) the integral is infinite and $\\phi = 0$ (value exact; its derivatives
there are set to 0, as in `pinnkit.geometry.distance`).

The sum over the triangles of a flat face is the face's integral, so coplanar
re-triangulation changes $\\phi$ by rounding only; nothing in $\\phi$ has the size of a
triangle (unlike the blend of `pinnkit.geometry.mesh_adf`, whose weights resolve the
triangulation). At an edge or vertex where faces meet, $\\phi$ is homogeneous of degree 1
in the distance $r$ to it (as the R-function distances of a CSG box are), so second
derivatives grow like $1/r$ there. Far from the surface $\\phi$ is smaller than the
distance (every face is seen: in the unit cube's centre 0.25 against 0.5).

Cost: every triangle at every point, $O(T)$, summed in chunks of `CHUNK` triangles (memory
points x `CHUNK`). `MAX_TRIANGLES` bounds what is accepted (`pinnkit.errors.ConfigError`);
a mesh above it keeps the blend (``adf: blend``) or imposes its data as a loss term.
Float64 is advised: above an edge shared by two triangles of one face, $D$ is a difference
of nearly equal terms and each triangle's share carries a relative error of about
$\\epsilon\\,L/h$ ($L$ the triangle's size, $h$ the height), 1e-3 at $h = 10^{-4} L$ in float32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..errors import ConfigError

CHUNK = 1024  # triangles summed at once (one chunk: no loop)
MAX_TRIANGLES = 50_000  # O(T) per point: 50k triangles cost ~ 60x the 768-triangle cube's step
SERIES = 1e-3  # |N/D| below which atan(z)/z is its series 1 - z^2/3 + z^4/5 (error < z^6/7)


def solid_angle_terms(p: Float[Array, " 3"], tri: Float[Array, "T 3 3"]):
    """``(N, D)`` per triangle of ``tri`` seen from ``p``: the solid angle is
    ``2 atan2(N, D)`` (van Oosterom & Strackee 1983; module docstring)."""
    a, b, c = (tri[:, i] - p[None, :] for i in range(3))
    la, lb, lc = (jnp.sqrt(jnp.sum(v * v, 1)) for v in (a, b, c))
    num = jnp.sum(a * jnp.cross(b, c), 1)
    den = la * lb * lc + jnp.sum(a * b, 1) * lc + jnp.sum(b * c, 1) * la + jnp.sum(c * a, 1) * lb
    return num, den


def _inverse_cube_integrals(x, tri, area4):
    """Per triangle, $\\int_T r^{-3} dA$ at ``x`` (0 for padding, ``area4`` = 0), and
    whether ``x`` lies on a (non-padding) triangle."""
    num, den = solid_angle_terms(x, tri)
    on = (num == 0) & (den <= 0) & (area4 > 0)
    small = (den > 0) & (jnp.abs(num) < SERIES * den)
    d = jnp.where(small, den, 1.0)
    z2 = (num / d) ** 2
    series = (1.0 - z2 / 3.0 + z2 * z2 / 5.0) / d
    n = jnp.where(small | on, 1.0, num)
    direct = jnp.arctan2(jnp.where(small | on, 1.0, num), jnp.where(small | on, 0.0, den)) / n
    return area4 * jnp.where(small, series, jnp.where(on, 0.0, direct)), on


class PotentialADF:
    """$\\phi = 2\\pi / \\int_S r^{-3} dA$ of a closed triangle soup ``triangles`` (T, 3, 3)
    (module docstring). Host arrays; `__call__` is traced into the step."""

    def __init__(self, triangles: np.ndarray):
        tri = np.asarray(triangles, np.float64)
        if len(tri) > MAX_TRIANGLES:
            raise ConfigError(
                f"network.hard_constraint on a mesh with adf: potential sums over every triangle "
                f"at every point and is limited to {MAX_TRIANGLES:,} triangles: this mesh has "
                f"{len(tri):,}; use adf: blend (a cut-off distance), a coarser mesh, or impose the "
                "Dirichlet data as a loss term (network.hard_constraint: false)")
        area4 = 2.0 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
        chunks = max(1, -(-len(tri) // CHUNK))
        pad = chunks * min(CHUNK, len(tri)) - len(tri)
        # padding: copies of the first triangle weighing 0
        self.tri = np.concatenate([tri, np.repeat(tri[:1], pad, 0)]).reshape(chunks, -1, 3, 3)
        self.area4 = np.concatenate([area4, np.zeros(pad)]).reshape(chunks, -1)
        self.count = len(tri)

    def __call__(self, x: Float[Array, " 3"]) -> Float[Array, ""]:
        """$\\phi(x)$ (module docstring), in the dtype of ``x``."""
        tri, area4 = jnp.asarray(self.tri, x.dtype), jnp.asarray(self.area4, x.dtype)

        def chunk(carry, part):
            j, on = _inverse_cube_integrals(x, *part)
            return (carry[0] + jnp.sum(j), carry[1] | jnp.any(on)), None

        start = (jnp.zeros((), x.dtype), jnp.zeros((), bool))
        if len(tri) == 1:
            (total, on), _ = chunk(start, (tri[0], area4[0]))
        else:
            (total, on), _ = jax.lax.scan(chunk, start, (tri, area4))
        return jnp.where(on, 0.0, 2.0 * jnp.pi / jnp.where(on, 1.0, total))
