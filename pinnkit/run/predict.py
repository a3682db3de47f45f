"""Evaluate a trained run at new points: ``predict(run_dir, points=... | grid=...)``.

The network is evaluated in batches with the rows sharded over all visible devices
(`pinnkit.parallel.mesh.predict_sharded`). Points come as an ``(n, d)`` array in the domain's
coordinate order or as a table file (CSV/NPZ/NetCDF with one column per coordinate); a
grid comes as a grid spec (`pinnkit.gridio.gridded`: ``"N"`` or ``"x=-1:1:201,t=0:1:101"``)
laid out in the domain's own coordinates: the box's axes, or latitude/longitude (in
degrees, points on the sphere) for a `pinnkit.sphere.Sphere`.

`predict_grid` returns the `pinnkit.gridio.gridded.Gridded` fields; `predict` the flat
columns (with the grid's ``shape``); `write_prediction` stores either by suffix
(`pinnkit.gridio.writers`: ``.csv``, ``.npz``, ``.nc``, ``.vtu``, ``.vts``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from ..errors import PinnkitError
from ..geometry.mesh import TriangleMesh
from ..gridio.gridded import Gridded, Surface, _inside, check_spec, grid_of


class OutsideDomainWarning(UserWarning):
    """`predict` was given points outside the run's domain (a hole, beyond its box, off the
    sphere): their values are NaN unless ``allow_outside=True``. ``n_outside`` of ``n``."""

    def __init__(self, message: str, n_outside: int, n: int, allowed: bool):
        super().__init__(message)
        self.n_outside, self.n, self.allowed = n_outside, n, allowed


def points_from_file(path, domain, coords=None) -> np.ndarray:
    """``(n, d)`` points from a table file with one column per coordinate (or ``coords``:
    ``{coordinate: column}``)."""
    from ..physics.observations import _column, read_table

    table = read_table(path, "points file")
    cmap = {c: c for c in domain.coords} | dict(coords or {})
    n = None
    cols = []
    for c in domain.coords:
        a = _column(table, path, cmap[c], f"coordinate {c}", n, "points file")
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


def _load(run_dir, batch):
    """``(run data, dtype, batch)``: ``batch`` checked (a positive integer) before the run
    is loaded, default the run's ``eval.batch``."""
    from .rundir import load_run

    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int | np.integer)
                              or batch < 1):
        raise PinnkitError(f"--batch {batch}: give a positive number of points per device and batch "
                           "(default: the run's eval.batch)")
    data = load_run(run_dir)
    dtype = jnp.float64 if data.config.numerics.x64 else jnp.float32
    return data, dtype, int(batch or data.config.eval.batch)


def _plan(data, dtype, batch, mesh, points_key):
    """``check(n_points)``: the memory plan of a prediction of this run (`memplan.check_prediction`)."""
    from ..parallel.mesh import make_mesh
    from . import memplan

    mesh = make_mesh() if mesh is None else mesh
    dim, m = data.problem.domain.dim, len(data.problem.out_names)
    return lambda n: memplan.check_prediction(n, dim, m, batch, data.config.network.width, mesh,
                                              dtype, points_key)


def predict_grid(run_dir: str | Path, grid: str | int = 101, *, batch: int | None = None,
                 mesh=None) -> Gridded:
    """The trained solution of ``run_dir`` on grid spec ``grid`` (`pinnkit.gridio.gridded`):
    a `Gridded` with one array per field over the grid's dimensions, NaN outside an
    irregular domain, and the units the problem declares (`Problem.units`)."""
    check_spec(grid)
    data, dtype, batch = _load(run_dir, batch)
    problem = data.problem
    g = grid_of(problem.domain, grid, problem.units_map,
                check=_plan(data, dtype, batch, mesh, f"--grid {str(grid).strip()!r}"))
    vals = predict_network(data.network, g.points, batch=batch, dtype=dtype, mesh=mesh)
    g = g.with_fields(vals, problem.out_names)
    if isinstance(problem.domain, TriangleMesh):  # the shape itself, for ParaView
        verts, tris, part, names = problem.domain.surface()
        on = predict_network(data.network, verts, batch=batch, dtype=dtype, mesh=mesh)
        g.surface = Surface(verts, tris, part, names,
                            {n: np.asarray(on[:, i]) for i, n in enumerate(problem.out_names)})
    g.attrs.update({"title": problem.description or problem.name, "problem": problem.name,
                    "step": str(data.step)})
    return g


