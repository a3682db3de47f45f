"""The sphere: a domain, its quadrature and grids, and a pole-regular network embedding.

Points on the sphere of radius $a$ are stored as **Cartesian** vectors
$\\mathbf x = a\\,(\\cos\\theta\\cos\\lambda, \\cos\\theta\\sin\\lambda, \\sin\\theta)$
(longitude $\\lambda$, latitude $\\theta$), coordinates ``("x", "y", "z")``, preceded by
``"t"`` when the domain has a time interval. Longitude/latitude are used for sampling,
grids and plots only, never inside a derivative: nothing is singular at the poles.

The network sees a point through `SphereEmbedding`, $\\mathbf x \\mapsto \\mathbf x/|\\mathbf x|$,
so every field is the *0-homogeneous extension* $u(\\mathbf x) = U(\\mathbf x/|\\mathbf x|)$
of a function $U$ on the sphere. For such an extension, on $|\\mathbf x| = a$:

- the Cartesian gradient $\\nabla u$ is tangent and equals the surface gradient $\\nabla_S U$;
- the Cartesian Laplacian equals the Laplace–Beltrami operator,
  $\\Delta u = r^{-2}\\,\\Delta_{S^2} U = \\Delta_S U$ (the radial part vanishes);

so the derivative engine's ordinary rows (first derivatives, the forward-Laplacian row)
*are* the surface operators; `pinnkit.sphere.ops` builds divergence, vorticity and
advection from them in tangent-plane (Cartesian) form.
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._types import Point
from ..geometry.domains import AbstractUnitCubeDomain
from ..nn.embeddings import AbstractTimeWindowed

# Williamson et al. (1992) constants, shared by the climate problems and the spectral reference
EARTH_RADIUS = 6.37122e6  # m
EARTH_OMEGA = 7.292e-5  # s^-1
GRAVITY = 9.80616  # m s^-2
DAY = 86400.0  # s


def lonlat_to_xyz(lon, lat, radius: float = 1.0, xp=np):
    """$(\\lambda, \\theta) \\mapsto a(\\cos\\theta\\cos\\lambda, \\cos\\theta\\sin\\lambda, \\sin\\theta)$;
    radians; stacked on a new last axis. ``xp``: numpy or jax.numpy."""
    c = xp.cos(lat)
    return radius * xp.stack([c * xp.cos(lon), c * xp.sin(lon), xp.sin(lat)], axis=-1)


def xyz_to_lonlat(xyz, xp=np):
    """Inverse of `lonlat_to_xyz` (any radius): ``(lon in [0, 2π), lat in [-π/2, π/2])``."""
    lon = xp.mod(xp.arctan2(xyz[..., 1], xyz[..., 0]), 2 * math.pi)
    lat = xp.arctan2(xyz[..., 2], xp.hypot(xyz[..., 0], xyz[..., 1]))
    return lon, lat


def gaussian_grid(nlat: int, nlon: int | None = None):
    """A Gaussian lat–lon grid: Gauss–Legendre latitudes (no node on a pole) and
    ``nlon`` (default ``2 nlat``) equispaced longitudes from 0.

    **Returns:** ``(lon (nlon,), lat (nlat,), weights (nlon, nlat))`` with area weights on
    the **unit** sphere summing to $4\\pi$ (multiply by $a^2$ for radius $a$). The rule
    integrates exactly every spherical harmonic of degree $\\le 2\\,\\text{nlat} - 1$ and
    order $< \\text{nlon}$, so products $Y_{lm} Y_{l'm'}$ with $l + l' < 2\\,\\text{nlat}$.
    Latitudes ascend (south to north).
    """
    nlon = 2 * nlat if nlon is None else nlon
    mu, w = np.polynomial.legendre.leggauss(nlat)
    lat = np.arcsin(mu)
    lon = 2 * np.pi * np.arange(nlon) / nlon
    weights = np.broadcast_to(w[None, :] * (2 * np.pi / nlon), (nlon, nlat)).copy()
    return lon, lat, weights


class Sphere(AbstractUnitCubeDomain):
    """The sphere of radius ``radius``, optionally times an interval $[t_0, t_1]$.

    Coordinates ``("x", "y", "z")`` or ``("t", "x", "y", "z")`` (Cartesian, see the module
    docstring); spatial operators act on ``x, y, z``. Pieces: ``"interior"`` (the whole
    sphere; all $t$) and, with time, ``"initial"`` ($t = t_0$).

    Sampling is area-uniform: from unit-cube coordinates $(u_\\lambda, u_z)$,
    $\\lambda = 2\\pi u_\\lambda$ and $\\sin\\theta = 2u_z - 1$ (Archimedes: equal heights in
    $z$ cut equal areas), so uniform and Sobol samplers work unchanged. A unit point has
    one column per coordinate; the last is unused (a point has 3 Cartesian coordinates
    but 2 degrees of freedom).

    **Arguments:**
    - `radius`: $a > 0$ (default 1: problems non-dimensionalise lengths by $a$).
    - `t0`, `t1`: the time interval, or both ``None`` for a steady problem.
    """

    radius: float = eqx.field(static=True, default=1.0)
    t0: float | None = eqx.field(static=True, default=None)
    t1: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if not (math.isfinite(self.radius) and self.radius > 0):
            raise ValueError(f"Sphere radius must be finite and > 0: actual={self.radius}")
        if (self.t0 is None) != (self.t1 is None):
            raise ValueError(f"Sphere needs both t0 and t1 or neither: actual=({self.t0}, {self.t1})")
        if self.timed and not (math.isfinite(self.t0) and math.isfinite(self.t1) and self.t0 < self.t1):
            raise ValueError(f"Sphere needs finite t0 < t1: actual=({self.t0}, {self.t1})")

    @property
    def timed(self) -> bool:
        return self.t0 is not None

    @property
    def coords(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("t", "x", "y", "z") if self.timed else ("x", "y", "z")

    def pieces(self) -> tuple[str, ...]:
        return ("interior", "initial") if self.timed else ("interior",)

    def bounds(self):
        a = self.radius
        lo, hi = (-a, -a, -a), (a, a, a)
        return ((self.t0, *lo), (self.t1, *hi)) if self.timed else (lo, hi)

    def from_unit(self, u, piece):
        self.check_piece(piece)
        k = 1 if self.timed else 0
        lon = 2 * jnp.pi * u[:, k]
        z = 2 * u[:, k + 1] - 1
        r = jnp.sqrt(jnp.clip(1 - z * z, 0.0, 1.0))
        xyz = self.radius * jnp.stack([r * jnp.cos(lon), r * jnp.sin(lon), z], axis=1)
        if not self.timed:
            return xyz
        t = self.t0 + u[:, :1] * (self.t1 - self.t0)
        if piece == "initial":
            t = jnp.full_like(t, self.t0)
        return jnp.concatenate([t, xyz], axis=1)

    def normal(self, x, piece):
        raise ValueError(
            "the sphere has no boundary: it has no normal() for boundary conditions; its "
            f"pieces are {self.pieces()}"
        )

    def contains(self, x):
        k = 1 if self.timed else 0
        r = jnp.linalg.norm(x[k:])
        on = jnp.abs(r - self.radius) <= 1e-5 * self.radius
        if self.timed:
            on = on & (x[0] >= self.t0) & (x[0] <= self.t1)
        return on

    def inside(self, points):
        return None

    def grid(self, resolution, times=None):
        """Points of a Gaussian lat–lon grid (see `gaussian_grid`), ``nlat = resolution``
        (an int, or ``(nlat, nlon)``), times ``times`` (default ``resolution`` equispaced
        in $[t_0, t_1]$; ignored without time).

        **Returns:** ``(points, shape)``: points ``(prod(shape), dim)`` (numpy float64)
        ordered like the shape ``(nt, nlon, nlat)`` (``(nlon, nlat)`` without time).
        """
        nlat, nlon = (resolution, None) if isinstance(resolution, int) else tuple(resolution)
        lon, lat, _ = gaussian_grid(nlat, nlon)
        LON, LAT = np.meshgrid(lon, lat, indexing="ij")
        xyz = lonlat_to_xyz(LON, LAT, self.radius).reshape(-1, 3)
        if not self.timed:
            return xyz, LON.shape
        ts = np.linspace(self.t0, self.t1, nlat) if times is None else np.atleast_1d(np.asarray(times, float))
        pts = np.concatenate(
            [np.repeat(ts, xyz.shape[0])[:, None], np.tile(xyz, (ts.size, 1))], axis=1
        )
        return pts, (ts.size, *LON.shape)

    def grid_size(self, resolution: int) -> int:
        """``(nt,) nlon, nlat`` with ``nlon = 2 nlat``, ``nlat = nt = resolution``."""
        return 2 * resolution**2 * (resolution if self.timed else 1)


class SphereEmbedding(AbstractTimeWindowed):
    """$(t, \\mathbf x) \\mapsto (\\hat t, \\mathbf x/|\\mathbf x|)$: the network sees unit
    vectors (exactly periodic in longitude, smooth at the poles, and constant along rays,
    which makes Cartesian derivatives surface derivatives; see the module docstring) and
    time mapped affinely from $[t_0, t_1]$ onto $[-1, 1]$.

    Output size 3 (4 with time). Derivatives go through the Taylor engine's generic
    nested-jvp rule (a 4-to-4 map: cheap next to the MLP's fast rule).
    """

    t0: float | None = eqx.field(static=True, default=None)
    t1: float | None = eqx.field(static=True, default=None)

    @property
    def size(self) -> int:
        return 3 if self.t0 is None else 4

    def __call__(self, x: Point) -> Float[Array, " k"]:
        xyz = x[-3:]
        unit = xyz / jnp.sqrt(jnp.sum(xyz * xyz))
        if self.t0 is None:
            return unit
        t = 2.0 * (x[:1] - self.t0) / (self.t1 - self.t0) - 1.0
        return jnp.concatenate([t, unit])

    def in_time_window(self, a: float, b: float, t_axis: int) -> SphereEmbedding:
        """Time ``t0, t1 = a, b`` (time is the first input); untimed: unchanged."""
        return self if self.t0 is None else dataclasses.replace(self, t0=a, t1=b)


def area_mean(values: np.ndarray, weights: np.ndarray) -> float:
    """$\\int_S v\\,dA / \\int_S dA$ for values on a Gaussian grid (same shape as weights)."""
    return float(np.sum(values * weights) / np.sum(weights))


def williamson_errors(pred: np.ndarray, ref: np.ndarray, weights: np.ndarray) -> dict[str, float]:
    """Williamson et al. (1992) normalised errors, area-weighted with quadrature ``weights``:

    $l_1 = I(|h - h_T|)/I(|h_T|)$, $l_2 = \\sqrt{I((h - h_T)^2)/I(h_T^2)}$,
    $l_\\infty = \\max|h - h_T| / \\max|h_T|$, $I$ the global integral. For a vector field
    (trailing axis of size 3) $|\\cdot|$ is the Euclidean norm of the vector.
    """
    p, r = np.asarray(pred, np.float64), np.asarray(ref, np.float64)
    if p.ndim == weights.ndim + 1:
        d, rn = np.linalg.norm(p - r, axis=-1), np.linalg.norm(r, axis=-1)
    else:
        d, rn = np.abs(p - r), np.abs(r)
    integral = lambda v: float(np.sum(v * weights))
    return {
        "l1": integral(d) / integral(rn),
        "l2": math.sqrt(integral(d * d) / integral(rn * rn)),
        "linf": float(d.max() / rn.max()),
    }
