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
from .layout import _plt


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


def periodic_cells(lon_deg: np.ndarray, start: float = -180.0) -> tuple[np.ndarray, np.ndarray]:
    """Cell edges in longitude (degrees) covering ``[start, start + 360]`` whole, and for
    every cell the index of the grid longitude it shows (nearest, periodically): the
    cell around a node next to the seam is split in two, so no column is left empty."""
    lon = np.asarray(lon_deg, np.float64)
    c = np.sort(np.mod(lon - start, 360.0))
    mids = 0.5 * (c + np.concatenate([c[1:], c[:1] + 360.0]))
    edges = np.unique(np.concatenate([[0.0, 360.0], np.mod(mids, 360.0)]))
    centre = 0.5 * (edges[:-1] + edges[1:])
    dist = np.abs(np.mod(centre[:, None] - np.mod(lon - start, 360.0)[None, :] + 180.0, 360.0) - 180.0)
    return edges + start, np.argmin(dist, axis=1)


def latitude_edges(lat_deg: np.ndarray) -> np.ndarray:
    """Edges of latitude cells around the nodes, the outer ones on the poles (a Gaussian
    grid has no node there): the polar caps show the nearest ring."""
    lat = np.asarray(lat_deg, np.float64)
    return np.concatenate([[-90.0], 0.5 * (lat[1:] + lat[:-1]), [90.0]])


