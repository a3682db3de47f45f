"""Maps of fields on the sphere: lat–lon and global (Mollweide) maps, error maps,
Hovmöller diagrams, animations, and NetCDF export with CF metadata.

Everything works on a trained run (`pinnkit.load_run`) whose problem lives on a
`pinnkit.sphere.Sphere`; fields are evaluated on a Gaussian grid (`Sphere.grid`) and
returned as arrays ``(time, lat, lon)`` with latitudes ascending and longitudes in
degrees east from 0. Map projections are matplotlib's own (no data downloads).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import PinnkitError
from ..sphere.domain import Sphere


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _sphere(problem) -> Sphere:
    if not isinstance(problem.domain, Sphere):
        raise PinnkitError(
            f"sphere plots need a problem on a Sphere; {problem.name!r} lives on a "
            f"{type(problem.domain).__name__}: use pinnkit.plot instead"
        )
    return problem.domain


def latlon_fields(run, times=None, nlat: int = 48) -> dict[str, np.ndarray]:
    """Fields of ``run`` on a Gaussian grid with ``nlat`` latitudes and ``2 nlat`` longitudes.

    **Arguments:** `run`: a `pinnkit.RunData`; `times`: list of times (default: start and
    end of the interval; ignored for a steady sphere); `nlat`: latitudes.

    **Returns:** ``{"lon": (nlon,) deg, "lat": (nlat,) deg, "time": (nt,), <field>: (nt, nlat,
    nlon), <field>_ref: ... (if the problem has a reference)}``.
    """
    dom = _sphere(run.problem)
    times = [dom.t0, dom.t1] if times is None and dom.timed else times
    pts, shape = dom.grid(nlat, times=times) if dom.timed else dom.grid(nlat)
    ref = None
    if run.problem.reference is not None:
        import jax
        import jax.numpy as jnp

        ref = np.asarray(jax.jit(jax.vmap(run.problem.reference))(jnp.asarray(pts)))
    grid = {"points": pts, "shape": shape, "pred": run.predict(pts), "ref": ref}
    return fields_from_grid(run.problem, grid)


def fields_from_grid(problem, grid: dict) -> dict[str, np.ndarray]:
    """`latlon_fields`-style arrays from an evaluation grid (`Sphere.grid` points, as
    `pinnkit.parallel.mesh.evaluate_sharded` returns them), for `pinnkit.plot.write_plots`."""
    dom = _sphere(problem)
    shape = grid["shape"] if dom.timed else (1, *grid["shape"])
    pts = grid["points"]
    nxy = shape[1] * shape[2]
    xyz = pts[:nxy, -3:].reshape(shape[1], shape[2], 3)
    out = {
        "lon": np.degrees(np.mod(np.arctan2(xyz[:, 0, 1], xyz[:, 0, 0]), 2 * np.pi)),
        "lat": np.degrees(np.arcsin(np.clip(xyz[0, :, 2] / dom.radius, -1, 1))),
        "time": pts[::nxy, 0] if dom.timed else np.zeros(1),
    }
    for key, vals in (("", grid["pred"]), ("_ref", grid.get("ref"))):
        if vals is not None:
            v = np.asarray(vals).reshape(*shape, -1).transpose(0, 2, 1, 3)
            out.update({f"{n}{key}": v[..., i] for i, n in enumerate(problem.out_names)})
    return out


def _wrapped(lon_deg: np.ndarray, values: np.ndarray):
    """Longitudes in radians on [-π, π) (sorted) with the values' last axis permuted alike."""
    lam = np.radians((lon_deg + 180.0) % 360.0 - 180.0)
    order = np.argsort(lam)
    return lam[order], values[..., order]


def map_axes(ax, lon, lat, values, *, title: str = "", cmap: str = "viridis", projected: bool = True,
             vmin=None, vmax=None):
    """Draws ``values`` ``(nlat, nlon)`` on ``ax``: a projected axes (``projection=
    "mollweide"`` or ``"hammer"``, radians) when ``projected``, else a plain lat–lon
    axes in degrees. Returns the mappable for a colour bar."""
    if projected:
        lam, v = _wrapped(lon, values)
        im = ax.pcolormesh(lam, np.radians(lat), v, shading="auto", cmap=cmap, vmin=vmin, vmax=vmax)
        ax.grid(True, lw=0.3)
        ax.set_xticklabels([])
    else:
        im = ax.pcolormesh(lon, lat, values, shading="auto", cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set(xlabel="longitude (°E)", ylabel="latitude (°N)")
    ax.set_title(title, fontsize=10)
    return im


def map_figure(fields: dict, name: str, time_index: int = -1, projection: str | None = "mollweide"):
    """Prediction, reference and error of field ``name`` at one time: a row of maps
    (``projection`` = a matplotlib projection name, or None for plain lat–lon axes)."""
    plt = _plt()
    t = fields["time"][time_index]
    panels = [("prediction", fields[name][time_index], "viridis")]
    if f"{name}_ref" in fields:
        ref = fields[f"{name}_ref"][time_index]
        panels += [("reference", ref, "viridis"), ("error", fields[name][time_index] - ref, "RdBu_r")]
    fig = plt.figure(figsize=(5.2 * len(panels), 3.4), constrained_layout=True)
    for k, (title, vals, cmap) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), k + 1, projection=projection)
        lim = float(np.max(np.abs(vals))) if cmap == "RdBu_r" else None
        im = map_axes(ax, fields["lon"], fields["lat"], vals, title=f"{name} {title}, t = {t:.3g}",
                      cmap=cmap, projected=projection is not None,
                      vmin=-lim if lim else None, vmax=lim)
        fig.colorbar(im, ax=ax, orientation="horizontal", shrink=0.7, pad=0.04)
    return fig


