"""Files of predicted fields: CSV/NPZ tables, CF NetCDF, and VTK for ParaView.

`write(path, result)` chooses by suffix; ``result`` is `pinnkit.run.predict.predict`'s
flat columns or a `pinnkit.gridio.gridded.Gridded`.

- ``.csv``, ``.npz``: one column per coordinate and field (`Gridded.table`).
- ``.nc``: CF-1.8 NetCDF. A grid keeps its dimensions (``t, x, y``; on the sphere
  ``time, lat, lon``) as coordinate variables with ``axis``, ``units``,
  ``standard_name`` (latitude/longitude), so ``xarray.open_dataset(FILE)`` needs no
  arguments and ``ds.u.plot()`` draws a map. Time is stored as a number in the problem's
  unit (``units: "day"``, a duration from the initial state, not a date; no calendar),
  which xarray keeps as floats. Fields carry ``units`` when the problem declares them;
  points outside an irregular domain are NaN (the ``_FillValue``).
- ``.vtu`` (through meshio, the ``vtk`` extra): an unstructured mesh of the grid's cells
  (lines, quads or hexahedra; on the sphere quads on the surface, closed across the
  date line); cells touching a point outside the domain are left out. A triangle mesh's
  domain adds its surface (`Gridded.surface`): the triangles as a second cell block with
  the fields at their vertices, the cell array ``boundary`` (the index of the triangle's
  boundary name in the shape's order; -1 on the grid's cells) and one 0/1 cell array
  ``boundary_NAME`` per name.
- ``.vts``: a VTK XML structured grid (written here, ASCII), hidden points outside the
  domain (``vtkGhostType``).

A grid with a time dimension in VTK format becomes one file per time,
``STEM_0000.vtu``..., and ``STEM.pvd``, the ParaView collection that orders them by time.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from ..errors import PinnkitError
from .gridded import Gridded

TIME_DIMS = ("t", "time")
_AXIS = {"x": "X", "y": "Y", "z": "Z", "t": "T", "time": "T", "lat": "Y", "lon": "X"}
_STANDARD = {"lat": "latitude", "lon": "longitude"}


def write(path: Path, result) -> list[Path]:
    """Writes ``result`` to ``path`` (format by suffix, module docstring); returns the
    files written, the main one first (the ``.pvd`` of a VTK time series)."""
    suffix = path.suffix.lower()
    grid = result if isinstance(result, Gridded) else None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PinnkitError(f"cannot create {path.parent}: {e.strerror or e}") from None
    if suffix in (".vtu", ".vts"):
        if grid is None:
            return [_points_vtu(path, result)]
        return _vtk_series(path, grid, suffix)
    if suffix in (".nc", ".nc4") and grid is not None:
        return [to_netcdf(grid, path)]
    from ..physics.observations import write_table

    cols = grid.table() if grid is not None else dict(result)
    if suffix != ".npz":
        cols.pop("shape", None)
    return [write_table(path, cols)]


# ------------------------------------------------------------------------------ NetCDF


def _stored(v) -> np.ndarray:
    a = np.asarray(v)
    return a.astype(np.float64 if a.dtype == np.float64 else np.float32)


def to_netcdf(grid: Gridded, path: str | Path, engine: str | None = None) -> Path:
    """Writes ``grid`` as CF-1.8 NetCDF (module docstring). Needs xarray (the ``netcdf``
    extra; the scipy engine, a core dependency, writes NetCDF-3 without netCDF4)."""
    try:
        import xarray as xr
    except ImportError:
        raise PinnkitError("NetCDF output needs xarray: pip install 'pinnkit[netcdf]'") from None
    coords = {}
    for d in grid.dims:
        attrs = {"axis": _AXIS.get(d, "")} if d in _AXIS else {}
        if d in _STANDARD:
            attrs["standard_name"] = _STANDARD[d]
        if d in TIME_DIMS:
            attrs["long_name"] = "time since the initial state"
        if d in grid.units:
            attrs["units"] = grid.units[d]
        coords[d] = (d, np.asarray(grid.axes[d], np.float64), attrs)
    data = {}
    for name, v in grid.fields.items():
        attrs = {"long_name": name}
        if name in grid.units:
            attrs["units"] = grid.units[name]
        data[name] = (grid.dims, _stored(v), attrs)
    attrs = {"Conventions": "CF-1.8", "source": "pinnkit PINN", **grid.attrs}
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.to_netcdf(path, engine=engine)
    return path


# ------------------------------------------------------------------------------ VTK


def _space(grid: Gridded) -> tuple[tuple[str, ...], np.ndarray]:
    """Spatial dimensions and the ``(n_space..., 3)`` positions of one time slice."""
    dims = tuple(d for d in grid.dims if d not in TIME_DIMS)
    shape = tuple(len(grid.axes[d]) for d in dims)
    if grid.on_sphere:
        k = 1 if grid.dims[0] in TIME_DIMS else 0
        xyz = grid.points[: int(np.prod(shape)), k:].reshape(*shape, 3)
        return dims, xyz
    mesh = np.meshgrid(*(grid.axes[d] for d in dims), indexing="ij")
    pos = np.zeros((*shape, 3))
    for i, m in enumerate(mesh[:3]):
        pos[..., i] = m
    return dims, pos


def _slices(grid: Gridded):
    """``(time or None, {field: spatial array}, spatial mask or None)`` per time."""
    if grid.dims[0] not in TIME_DIMS:
        yield None, grid.fields, grid.mask
        return
    for k, t in enumerate(grid.axes[grid.dims[0]]):
        yield (float(t), {n: v[k] for n, v in grid.fields.items()},
               None if grid.mask is None else grid.mask[k])


def _closed_lon(grid: Gridded) -> bool:
    lon = grid.axes.get("lon")
    if lon is None or lon.size < 3:
        return False
    step = np.diff(lon)
    return bool(np.allclose(step, step[0]) and np.isclose(lon[0] + 360.0, lon[-1] + step[0]))


def _cells(shape: tuple[int, ...], wrap_last: bool = False) -> tuple[str, np.ndarray]:
    """VTK cells of a structured grid of ``shape`` (C-order point ids): lines, quads or
    hexahedra; ``wrap_last`` closes the last dimension (longitude)."""
    ids = np.arange(int(np.prod(shape))).reshape(shape)
    if wrap_last:
        ids = np.concatenate([ids, ids[..., :1]], axis=-1)
    if ids.ndim == 1:
        return "line", np.stack([ids[:-1], ids[1:]], -1)
    if ids.ndim == 2:
        a, b, c, d = ids[:-1, :-1], ids[1:, :-1], ids[1:, 1:], ids[:-1, 1:]
        return "quad", np.stack([a, b, c, d], -1).reshape(-1, 4)
    if ids.ndim == 3:
        c = [ids[i:i + ids.shape[0] - 1, j:j + ids.shape[1] - 1, k:k + ids.shape[2] - 1]
             for i, j, k in ((0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0),
                             (0, 0, 1), (1, 0, 1), (1, 1, 1), (0, 1, 1))]
        return "hexahedron", np.stack(c, -1).reshape(-1, 8)
    raise PinnkitError(f"VTK output: grids of 1 to 3 spatial dimensions, not {ids.ndim}")


def _meshio():
    try:
        import meshio
    except ImportError:
        raise PinnkitError(
            "writing .vtu needs meshio: pip install 'pinnkit[vtk]' (or write .vts, which needs nothing)"
        ) from None
    return meshio


def _point_data(grid: Gridded, fields: dict, dims) -> dict[str, np.ndarray]:
    data = {n: _stored(v).ravel() for n, v in fields.items()}
    if grid.on_sphere:
        LAT, LON = np.meshgrid(grid.axes["lat"], grid.axes["lon"], indexing="ij")
        data.update(lat=LAT.ravel(), lon=LON.ravel())
    return data


def _write_vtu(path: Path, grid: Gridded, fields: dict, mask) -> None:
    meshio = _meshio()
    dims, pos = _space(grid)
    kind, cells = _cells(pos.shape[:-1], wrap_last=_closed_lon(grid))
    if mask is not None:  # keep the cells whose every vertex is inside
        cells = cells[mask.ravel()[cells].all(axis=1)]
    points, blocks, data = pos.reshape(-1, 3), [(kind, cells)], _point_data(grid, fields, dims)
    cell_data = {}
    surf = grid.surface
    if surf is not None:  # the shape's own triangles, after the grid's points
        n = len(points)
        points = np.concatenate([points, surf.points])
        blocks.append(("triangle", surf.triangles + n))
        data = {k: np.concatenate([v, _stored(surf.fields[k]).ravel()]) if k in surf.fields else
                np.concatenate([v, np.full(len(surf.points), np.nan)]) for k, v in data.items()}
        part = surf.part.astype(np.int32)
        cell_data = {"boundary": [np.full(len(cells), -1, np.int32), part]}
        for k, name in enumerate(surf.names):  # by name: ParaView's Threshold on boundary_inlet
            cell_data[f"boundary_{name}"] = [np.zeros(len(cells), np.uint8), (part == k).astype(np.uint8)]
    mesh = meshio.Mesh(points, blocks, point_data=data, cell_data=cell_data)
    meshio.write(str(path), mesh, file_format="vtu")


def _ascii(a: np.ndarray) -> str:
    fmt = "%.17g" if a.dtype == np.float64 else ("%.9g" if a.dtype.kind == "f" else "%d")
    return " ".join(fmt % v for v in a.ravel())


_VTK_TYPES = {"float64": "Float64", "float32": "Float32", "uint8": "UInt8"}


def _data_array(name: str | None, a: np.ndarray, components: int = 1) -> str:
    named = f" Name={quoteattr(name)}" if name else ""
    return (f'<DataArray type="{_VTK_TYPES[a.dtype.name]}"{named} NumberOfComponents="{components}" '
            f'format="ascii">\n{_ascii(a)}\n</DataArray>\n')


def _write_vts(path: Path, grid: Gridded, fields: dict, mask) -> None:
    """VTK XML StructuredGrid. VTK runs index ``i`` fastest; the arrays are written in
    their own C order, so ``i`` is the LAST spatial dimension (``WholeExtent`` lists the
    dimensions reversed); positions are explicit, so the geometry is the grid's."""
    dims, pos = _space(grid)
    shape = pos.shape[:-1]
    if _closed_lon(grid):  # repeat the first longitude so that the surface closes
        pos = np.concatenate([pos, pos[..., :1, :]], axis=-2)
        fields = {n: np.concatenate([v, v[..., :1]], axis=-1) for n, v in fields.items()}
        mask = None if mask is None else np.concatenate([mask, mask[..., :1]], axis=-1)
        shape = pos.shape[:-1]
    ext = list(reversed(shape)) + [1] * (3 - len(shape))
    extent = " ".join(f"0 {n - 1}" for n in ext)
    data = {n: _stored(v) for n, v in fields.items()}
    if grid.on_sphere:
        LAT, LON = np.meshgrid(grid.axes["lat"], grid.axes["lon"], indexing="ij")
        if _closed_lon(grid):
            LAT, LON = (np.concatenate([A, A[:, :1]], axis=1) for A in (LAT, LON))
        data.update(lat=LAT, lon=LON)
    body = "".join(_data_array(n, a) for n, a in data.items())
    if mask is not None:  # ParaView's blanking: HIDDENPOINT (2) outside the domain
        body += _data_array("vtkGhostType", np.where(mask, 0, 2).astype(np.uint8))
    first = next(iter(data), None)
    scalars = f" Scalars={quoteattr(first)}" if first else ""
    text = (
        '<?xml version="1.0"?>\n'
        '<VTKFile type="StructuredGrid" version="1.0" byte_order="LittleEndian">\n'
        f'<StructuredGrid WholeExtent="{extent}">\n<Piece Extent="{extent}">\n'
        f"<PointData{scalars}>\n{body}</PointData>\n"
        f"<Points>\n{_data_array(None, pos.reshape(-1, 3), 3)}</Points>\n"
        "</Piece>\n</StructuredGrid>\n</VTKFile>\n"
    )
    path.write_text(text)