def _refined(edges: np.ndarray, max_width: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Edges with every cell split into pieces at most ``max_width`` degrees wide, and for
    each piece the index of its cell: a projected map draws straight cell sides, and
    wide cells would leave slivers along the curved outline of the globe."""
    pieces = np.maximum(1, np.ceil(np.diff(edges) / max_width).astype(int))
    fine = [np.linspace(a, b, k + 1)[:-1] for a, b, k in zip(edges[:-1], edges[1:], pieces, strict=True)]
    return np.concatenate([*fine, edges[-1:]]), np.repeat(np.arange(edges.size - 1), pieces)


_LON_TICKS = (-120, -60, 0, 60, 120)


def _lon_name(d: float) -> str:
    d = (d + 180.0) % 360.0 - 180.0
    return "0°" if d == 0 else (f"{abs(d):g}°W" if d < 0 else f"{d:g}°E")


def map_axes(ax, lon, lat, values, *, title: str = "", cmap: str = "viridis", projected: bool = True,
             vmin=None, vmax=None):
    """Draws ``values`` ``(nlat, nlon)`` over the whole globe on ``ax``: a projected axes
    (``projection="mollweide"`` or ``"hammer"``, radians, longitudes -180..180) when
    ``projected``, else a plain lat–lon axes in degrees (0..360 °E). Cells are centred on
    the grid nodes and reach the poles and across the date line (`periodic_cells`,
    `latitude_edges`). Returns the mappable for a colour bar."""
    start = -180.0 if projected else 0.0
    lon_edges, idx = periodic_cells(lon, start)
    lat_edges = latitude_edges(lat)
    v = np.asarray(values)[:, idx]
    if projected:
        (lon_edges, i_lon), (lat_edges, i_lat) = _refined(lon_edges), _refined(lat_edges)
        v = v[i_lat][:, i_lon]
        im = ax.pcolormesh(np.radians(lon_edges), np.radians(lat_edges), v, shading="flat", cmap=cmap,
                           vmin=vmin, vmax=vmax, rasterized=True)
        ax.grid(True, lw=0.3)
        ax.set_xticks(np.radians(_LON_TICKS))
        ax.set_xticklabels([_lon_name(d) for d in _LON_TICKS], fontsize=7)
        ax.set_yticks(np.radians([-60, -30, 0, 30, 60]))
        ax.set_yticklabels(["60°S", "30°S", "0°", "30°N", "60°N"], fontsize=7)
        ax.set_xlabel("longitude", fontsize=8)
        ax.set_ylabel("latitude", fontsize=8)
    else:
        im = ax.pcolormesh(lon_edges, lat_edges, v, shading="flat", cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set(xlabel="longitude (°E)", ylabel="latitude (°N)", xlim=(0, 360), ylim=(-90, 90))
        ax.set_aspect("equal")
    ax.set_title(title, fontsize=10)
    return im


def map_figure(fields: dict, name: str, time_index: int | list[int] = -1,
               projection: str | None = "mollweide", units: dict[str, str] | None = None):
    """Prediction, reference and error of field ``name``: one row of maps per time in
    ``time_index`` (an index or a list of indices into ``fields["time"]``); ``projection``
    a matplotlib projection name, or None for plain lat–lon axes. Prediction and
    reference share one colour scale, the error a symmetric one over all rows."""
    from .labels import label, when

    plt = _plt()
    units = dict(units or {})
    rows = [time_index] if np.ndim(time_index) == 0 else list(time_index)
    has_ref = f"{name}_ref" in fields
    ncol = 3 if has_ref else 1
    pred = [fields[name][k] for k in rows]
    ref = [fields[f"{name}_ref"][k] for k in rows] if has_ref else []
    vmin = float(min(np.nanmin(v) for v in pred + ref))
    vmax = float(max(np.nanmax(v) for v in pred + ref))
    elim = max(float(np.nanmax(np.abs(p - r))) for p, r in zip(pred, ref, strict=True)) if has_ref else 0
    elim = elim or 1e-30
    fig = plt.figure(figsize=(5.2 * ncol, 3.7 * len(rows)), layout="constrained")
    # room between rows: a colour bar's label must not touch the next row's titles
    fig.get_layout_engine().set(h_pad=0.1, hspace=0.08, w_pad=0.06)
    for j, k in enumerate(rows):
        t = when("t", float(fields["time"][k]), units)
        panels = [("prediction", pred[j], "viridis", vmin, vmax)]
        if has_ref:
            panels += [("reference", ref[j], "viridis", vmin, vmax),
                       ("error", pred[j] - ref[j], "RdBu_r", -elim, elim)]
        for i, (title, vals, cmap, lo, hi) in enumerate(panels):
            ax = fig.add_subplot(len(rows), ncol, j * ncol + i + 1, projection=projection)
            im = map_axes(ax, fields["lon"], fields["lat"], vals, title=f"{name} {title}, {t}",
                          cmap=cmap, projected=projection is not None, vmin=lo, vmax=hi)
            what = label(name, units) if title != "error" else f"error of {label(name, units)}"
            fig.colorbar(im, ax=ax, orientation="horizontal", shrink=0.7, pad=0.04, label=what)
    return fig


def hovmoller_figure(fields: dict, name: str, lat: float = 0.0, units: dict[str, str] | None = None):
    """Hovmöller diagram: field ``name`` at the grid latitude nearest ``lat`` (degrees)
    against longitude (horizontal) and time (vertical, in the problem's time unit),
    prediction and (if known) error."""
    from .labels import label

    plt = _plt()
    units = dict(units or {})
    j = int(np.argmin(np.abs(fields["lat"] - lat)))
    panels = [("prediction", fields[name][:, j, :], "viridis")]
    if f"{name}_ref" in fields:
        panels.append(("error", fields[name][:, j, :] - fields[f"{name}_ref"][:, j, :], "RdBu_r"))
    lon_edges, idx = periodic_cells(fields["lon"], 0.0)
    t = np.asarray(fields["time"], np.float64)
    if t.size > 1:  # rows centred on the times, the outer ones ending at t0 and t1
        t_edges = np.concatenate([[t[0]], 0.5 * (t[1:] + t[:-1]), [t[-1]]])
    else:
        t_edges = np.array([t[0] - 0.5, t[0] + 0.5])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), 4), layout="constrained")
    # room between panels: the first colour bar's label must not run into the next panel
    fig.get_layout_engine().set(w_pad=0.08, wspace=0.08)
    for ax, (title, vals, cmap) in zip(np.atleast_1d(axes), panels, strict=True):
        lim = float(np.max(np.abs(vals))) or 1e-30 if cmap == "RdBu_r" else None
        im = ax.pcolormesh(lon_edges, t_edges, vals[:, idx], shading="flat", cmap=cmap,
                           vmin=-lim if lim else None, vmax=lim)
        ax.set(xlabel="longitude (°E)", ylabel=label("t", units), xlim=(0, 360),
               title=f"{name} {title} at latitude {fields['lat'][j]:.1f}°")
        bar = fig.colorbar(im, ax=ax, pad=0.03)
        what = label(name, units)
        bar.set_label(what if cmap == "viridis" else f"error of {what}", fontsize=9)
    return fig


def animate(run, name: str, path: str | Path, frames: int = 12, nlat: int = 32, fps: int = 4) -> Path:
    """GIF of field ``name`` on a Mollweide map over ``frames`` times of the interval."""
    from matplotlib.animation import FuncAnimation, PillowWriter

    from .labels import when

    plt = _plt()
    dom = _sphere(run.problem)
    units = run.problem.units_map
    times = np.linspace(dom.t0, dom.t1, frames) if dom.timed else [0.0]
    f = latlon_fields(run, list(times), nlat)
    vmin, vmax = float(f[name].min()), float(f[name].max())
    fig = plt.figure(figsize=(6, 3.4))
    ax = fig.add_subplot(projection="mollweide")

    def draw(k):
        ax.clear()
        map_axes(ax, f["lon"], f["lat"], f[name][k], title=f"{name}, {when('t', float(f['time'][k]), units)}",
                 vmin=vmin, vmax=vmax)

    anim = FuncAnimation(fig, draw, frames=len(f["time"]))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    anim.save(path, writer=PillowWriter(fps=fps))
    plt.close(fig)
    return path


def to_netcdf(fields: dict, path: str | Path, *, title: str = "pinnkit", units: dict[str, str] | None = None,
              time_units: str | None = None, engine: str | None = None) -> Path:
    """Writes `latlon_fields` output as CF-1.8 NetCDF that ``xarray.open_dataset(path)``
    opens with its default arguments: ``time``, ``lat``, ``lon`` coordinate variables
    (``axis``, ``units``; ``standard_name`` latitude/longitude), time a number in the
    problem's unit (``units["t"]``, or `time_units`; a duration from the initial state),
    fields with their ``units`` when known (`pinnkit.Problem` ``units``). Fields are
    stored as float32, float64 ones (a ``numerics.x64`` run) as float64 so that the file
    round-trips exactly. Needs xarray (extra ``netcdf``); ``engine`` None lets xarray
    choose (netCDF4, h5netcdf or scipy). Writer: `pinnkit.gridio.writers.to_netcdf`."""
    from ..gridio.gridded import Gridded
    from ..gridio.writers import to_netcdf as write_grid

    units = {k: v for k, v in (units or {}).items()}
    if time_units is not None:
        units["t"] = time_units
    units.update(lat="degrees_north", lon="degrees_east")
    if "t" in units:
        units["time"] = units["t"]
    dims = ("time", "lat", "lon")
    axes = {d: np.asarray(fields[d]) for d in dims}
    data = {k: np.asarray(v) for k, v in fields.items() if k not in dims}
    grid = Gridded(dims, axes, np.zeros((0, 4)), ("t", "x", "y", "z"), data, None,
                   {k: v for k, v in units.items() if k in dims or k.removesuffix("_ref") in data},
                   {"title": title})
    for k in data:  # a reference field has its field's unit
        if k.endswith("_ref") and k.removesuffix("_ref") in units:
            grid.units[k] = units[k.removesuffix("_ref")]
    return write_grid(grid, path, engine=engine)


def write_sphere_plots(run, nlat: int = 48) -> list[Path]:
    """``plots/<field>_map.png`` (start, middle and final time, Mollweide) and
    ``plots/<field>_hovmoller.png``
    (equator, time-dependent problems) for every field of ``run``."""
    plt = _plt()
    dom = _sphere(run.problem)
    out = Path(run.path) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    times = list(np.linspace(dom.t0, dom.t1, 13)) if dom.timed else None
    f = latlon_fields(run, times, nlat)
    paths = []
    for name in run.problem.out_names:
        units = run.problem.units_map
        rows = [0, len(f["time"]) // 2, len(f["time"]) - 1] if dom.timed else [0]
        for kind, fig in (("map", map_figure(f, name, rows, units=units)),
                          ("hovmoller", hovmoller_figure(f, name, units=units) if dom.timed else None)):
            if fig is None:
                continue
            p = out / f"{name}_{kind}.png"
            fig.savefig(p, dpi=100)
            plt.close(fig)
            paths.append(p)
    return paths
