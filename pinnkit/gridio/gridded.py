"""Fields of a trained run on a grid laid out in the domain's own coordinates.

A `Gridded` is what ``pinnkit predict --grid`` computes and what the NetCDF, VTK, CSV
and NPZ writers (`pinnkit.gridio.writers`) store:

- a box or space-time box: one dimension per coordinate, named like it (``t, x, y``),
  so that ``xarray.open_dataset(FILE).u.plot()`` draws a map;
- the sphere: dimensions ``time`` (if timed), ``lat``, ``lon`` in degrees on a regular
  grid that includes both poles; the points are ON the sphere
  ($|\\mathbf x| = a$, `pinnkit.sphere.lonlat_to_xyz`);
- any other domain: the box grid over its bounds, with ``mask`` False (and every field
  NaN) at the grid points outside the domain (``domain.contains``).

Grid specs (``pinnkit predict --grid SPEC``): ``"N"`` (N points per dimension; on the
sphere N latitudes from pole to pole, 2(N - 1) longitudes, N times) or
``"x=-1:1:201,t=0:1:101"`` (``lo:hi:n`` per dimension, by dimension name; on the sphere
``lat``, ``lon`` in degrees and ``t``; dimensions not named take the default range and
the last bare N given, or 101). A range needs finite ``lo < hi`` (``lo == hi`` with
``n = 1``: one slice), each dimension once; a grid whose points cannot fit the host's
memory is refused before it is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PinnkitError
from ..sphere.domain import Sphere, lonlat_to_xyz


@dataclass
class Surface:
    """A domain's boundary surface as triangles, with fields at its vertices (a triangle
    mesh's, written into ``.vtu`` files next to the grid's cells so that ParaView shows
    the shape):

    - `points`: ``(V, 3)`` vertices; `triangles`: ``(F, 3)`` vertex indices;
    - `part`: ``(F,)`` index into `names`, the boundary name of each triangle;
    - `fields`: ``{field: (V,)}``.
    """

    points: np.ndarray
    triangles: np.ndarray
    part: np.ndarray
    names: tuple[str, ...]
    fields: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Gridded:
    """Fields on a tensor grid (module docstring).

    - `dims`: dimension names in array order, e.g. ``("t", "x", "y")`` or ``("time", "lat", "lon")``.
    - `axes`: ``{dim: (n_dim,) array}``, the 1-D coordinate of every dimension.
    - `points`: ``(prod(shape), d)`` points in the domain's coordinate order, row ``k`` the
      grid point ``np.unravel_index(k, shape)`` (C order over `dims`).
    - `fields`: ``{field: array of shape shape}`` (NaN where ``mask`` is False).
    - `mask`: bool array of shape ``shape`` (True inside the domain), None if all inside.
    - `units`: ``{dim or field: unit}`` as far as the problem knows them (UDUNITS strings).
    - `coords`: the domain's coordinate names (columns of `points`).
    - `surface`: the domain's boundary as a `Surface` (a triangle mesh's), or None.
    """

    dims: tuple[str, ...]
    axes: dict[str, np.ndarray]
    points: np.ndarray
    coords: tuple[str, ...]
    fields: dict[str, np.ndarray] = field(default_factory=dict)
    mask: np.ndarray | None = None
    units: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, str] = field(default_factory=dict)
    surface: Surface | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(self.axes[d]) for d in self.dims)

    @property
    def on_sphere(self) -> bool:
        return "lat" in self.dims

    def with_fields(self, values: np.ndarray, names) -> Gridded:
        """A copy holding ``values`` ``(prod(shape), m)`` as fields ``names`` (NaN outside
        the mask)."""
        vals = np.asarray(values)
        out = {}
        for i, n in enumerate(names):
            v = vals[:, i].reshape(self.shape)
            if self.mask is not None:
                v = np.where(self.mask, v, np.nan)
            out[n] = v
        return Gridded(self.dims, self.axes, self.points, self.coords, out, self.mask, self.units,
                       self.attrs, self.surface)

    def table(self) -> dict[str, np.ndarray]:
        """Flat columns (one row per grid point): the domain's coordinates, ``lon``/``lat``
        on the sphere, every field, and ``shape`` (the grid's)."""
        cols = {c: self.points[:, i] for i, c in enumerate(self.coords)}
        if self.on_sphere:
            mesh = np.meshgrid(*(self.axes[d] for d in self.dims), indexing="ij")
            cols.update({d: m.ravel() for d, m in zip(self.dims, mesh, strict=True) if d in ("lat", "lon")})
        cols.update({k: v.ravel() for k, v in self.fields.items()})
        cols["shape"] = np.asarray(self.shape)
        return cols


def _parse(spec: str | int, names: list[str] | None) -> tuple[int, dict[str, tuple[float, float, int]]]:
    """``(default n, {coordinate: (lo, hi, n)})`` of a grid spec; ``names=None`` checks
    everything but the coordinate names (`check_spec`)."""
    text = str(spec).strip()
    default_n, given = 101, {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            if not part.isdigit() or int(part) < 1:
                raise PinnkitError(f"--grid {text!r}: {part!r} is not a positive integer point count")
            default_n = int(part)
            continue
        name, _, rng = part.partition("=")
        name = name.strip()
        if names is not None and name not in names:
            raise PinnkitError(f"--grid {text!r}: {name!r} is not a coordinate; the coordinates are {names}")
        bits = rng.split(":")
        try:
            if len(bits) != 3:
                raise ValueError
            a, b, n = float(bits[0]), float(bits[1]), int(bits[2])
        except ValueError:
            raise PinnkitError(
                f"--grid {text!r}: {part!r} must be {name}=lo:hi:n, e.g. {name}=0:1:101"
            ) from None
        if name in given:
            raise PinnkitError(f"--grid {text!r}: {name!r} is given twice; give each coordinate once")
        if n < 1:
            raise PinnkitError(f"--grid {text!r}: {part!r} needs n >= 1")
        if not (np.isfinite(a) and np.isfinite(b)):
            raise PinnkitError(f"--grid {text!r}: {part!r} needs finite lo and hi")
        if not (a < b or (a == b and n == 1)):  # a reversed range would flip the axis unasked
            raise PinnkitError(
                f"--grid {text!r}: {part!r} needs lo < hi (or lo == hi with n = 1 for one "
                f"slice); write {name}={min(a, b):g}:{max(a, b):g}:{n}"
            )
        given[name] = (a, b, n)
    return default_n, given


def check_spec(spec: str | int) -> None:
    """Refuses a malformed grid spec (counts, ranges, repeats) before a run is loaded:
    loading builds the problem and network, seconds that a typo need not cost."""
    _parse(spec, None)


def _size(spec, counts) -> int:
    """The number of grid points, refused past 2**62 (before numpy overflows on it)."""
    total = 1
    for c in counts:
        total *= int(c)
    if total >= 2**62:
        raise PinnkitError(f"--grid {str(spec).strip()!r}: {total:.3g} points; ask for fewer points")
    return total


def _box_grid(spec, domain, check) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
    lo, hi = domain.bounds()
    coords = list(domain.coords)
    n, given = _parse(spec, coords)
    counts = [given[c][2] if c in given else n for c in coords]
    check(_size(spec, counts))  # before any axis is built: n may be huge
    axes = {c: np.linspace(*given.get(c, (lo[i], hi[i], n))) for i, c in enumerate(coords)}
    return tuple(coords), axes


def _sphere_grid(spec, dom: Sphere, check):
    names = (["t"] if dom.timed else []) + ["lat", "lon"]
    n, given = _parse(spec, names)
    counts = [given[k][2] if k in given else d for k, d in
              (("lat", n), ("lon", 2 * max(n - 1, 1)), *((("t", n),) if dom.timed else ()))]
    check(_size(spec, counts))
    lat = np.linspace(*given.get("lat", (-90.0, 90.0, n)))
    # 2(N - 1) longitudes from 0 without 360 (the same point): the latitudes' spacing
    m = max(n - 1, 1)
    lon = np.linspace(*given["lon"]) if "lon" in given else np.arange(2 * m) * 180.0 / m
    if np.any(np.abs(lat) > 90.0):
        raise PinnkitError(f"--grid {spec!r}: latitudes must lie in [-90, 90] degrees")
    axes = {"lat": lat, "lon": lon}
    if dom.timed:
        axes = {"time": np.linspace(*given.get("t", (dom.t0, dom.t1, n))), **axes}
    dims = tuple(axes)
    LAT, LON = np.meshgrid(np.radians(lat), np.radians(lon), indexing="ij")
    xyz = lonlat_to_xyz(LON, LAT, dom.radius).reshape(-1, 3)
    if dom.timed:
        ts = axes["time"]
        pts = np.concatenate([np.repeat(ts, xyz.shape[0])[:, None], np.tile(xyz, (ts.size, 1))], axis=1)
    else:
        pts = xyz
    return dims, axes, pts


def grid_of(domain, spec: str | int = 101, units: dict[str, str] | None = None,
            check=lambda n_points: None) -> Gridded:
    """The empty `Gridded` (no fields) of grid spec ``spec`` (module docstring) on ``domain``.
    ``check(n_points)`` is called before anything of the grid's size is built (the memory
    plan's `pinnkit.run.memplan.check_prediction`)."""
    units = dict(units or {})
    if isinstance(domain, Sphere):
        dims, axes, pts = _sphere_grid(spec, domain, check)
        units = {**units, "lat": "degrees_north", "lon": "degrees_east"}
        if "t" in units:
            units["time"] = units["t"]
        return Gridded(dims, axes, pts, tuple(domain.coords), units=units,
                       attrs={"radius": str(domain.radius)})
    dims, axes = _box_grid(spec, domain, check)
    mesh = np.meshgrid(*(axes[d] for d in dims), indexing="ij")
    pts = np.stack([m.ravel() for m in mesh], axis=-1)
    mask = _inside(domain, pts).reshape(tuple(len(axes[d]) for d in dims))
    return Gridded(dims, axes, pts, tuple(domain.coords), mask=None if mask.all() else mask, units=units)


def _inside(domain, pts: np.ndarray) -> np.ndarray:
    """``domain.contains`` at every row of ``pts`` (float64 points, evaluated in float32 when
    float64 is off: a point on a face stays on it within the float32 rounding)."""
    import jax
    import jax.numpy as jnp

    return np.asarray(jax.jit(jax.vmap(domain.contains))(jnp.asarray(pts)), bool)