def predict(run_dir: str | Path, points=None, grid=None, *, batch: int | None = None,
            mesh=None, allow_outside: bool = False) -> dict[str, np.ndarray]:
    """The trained solution of ``run_dir`` at ``points`` or on ``grid``.

    **Arguments:**
    - `points`: an ``(n, d)`` array (coordinate order of the domain) or a table file path.
    - `grid`: a grid spec (`pinnkit.gridio.gridded`); exactly one of `points`, `grid`.
    - `batch`: rows per device per evaluation (default: the run's ``eval.batch``).
    - `allow_outside`: keep the network's values at points outside the domain
      (extrapolation). By default they are NaN, as grid outputs mask them: the network
      is defined everywhere, but was trained only inside. Either way an
      `OutsideDomainWarning` counts them.

    **Returns:** ``{coordinate: (n,), field: (n,)}`` numpy arrays, plus for a grid
    ``"shape"`` (the grid shape; rows in C order over its dimensions) and, on the sphere,
    ``"lon"``, ``"lat"`` in degrees.
    """
    if (points is None) == (grid is None):
        raise PinnkitError("predict: give either points (an array or a file) or a grid spec, not both")
    if grid is not None:
        return predict_grid(run_dir, grid, batch=batch, mesh=mesh).table()
    data, dtype, batch = _load(run_dir, batch)
    domain = data.problem.domain
    if isinstance(points, str | Path):
        pts = points_from_file(points, domain)
    else:
        pts = np.asarray(points, np.float64)
        if pts.ndim != 2 or pts.shape[1] != domain.dim:
            raise PinnkitError(
                f"predict: points must have shape (n, {domain.dim}) for coordinates {domain.coords}, "
                f"got {pts.shape}"
            )
    _plan(data, dtype, batch, mesh, "--points")(pts.shape[0])
    vals = predict_network(data.network, pts, batch=batch, dtype=dtype, mesh=mesh)
    outside = ~_inside(domain, pts)  # the mask grid outputs use (Gridded.mask)
    n_out = int(outside.sum())
    if n_out:
        if not allow_outside:
            vals = vals.astype(np.result_type(vals.dtype, np.float32))
            vals[outside] = np.nan
        fate = "extrapolated (allow_outside)" if allow_outside else \
            "their values are NaN (allow_outside=True to extrapolate)"
        warnings.warn(OutsideDomainWarning(f"{n_out} of {pts.shape[0]} points lie outside the domain; {fate}",
                                           n_out, pts.shape[0], allow_outside), stacklevel=2)
    out = {c: pts[:, i] for i, c in enumerate(domain.coords)}
    out.update({n: vals[:, i] for i, n in enumerate(data.problem.out_names)})
    return out


def write_prediction(path: str | Path, result: dict[str, np.ndarray] | Gridded) -> Path:
    """Writes `predict`'s columns or `predict_grid`'s `Gridded` by the suffix of ``path``:
    ``.csv``/``.npz`` (one column per coordinate and field; a grid's ``shape`` in NPZ
    files), ``.nc`` (CF NetCDF: a grid's dimensions, or a ``point`` dimension),
    ``.vtu``/``.vts`` (ParaView; `pinnkit.gridio.writers`). **Returns:** the main file (for
    a time-dependent grid in VTK format, the ``.pvd`` index of its one file per time)."""
    from ..gridio.writers import write

    return write(Path(path), result)[0]