def hovmoller_figure(fields: dict, name: str, lat: float = 0.0):
    """Hovmöller diagram: field ``name`` at the grid latitude nearest ``lat`` (degrees)
    against longitude (horizontal) and time (vertical), prediction and (if known) error."""
    plt = _plt()
    j = int(np.argmin(np.abs(fields["lat"] - lat)))
    panels = [("prediction", fields[name][:, j, :], "viridis")]
    if f"{name}_ref" in fields:
        panels.append(("error", fields[name][:, j, :] - fields[f"{name}_ref"][:, j, :], "RdBu_r"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), constrained_layout=True)
    for ax, (title, vals, cmap) in zip(np.atleast_1d(axes), panels, strict=True):
        lim = float(np.max(np.abs(vals))) if cmap == "RdBu_r" else None
        im = ax.pcolormesh(fields["lon"], fields["time"], vals, shading="auto", cmap=cmap,
                           vmin=-lim if lim else None, vmax=lim)
        ax.set(xlabel="longitude (°E)", ylabel="time",
               title=f"{name} {title} at latitude {fields['lat'][j]:.1f}°")
        fig.colorbar(im, ax=ax)
    return fig


def animate(run, name: str, path: str | Path, frames: int = 12, nlat: int = 32, fps: int = 4) -> Path:
    """GIF of field ``name`` on a Mollweide map over ``frames`` times of the interval."""
    from matplotlib.animation import FuncAnimation, PillowWriter

    plt = _plt()
    dom = _sphere(run.problem)
    times = np.linspace(dom.t0, dom.t1, frames) if dom.timed else [0.0]
    f = latlon_fields(run, list(times), nlat)
    vmin, vmax = float(f[name].min()), float(f[name].max())
    fig = plt.figure(figsize=(6, 3.4))
    ax = fig.add_subplot(projection="mollweide")

    def draw(k):
        ax.clear()
        map_axes(ax, f["lon"], f["lat"], f[name][k], title=f"{name}, t = {f['time'][k]:.3g}",
                 vmin=vmin, vmax=vmax)

    anim = FuncAnimation(fig, draw, frames=len(f["time"]))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    anim.save(path, writer=PillowWriter(fps=fps))
    plt.close(fig)
    return path


def _stored(v) -> np.ndarray:
    a = np.asarray(v)
    return a.astype(np.float64 if a.dtype == np.float64 else np.float32)


def to_netcdf(fields: dict, path: str | Path, *, title: str = "pinnkit", time_units: str = "days",
              engine: str | None = None) -> Path:
    """Writes `latlon_fields` output to NetCDF with CF-1.8 metadata (``lat``/``lon``
    coordinate variables with ``units``, ``standard_name``, ``axis``; ``time`` with
    units ``"<time_units> since 0001-01-01"`` kept as numbers). Fields are stored as
    float32, float64 ones (a ``numerics.x64`` run) as float64 so the file round-trips
    exactly. Needs xarray (extra
    ``netcdf``); ``engine`` None lets xarray choose (netCDF4, h5netcdf or scipy)."""
    try:
        import xarray as xr
    except ImportError:
        raise PinnkitError("NetCDF export needs xarray: pip install 'pinnkit[netcdf]'") from None
    coords = {
        "time": ("time", fields["time"], {"standard_name": "time", "axis": "T",
                                          "units": f"{time_units} since 0001-01-01", "calendar": "none"}),
        "lat": ("lat", fields["lat"], {"standard_name": "latitude", "units": "degrees_north", "axis": "Y"}),
        "lon": ("lon", fields["lon"], {"standard_name": "longitude", "units": "degrees_east", "axis": "X"}),
    }
    data = {k: (("time", "lat", "lon"), _stored(v), {"long_name": k})
            for k, v in fields.items() if k not in coords}
    ds = xr.Dataset(data, coords=coords, attrs={"Conventions": "CF-1.8", "title": title,
                                                "source": "pinnkit PINN"})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.to_netcdf(path, engine=engine)
    return path


def write_sphere_plots(run, nlat: int = 48) -> list[Path]:
    """``plots/<field>_map.png`` (final time, Mollweide) and ``plots/<field>_hovmoller.png``
    (equator, time-dependent problems) for every field of ``run``."""
    plt = _plt()
    dom = _sphere(run.problem)
    out = Path(run.path) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    times = list(np.linspace(dom.t0, dom.t1, 13)) if dom.timed else None
    f = latlon_fields(run, times, nlat)
    paths = []
    for name in run.problem.out_names:
        for kind, fig in (("map", map_figure(f, name)),
                          ("hovmoller", hovmoller_figure(f, name) if dom.timed else None)):
            if fig is None:
                continue
            p = out / f"{name}_{kind}.png"
            fig.savefig(p, dpi=100)
            plt.close(fig)
            paths.append(p)
    return paths
