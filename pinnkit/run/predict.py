"""Evaluate a trained run at new points: ``predict(run_dir, points=... | grid=...)``.

The network is evaluated in batches with the rows sharded over all visible devices
(`pinnkit.parallel.mesh.predict_sharded`). Points come as an ``(n, d)`` array in the domain's
coordinate order, as a table file (CSV/NPZ/NetCDF with one column per coordinate), or as
a grid spec:

- ``"N"``: N points per coordinate over the domain's bounding box;
- ``"x=-1:1:201,t=0:1:101"``: per coordinate ``lo:hi:n`` (coordinates not named use the
  bounding box and ``N`` = the last number given, or 101).

Grids are tensor grids flattened with ``indexing="ij"`` in coordinate order; the result
records their ``shape``.
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np

from ..errors import PinnkitError


def parse_grid(spec: str | int, domain) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """Axes of a grid spec (module docstring) for ``domain``: ``(axes, shape)``."""
    lo, hi = domain.bounds()
    coords = list(domain.coords)
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
        if name not in coords:
            raise PinnkitError(
                f"--grid {text!r}: {name!r} is not a coordinate; the coordinates are {coords}"
            )
        bits = rng.split(":")
        try:
            a, b, n = float(bits[0]), float(bits[1]), int(bits[2])
        except (IndexError, ValueError):
            raise PinnkitError(
                f"--grid {text!r}: {part!r} must be {name}=lo:hi:n, e.g. {name}=0:1:101"
            ) from None
        if n < 1:
            raise PinnkitError(f"--grid {text!r}: {part!r} needs n >= 1")
        given[name] = (a, b, n)
    axes = []
    for i, c in enumerate(coords):
        a, b, n = given.get(c, (lo[i], hi[i], default_n))
        axes.append(np.linspace(a, b, n))
    return axes, tuple(len(a) for a in axes)


def grid_points(spec, domain) -> tuple[np.ndarray, tuple[int, ...]]:
    """``(points (prod(shape), d), shape)`` of a grid spec."""
    axes, shape = parse_grid(spec, domain)
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=-1), shape


def points_from_file(path, domain, coords=None) -> np.ndarray:
    """``(n, d)`` points from a table file with one column per coordinate (or ``coords``:
    ``{coordinate: column}``)."""
    from ..physics.observations import _column, read_table

    table = read_table(path)
    cmap = {c: c for c in domain.coords} | dict(coords or {})
    n = None
    cols = []
    for c in domain.coords:
        a = _column(table, path, cmap[c], f"coordinate {c}", n)
        n = a.shape[0]
        cols.append(a)
    return np.stack(cols, axis=1)


def predict_network(network, points: np.ndarray, *, batch: int = 16384, dtype=jnp.float32,
                    mesh=None) -> np.ndarray:
    """``(n, m)`` outputs of ``network`` at ``points`` ``(n, d)``, rows sharded over ``mesh``
    (default: all visible devices), in batches of ``batch`` rows per device."""
    from ..parallel.mesh import make_mesh, predict_sharded

    pts = np.asarray(points, np.float64)
    if pts.ndim != 2 or pts.shape[0] == 0:
        raise PinnkitError(f"predict: points must be a non-empty (n, d) array, got shape {pts.shape}")
    mesh = make_mesh() if mesh is None else mesh
    rows, vals = predict_sharded(network, pts, mesh, batch, dtype)
    out = np.zeros((pts.shape[0], vals.shape[1]), vals.dtype)
    out[rows] = vals
    return out


def predict(run_dir: str | Path, points=None, grid=None, *, batch: int | None = None,
            mesh=None) -> dict[str, np.ndarray]:
    """The trained solution of ``run_dir`` at ``points`` or on ``grid``.

    **Arguments:**
    - `points`: an ``(n, d)`` array (coordinate order of the domain) or a table file path.
    - `grid`: a grid spec (module docstring); exactly one of `points`, `grid`.
    - `batch`: rows per device per evaluation (default: the run's ``eval.batch``).

    **Returns:** ``{coordinate: (n,), field: (n,)}`` numpy arrays, plus ``"shape"`` (the
    grid shape) for a grid.
    """
    from .rundir import load_run

    if (points is None) == (grid is None):
        raise PinnkitError("predict: give either points (an array or a file) or a grid spec, not both")
    data = load_run(run_dir)
    domain = data.problem.domain
    shape = None
    if grid is not None:
        pts, shape = grid_points(grid, domain)
    elif isinstance(points, str | Path):
        pts = points_from_file(points, domain)
    else:
        pts = np.asarray(points, np.float64)
        if pts.ndim != 2 or pts.shape[1] != domain.dim:
            raise PinnkitError(
                f"predict: points must have shape (n, {domain.dim}) for coordinates {domain.coords}, "
                f"got {pts.shape}"
            )
    dtype = jnp.float64 if data.config.numerics.x64 else jnp.float32
    vals = predict_network(data.network, pts, batch=batch or data.config.eval.batch, dtype=dtype, mesh=mesh)
    out = {c: pts[:, i] for i, c in enumerate(domain.coords)}
    out.update({n: vals[:, i] for i, n in enumerate(data.problem.out_names)})
    if shape is not None:
        out["shape"] = np.asarray(shape)
    return out


def write_prediction(path: str | Path, result: dict[str, np.ndarray]) -> Path:
    """Writes `predict`'s result as CSV, NPZ or NetCDF (by suffix); one column per
    coordinate and field (a grid's ``shape`` is kept in NPZ files only)."""
    from ..physics.observations import write_table

    path = Path(path)
    cols = {k: v for k, v in result.items() if k != "shape"}
    if path.suffix.lower() == ".npz" and "shape" in result:
        cols["shape"] = result["shape"]
    return write_table(path, cols)
