"""Observations from files: CSV, NPZ or NetCDF columns → an `Observation` term.

A file is read as a table of named 1-D columns of equal length ``n``:

- **CSV**: a header line of column names, then numbers (``#`` comments allowed).
- **NPZ** (`numpy.savez`): one 1-D array per column name.
- **NetCDF** (``.nc``, needs the optional ``xarray`` and ``netCDF4``/``h5netcdf``
  packages): ``Dataset.to_dataframe()``, so gridded variables are flattened and their
  dimension coordinates (``lat``, ``time``...) become columns too.

Columns are mapped by name: ``coords`` maps each coordinate of the domain to a column
(default: the coordinate's own name), ``fields`` maps observed output fields to columns.
An optional ``weight`` column gives per-point weights $w_j$, or a ``sigma`` column the
noise standard deviation $\\sigma_j$ of a Gaussian noise model ($w_j \\propto 1/\\sigma_j^2$,
normalised to mean 1 so that the term's scale does not depend on the units of $\\sigma$).

Every problem with the data is a `DataError` naming the file and the column: a missing
column, a NaN, a column that is not 1-D or not of the common length, a point outside the
domain.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import PinnkitError
from .terms import Observation


class DataError(PinnkitError, ValueError):
    """An observation file is missing, unreadable, or its columns are unusable."""


def read_table(path: str | Path, what: str = "observation file") -> dict[str, np.ndarray]:
    """``{column: array}`` of a CSV, NPZ or NetCDF file (arrays as stored, not checked);
    ``what`` names the file in errors (``"points file"`` for `pinnkit predict --points`)."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a folder, FIFO or device: never opened
        raise DataError(f"observation file {str(path)!r} is not a regular file; give a .csv, .npz or .nc "
                        "file")
    if not path.is_file():
        raise DataError(f"{what} {str(path)!r} not found (current folder: {Path.cwd()})")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return {k: np.asarray(z[k]) for k in z.files}
        if suffix in (".nc", ".nc4", ".netcdf", ".cdf"):
            return _read_netcdf(path, what)
        if suffix in (".csv", ".txt", ".dat"):
            return _read_csv(path, what)
    except DataError:
        raise
    except (OSError, ValueError, csv.Error) as e:  # csv.Error: e.g. a field over csv's size limit
        raise DataError(f"{what} {str(path)!r} cannot be read: {e}") from None
    raise DataError(
        f"{what} {str(path)!r}: unknown format {suffix!r}; use .csv (header line of "
        "column names), .npz (numpy.savez, one 1-D array per column) or .nc (NetCDF)"
    )