def _vtk_series(path: Path, grid: Gridded, suffix: str) -> list[Path]:
    writer = _write_vtu if suffix == ".vtu" else _write_vts
    slices = list(_slices(grid))
    if slices[0][0] is None:
        writer(path, grid, slices[0][1], slices[0][2])
        return [path]
    files = []
    for k, (_, fields, mask) in enumerate(slices):
        f = path.with_name(f"{path.stem}_{k:04d}{suffix}")
        writer(f, grid, fields, mask)
        files.append(f)
    pvd = path.with_suffix(".pvd")
    rows = "".join(f'<DataSet timestep="{t!r}" part="0" file={quoteattr(f.name)}/>\n'
                   for (t, _, _), f in zip(slices, files, strict=True))
    pvd.write_text('<?xml version="1.0"?>\n<VTKFile type="Collection" version="0.1">\n'
                   f"<Collection>\n{rows}</Collection>\n</VTKFile>\n")
    return [pvd, *files]


def _points_vtu(path: Path, cols: dict) -> Path:
    """Scattered points (``predict --points``): a cloud of vertex cells; coordinates
    ``x, y, z`` where the domain has them (others: the first three columns)."""
    meshio = _meshio()
    names = [c for c in cols if c != "shape"]
    space = [c for c in ("x", "y", "z") if c in cols] or names[:3]
    n = len(cols[names[0]])
    pos = np.zeros((n, 3))
    for i, c in enumerate(space[:3]):
        pos[:, i] = cols[c]
    data = {c: _stored(cols[c]) for c in names if c not in space}
    cells = [("vertex", np.arange(n)[:, None])]
    meshio.write(str(path), meshio.Mesh(pos, cells, point_data=data), file_format="vtu")
    return path