def _read_csv(path: Path, what: str = "observation file") -> dict[str, np.ndarray]:
    with open(path, newline="") as fh:
        lines = [ln for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
    rows = list(csv.reader(lines))
    if not rows:
        raise DataError(f"{what} {str(path)!r} is empty (expected a header line of column names)")
    header = [h.strip() for h in rows[0]]
    cols: dict[str, list] = {h: [] for h in header}
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DataError(  # the file's own text is never quoted: it may be anything
                f"{what} {str(path)!r}: data line {i} has {len(row)} values, the header "
                f"line has {len(header)} columns; give every line one value per column"
            )
        for h, v in zip(header, row, strict=True):
            cols[h].append(v.strip())
    out = {}
    for h, vals in cols.items():
        try:
            out[h] = np.array([float(v) if v not in ("", "NA", "nan", "NaN") else np.nan for v in vals])
        except ValueError:  # refused by `_column` if pinnkit reads it, under the name it expects
            out[h] = np.array(vals, dtype=object)
    return out


def _read_netcdf(path: Path, what: str = "observation file") -> dict[str, np.ndarray]:
    try:
        import xarray as xr
    except ImportError:
        raise DataError(
            f"{what} {str(path)!r} is NetCDF, which needs the optional packages xarray "
            "and netCDF4 (or h5netcdf): pip install 'pinnkit[netcdf]'; or convert the file to "
            ".npz or .csv"
        ) from None
    with xr.open_dataset(path) as ds:
        df = ds.to_dataframe().reset_index()
    return {str(c): np.asarray(df[c]) for c in df.columns}


def _is_number(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def _column(table: dict, path, name: str, role: str, n: int | None,
            what: str = "observation file") -> np.ndarray:
    if name not in table:
        headerless = bool(table) and all(_is_number(k) for k in table)
        raise DataError(  # the header's text is not quoted: the file may be anything
            f"{what} {str(path)!r}: column {name!r} ({role}) is missing; its header "
            f"(a CSV's first line that is not a # comment, an NPZ's array names) has "
            f"{len(table)} column(s), none named {name!r}"
            + ("; its first line looks like data: start the file with a header line naming the "
               "columns" if headerless else "")
        )
    a = np.asarray(table[name])
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        want = f"({n},)" if n is not None else "(n,)"
        raise DataError(
            f"{what} {str(path)!r}: column {name!r} ({role}) has shape {a.shape}; every "
            f"column must be 1-D of the same length, expected {want}"
        )
    try:
        a = a.astype(np.float64)
    except (TypeError, ValueError):
        row = next((i for i, v in enumerate(a.tolist()) if not _is_number(v)), 0)
        raise DataError(f"{what} {str(path)!r}: column {name!r} ({role}) is not numeric "
                        f"(first at row {row})") from None
    bad = ~np.isfinite(a)
    if bad.any():
        raise DataError(
            f"{what} {str(path)!r}: column {name!r} ({role}) has {int(bad.sum())} NaN or "
            f"infinite values (first at row {int(np.argmax(bad))}); drop those rows or fill them"
        )
    return a


def _mapping(spec, default_names: Sequence[str]) -> dict[str, str]:
    if spec is None:
        return {c: c for c in default_names}
    if isinstance(spec, Mapping):
        return {str(k): str(v) for k, v in spec.items()}
    return {str(c): str(c) for c in spec}


def load_observations(
    path: str | Path,
    fields: Mapping[str, str] | Sequence[str],
    *,
    domain=None,
    coords: Mapping[str, str] | Sequence[str] | None = None,
    weight: str | None = None,
    sigma: str | None = None,
) -> Observation:
    """An `Observation` term from a CSV/NPZ/NetCDF file (see the module docstring).

    **Arguments:**
    - `path`: the file.
    - `fields`: observed output fields: ``{field: column}`` or a list of names used as both.
    - `domain`: the problem's domain: gives the coordinate order and rejects points outside
      it (`AbstractDomain.contains`). Without it, `coords` must be given and is used in order.
    - `coords`: ``{coordinate: column}``; default: each coordinate's own name.
    - `weight`: column of per-point weights $w_j \\ge 0$; or `sigma`: column of noise
      standard deviations ($w_j \\propto \\sigma_j^{-2}$, mean 1). At most one.

    **Raises:** `DataError` naming the file and the column.
    """
    if weight is not None and sigma is not None:
        raise DataError(f"observation file {str(path)!r}: give a weight column or a sigma column, not both")
    if domain is None and coords is None:
        raise ValueError("load_observations needs the domain or an explicit coords mapping")
    table = read_table(path)
    names = domain.coords if domain is not None else list(_mapping(coords, ()))
    cmap = {**{c: c for c in names}, **_mapping(coords, ())}  # unmapped: same name
    missing = [c for c in names if c not in cmap]
    if missing:
        raise DataError(
            f"observation file {str(path)!r}: no column given for coordinate(s) {missing}; map them "
            f"with coords: {{coordinate: column}}"
        )
    first = cmap[names[0]]
    n = None
    if first in table and np.ndim(table[first]) == 1:
        n = int(np.shape(table[first])[0])
    pts = np.stack([_column(table, path, cmap[c], f"coordinate {c}", n) for c in names], axis=1)
    fmap = _mapping(fields, ())
    if not fmap:
        raise DataError(f"observation file {str(path)!r}: no observed fields given")
    vals = np.stack([_column(table, path, col, f"field {f}", n) for f, col in fmap.items()], axis=1)
    w = None
    if weight is not None:
        w = _column(table, path, weight, "weight", n)
        if np.any(w < 0):
            raise DataError(f"observation file {str(path)!r}: column {weight!r} (weight) has negative values")
    if sigma is not None:
        s = _column(table, path, sigma, "sigma", n)
        if np.any(s <= 0):
            raise DataError(f"observation file {str(path)!r}: column {sigma!r} (sigma) needs values > 0")
        w = 1.0 / s**2
        w = w / w.mean()
    if domain is not None:
        _check_inside(domain, pts, path, names, cmap)
    return Observation(pts, vals, tuple(fmap), weights=w)


def _check_inside(domain, pts, path, names, cmap) -> None:
    import jax
    import jax.numpy as jnp

    # float64 on the host: a point on the boundary must not fall outside by round-off.
    with jax.enable_x64(True):
        inside = np.asarray(jax.vmap(domain.contains)(jnp.asarray(pts, jnp.float64)))
    if not inside.all():
        i = int(np.argmin(inside))
        lo, hi = domain.bounds()
        cols = [
            f"{cmap[c]!r}={pts[i, k]:g} (range [{lo[k]:g}, {hi[k]:g}])"
            for k, c in enumerate(names) if not lo[k] <= pts[i, k] <= hi[k]
        ] or [f"{cmap[c]!r}={pts[i, k]:g}" for k, c in enumerate(names)]
        raise DataError(
            f"observation file {str(path)!r}: {int((~inside).sum())} point(s) lie outside the "
            f"problem's domain; first at row {i}: column {', '.join(cols)}"
        )


def write_table(path: str | Path, columns: Mapping[str, np.ndarray]) -> Path:
    """Writes ``{column: (n,) array}`` as CSV, NPZ or NetCDF, chosen by the suffix."""
    path = Path(path)
    cols = {k: np.asarray(v) for k, v in columns.items()}
    suffix = path.suffix.lower()
    if suffix == ".npz":
        np.savez(path, **cols)
    elif suffix in (".nc", ".nc4"):
        try:
            import xarray as xr
        except ImportError:
            raise DataError(
                f"{str(path)!r}: writing NetCDF needs the optional packages xarray and netCDF4 "
                "(pip install 'pinnkit[netcdf]'); write .npz or .csv instead"
            ) from None
        xr.Dataset({k: ("point", v) for k, v in cols.items()}).to_netcdf(path)
    elif suffix in (".csv", ".txt"):
        names = list(cols)
        data = np.stack([cols[k] for k in names], axis=1) if names else np.zeros((0, 0))
        np.savetxt(path, data, delimiter=",", header=",".join(names), comments="", fmt="%.9g")
    else:
        raise DataError(f"{str(path)!r}: unknown output format {suffix!r}; use .csv, .npz or .nc")
    return path
