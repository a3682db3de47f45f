r"""Figures for incompressible-flow runs (problems in ``pinnkit/problems/navier_stokes.py``).

- `flow_fields` (`flow_fields_of` for a network and problem): velocity, pressure,
  vorticity (and the reference's) on a grid, at one time for unsteady problems.
  Derivatives (vorticity; the velocity of a stream-function network) are exact, by
  `jax.jacfwd` of the network.
- `flow_figure`: speed with streamlines, pressure, vorticity.
- `error_figure`: $|u - u^*|$, $|v - v^*|$, $|p - p^*|$ (pressure means removed), $|\omega - \omega^*|$.
- `centreline_figure`: lid-driven cavity profiles $u(0.5, y)$ and $v(x, 0.5)$ against
  Ghia, Ghia & Shin (1982).
- `animate`: a GIF of an unsteady run (matplotlib's ``PillowWriter``).
- `flow_figures`: the flow, reference and error figures of a network and its problem,
  what `pinnkit plot` draws for every 2-D flow (`is_flow`).
- `write_flow_plots`: all of the above that apply, into ``RUN/plots/``.

Maps keep the domain's aspect ratio (a 2.2 × 0.41 channel is drawn in a column of long
panels, the figure sized from it: `pinnkit.plot.layout`), and a shape's boundary is
drawn from its geometry (`pinnkit.geometry.outline.outline`), holes filled grey.

Everything takes a `pinnkit.RunData` (``pinnkit.load_run(DIR)``); matplotlib uses the Agg
backend when no interactive one is active.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .._host import HostFunction
from ..nn.evaluate import predict
from .labels import label, when
from .layout import _plt, colorbar, draw_outline, map_grid, outline_of


def _dtype(run):
    return jnp.float64 if run.config.numerics.x64 else jnp.float32


def _derived(fn, out_names: tuple[str, ...], coords: tuple[str, ...]):
    """``point -> (u, v, p, omega)`` from a network or reference ``fn`` of either form
    (``p`` is NaN for a stream-function network)."""
    ix, iy = coords.index("x"), coords.index("y")

    def one(point):
        y = fn(point)
        jac = jax.jacfwd(fn)(point)  # (outputs, coordinates)

        def d(name, axis):
            return jac[out_names.index(name), axis]

        if "psi" in out_names:
            u, v = d("psi", iy), -d("psi", ix)
            p = jnp.full_like(u, jnp.nan)
            omega = y[out_names.index("omega")]
        else:
            u, v, p = (y[out_names.index(n)] for n in ("u", "v", "p"))
            omega = d("v", ix) - d("u", iy)
        return jnp.stack([u, v, p, omega])

    return one


def _host_derived(fn, out_names, pts, shape, ix: int, iy: int) -> np.ndarray:
    """``(u, v, p, omega)`` rows of a host reference (`pinnkit.physics.host.HostFunction`,
    e.g. a finite-element solution) on the grid ``pts`` of ``shape``: the values by numpy,
    the vorticity by central differences on the grid (one-sided at its edges; NaN next to
    points outside the reference's domain)."""
    y = fn.host(pts, np.float64)
    u, v, p = (y[:, out_names.index(n)].reshape(shape) for n in ("u", "v", "p"))
    X, Y = pts[:, ix].reshape(shape), pts[:, iy].reshape(shape)
    omega = np.gradient(v, X[:, 0], axis=0) - np.gradient(u, Y[0], axis=1)
    return np.stack([a.ravel() for a in (u, v, p, omega)], axis=1)


def is_flow(problem) -> bool:
    """A 2-D incompressible flow: space ``(x, y)`` (and maybe ``t``), fields ``u, v, p``
    or a stream function and vorticity ``psi, omega`` (built-in or expression problems)."""
    space = tuple(c for c in problem.domain.coords if c != "t")
    names = set(problem.out_names)
    return space == ("x", "y") and ({"u", "v", "p"} <= names or {"psi", "omega"} <= names)


def _sdf(domain, pts: np.ndarray, coords) -> np.ndarray | None:
    """The signed distance of a shape's spatial part at ``pts`` (negative inside); None
    for a box."""
    from ..geometry.base import AbstractShape
    from ..geometry.domains import SpaceTime

    shape = domain.space if isinstance(domain, SpaceTime) else domain
    if not isinstance(shape, AbstractShape):
        return None
    space = [coords.index(c) for c in shape.coords]
    return np.asarray(jax.jit(jax.vmap(shape.sdf))(jnp.asarray(pts[:, space])))


def _counts(resolution, width: float, height: float) -> tuple[int, int]:
    """``(n_x, n_y)``: an int is the count along the shorter side, the longer side gets
    as many more as keep the cells square (a 2.2 × 0.41 channel at 83: 446 × 83)."""
    if not isinstance(resolution, int):
        return tuple(int(n) for n in resolution)
    if width >= height:
        return max(resolution, round(resolution * width / height)), resolution
    return resolution, max(resolution, round(resolution * height / width))


def flow_fields(run, resolution: int | tuple[int, int] = 101, t: float | None = None,
                window: tuple[tuple[float, float], tuple[float, float]] | None = None,
                ) -> dict:
    r"""The flow of a run on a grid over its spatial box (or ``window``): `flow_fields_of`
    for a `pinnkit.RunData`, in the run's precision."""
    return flow_fields_of(run.network, run.problem, resolution, t, window, _dtype(run),
                          min(run.config.eval.batch, 4096))


def flow_fields_of(network, problem, resolution: int | tuple[int, int] = 101, t: float | None = None,
                   window: tuple[tuple[float, float], tuple[float, float]] | None = None,
                   dtype=jnp.float32, batch: int = 4096) -> dict:
    r"""The flow of ``network`` (and of ``problem.reference``) on a grid.

    **Arguments:**
    - `network`, `problem`: a trained network and its flow problem (`is_flow`).
    - `resolution`: points along the shorter side of the box (square cells; `_counts`), or
      ``(n_x, n_y)``.
    - `t`: the time of an unsteady problem (default: its final time); ignored if steady.
    - `window`: ``((x0, y0), (x1, y1))``, a part of the box to draw (default: all of it).
    - `dtype`, `batch`: evaluation precision and batch size.

    **Returns:** ``{"x", "y", "u", "v", "p", "omega", "speed"}`` as ``(n_x, n_y)`` arrays
    (``indexing="ij"``), plus ``"t"`` for unsteady problems, ``<name>_ref`` for each field
    when the problem has a reference, and ``"units"`` (the problem's). On a shape
    (`pinnkit.geometry`) the fields are NaN outside the domain, ``"sdf"`` holds its signed
    distance and ``"outline"`` its boundary (`pinnkit.plot.layout.outline_of`).
    """
    coords = problem.domain.coords
    lo, hi = problem.domain.bounds()
    ix, iy = coords.index("x"), coords.index("y")
    (x0, y0), (x1, y1) = window if window is not None else ((lo[ix], lo[iy]), (hi[ix], hi[iy]))
    nx, ny = _counts(resolution, x1 - x0, y1 - y0)
    X, Y = np.meshgrid(np.linspace(x0, x1, nx), np.linspace(y0, y1, ny), indexing="ij")
    pts = np.zeros((X.size, len(coords)))
    pts[:, ix], pts[:, iy] = X.ravel(), Y.ravel()
    out = {"x": X, "y": Y, "units": problem.units_map, "outline": outline_of(problem.domain)}
    if "t" in coords:
        t = hi[coords.index("t")] if t is None else float(t)
        pts[:, coords.index("t")] = t
        out["t"] = np.asarray(t)
    inside = problem.error_mask(pts)  # a singular point of the reference (a corner's pressure) left blank
    sdf = _sdf(problem.domain, pts, coords)
    if sdf is not None:
        out["sdf"] = sdf.reshape(X.shape)
    sources = [("", network)]
    if problem.reference is not None:
        sources.append(("_ref", problem.reference))
    for suffix, fn in sources:
        if isinstance(fn, HostFunction):  # numpy values, no derivatives: vorticity by
            vals = _host_derived(fn, problem.out_names, pts, X.shape, ix, iy)  # differences
        else:
            vals = predict(_derived(fn, problem.out_names, coords), pts, batch, dtype)
        if inside is not None:  # no values drawn outside the shape
            vals = np.where(inside[:, None], vals, np.nan)
        for i, name in enumerate(("u", "v", "p", "omega")):
            out[name + suffix] = vals[:, i].reshape(X.shape)
        out["speed" + suffix] = np.hypot(out["u" + suffix], out["v" + suffix])
    return out


def _aspect(fields) -> float:
    return float(np.ptp(fields["x"]) / np.ptp(fields["y"]))


def _panel(fig, ax, fields, values, title, cmap="viridis", symmetric=False, bar=""):
    # Signed fields: a symmetric range at the 99.5th percentile, so that corner
    # singularities (cavity pressure and vorticity) do not wash out the interior.
    vmax = np.nanpercentile(np.abs(values), 99.5) if symmetric else None
    im = ax.pcolormesh(fields["x"], fields["y"], values, shading="auto", cmap=cmap,
                       vmin=-vmax if symmetric else None, vmax=vmax, rasterized=True)
    draw_outline(ax, fields.get("outline", []))
    units = fields.get("units", {})
    ax.set_title(title, fontsize=10)
    ax.set(xlabel=label("x", units), ylabel=label("y", units),
           xlim=(fields["x"].min(), fields["x"].max()), ylim=(fields["y"].min(), fields["y"].max()))
    colorbar(fig, ax, im, bar)
    return im


def _grid(fields, n: int, title: str):
    """``n`` panels in a column for a long domain (wider than 1.6 : 1), else in a row;
    boxes with the domain's aspect ratio (`pinnkit.plot.layout.map_grid`)."""
    aspect = _aspect(fields)
    if "t" in fields:
        title = f"{title} (at {when('t', float(fields['t']), fields.get('units', {}))})".strip()
    shape = (n, 1) if aspect > 1.6 else (1, n)
    fig, axes = map_grid(*shape, aspect, suptitle=bool(title))
    if title:
        fig.suptitle(title, fontsize=11, y=1 - 0.12 / fig.get_figheight())
    return fig, axes.ravel()


def _streamlines(ax, fields, suffix):
    # streamplot wants 1-D axes and [y, x]-indexed arrays; masked outside a shape (no
    # streamlines through a hole); seeds spread in proportion to the sides
    u, v = (np.ma.masked_invalid(fields[c + suffix].T) for c in ("u", "v"))
    a = _aspect(fields)
    density = (1.1 * max(a, 1.0) ** 0.8, 1.1 * max(1 / a, 1.0) ** 0.8)
    lims = ax.get_xlim(), ax.get_ylim()  # streamplot may pad them: keep the image's
    ax.streamplot(fields["x"][:, 0], fields["y"][0], u, v, color="white", density=density,
                  linewidth=0.6, arrowsize=0.6, zorder=2)
    ax.set(xlim=lims[0], ylim=lims[1])


def flow_figure(fields: dict, title: str = "", suffix: str = ""):
    """Speed with streamlines, pressure and vorticity (``suffix="_ref"``: the reference)."""
    has_p = not np.all(np.isnan(fields["p" + suffix]))
    names = ["speed", "p", "omega"] if has_p else ["speed", "omega"]
    fig, axes = _grid(fields, len(names), title)
    units = fields.get("units", {})
    for ax, name in zip(axes, names, strict=True):
        vals = fields[name + suffix]
        if name == "speed":
            _panel(fig, ax, fields, vals, "speed |u| and streamlines", "viridis",
                   bar=label("|u|", {"|u|": units.get("u", "")}))
            _streamlines(ax, fields, suffix)
        elif name == "p":
            _panel(fig, ax, fields, vals - np.nanmean(vals), "pressure, mean removed (clipped at 99.5 %)",
                   "RdBu_r", True, bar=label("p", units))
        else:
            _panel(fig, ax, fields, vals, "vorticity ω = ∂v/∂x − ∂u/∂y (clipped at 99.5 %)", "RdBu_r", True,
                   bar="ω")
    return fig


def error_figure(fields: dict, title: str = ""):
    """Absolute errors against the reference: u, v, p (means removed), ω."""
    names = [n for n in ("u", "v", "p", "omega") if not np.all(np.isnan(fields[n]))]
    fig, axes = _grid(fields, len(names), title)
    units = fields.get("units", {})
    for ax, name in zip(axes, names, strict=True):
        err = fields[name] - fields[name + "_ref"]
        ref = fields[name + "_ref"]
        if name == "p":  # NaN-aware: a shape's fields are NaN outside it
            err, ref = err - np.nanmean(err), ref - np.nanmean(ref)
        rel = np.sqrt(np.nansum(err**2)) / max(np.sqrt(np.nansum(ref**2)), 1e-300)
        sym = "ω" if name == "omega" else name
        # p's figure is of p less its mean (its own gauge), so it can differ from summary.json's
        what = f"|{sym} − {sym}*|" + (", means removed" if name == "p" else "")
        _panel(fig, ax, fields, np.abs(err), f"{what} (rel. L2 {rel:.1e})", "magma",
               bar=f"|error| of {label(sym, units)}")
    return fig


def centreline_figure(run, Re: float | None = None, n: int = 201):
    """Lid-driven cavity: $u(0.5, y)$ and $v(x, 0.5)$ of the run against Ghia et al."""
    from ..problems.ghia import GHIA_U, GHIA_V, GHIA_X, GHIA_Y, ghia_deviation

    plt = _plt()
    Re = float(run.config.problem.params.get("Re", 100.0)) if Re is None else float(Re)
    key = int(round(Re))
    s = np.linspace(0.0, 1.0, n)
    half = np.full_like(s, 0.5)
    names = run.problem.out_names
    u = run.predict(np.stack([half, s], axis=1))[:, names.index("u")]
    v = run.predict(np.stack([s, half], axis=1))[:, names.index("v")]
    dev = ghia_deviation(run, Re)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True)
    axes[0].plot(u, s, label="pinnkit")
    axes[0].plot(GHIA_U[key], GHIA_Y, "o", mfc="none", label="Ghia et al. (1982)")
    axes[0].set(xlabel="u(0.5, y)", ylabel="y", title=f"u on x = 0.5 (max dev. {dev['u']:.3f})")
    axes[1].plot(s, v, label="pinnkit")
    axes[1].plot(GHIA_X, GHIA_V[key], "o", mfc="none", label="Ghia et al. (1982)")
    axes[1].set(xlabel="x", ylabel="v(x, 0.5)", title=f"v on y = 0.5 (max dev. {dev['v']:.3f})")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"Lid-driven cavity, Re = {Re:g}")
    return fig


def animate(run, path, frames: int = 24, resolution: int = 64, field: str = "omega", fps: int = 8):
    """Writes a GIF of ``field`` (``"omega"``, ``"speed"``, ``"u"``, ``"v"``, ``"p"``) of an
    unsteady run from $t_0$ to $t_1$, with the reference alongside when there is one.

    **Returns:** the path written.
    """
    from matplotlib.animation import FuncAnimation, PillowWriter

    plt = _plt()
    coords = run.problem.domain.coords
    if "t" not in coords:
        raise ValueError(f"animate needs an unsteady problem (a 't' coordinate): coords={coords}")
    lo, hi = run.problem.domain.bounds()
    it = coords.index("t")
    times = np.linspace(lo[it], hi[it], frames)
    snaps = [flow_fields(run, resolution, t) for t in times]
    has_ref = f"{field}_ref" in snaps[0]
    keys = [field, f"{field}_ref"] if has_ref else [field]
    vmax = max(np.nanmax(np.abs(s[k])) for s in snaps for k in keys)
    signed = field != "speed"
    aspect = _aspect(snaps[0])
    fig, axes = map_grid(*((len(keys), 1) if aspect > 1.6 else (1, len(keys))), aspect, suptitle=True)
    axes = axes.ravel()
    images = []
    for ax, k in zip(axes, keys, strict=True):
        im = _panel(fig, ax, snaps[0], snaps[0][k], "pinnkit" if k == field else "reference",
                    "RdBu_r" if signed else "viridis", bar=field)
        im.set_clim(-vmax if signed else 0.0, vmax)
        images.append(im)

    def update(i):
        for im, k in zip(images, keys, strict=True):
            im.set_array(snaps[i][k].ravel())
        fig.suptitle(f"{run.problem.name}: {field}, {when('t', times[i], run.problem.units_map)}",
                     fontsize=11, y=1 - 0.12 / fig.get_figheight())
        return images

    anim = FuncAnimation(fig, update, frames=frames, blit=False)
    path = Path(path)
    anim.save(path, writer=PillowWriter(fps=fps))
    plt.close(fig)
    return path


def flow_figures(network, problem, resolution: int = 101, dtype=jnp.float32, batch: int = 4096) -> dict:
    """``{"flow.png": flow_figure, "flow_reference.png", "flow_error.png"}`` (the last two
    when the problem has a reference) of a 2-D flow (`is_flow`), at the final time of an
    unsteady one; what `pinnkit plot` draws besides the field maps."""
    fields = flow_fields_of(network, problem, resolution, dtype=dtype, batch=batch)
    figures = {"flow.png": flow_figure(fields, problem.description)}
    if problem.reference is not None:
        figures["flow_reference.png"] = flow_figure(fields, f"{problem.description}: reference",
                                                    suffix="_ref")
        figures["flow_error.png"] = error_figure(fields, f"{problem.description}: error")
    return figures


def save(figures: dict, out: Path, dpi: int = 110) -> list[Path]:
    """Writes each ``{file name: figure}`` into ``out`` and closes it; returns the paths."""
    plt = _plt()
    paths = []
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=dpi)
        plt.close(fig)
        paths.append(out / name)
    return paths


def write_flow_plots(run, resolution: int = 101, gif: bool = True) -> list[Path]:
    """Writes ``flow.png``, ``flow_reference.png`` and ``flow_error.png`` (when there is a
    reference; `flow_figures`), ``centrelines.png`` (lid-driven cavity) and ``flow.gif``
    (unsteady) into ``run.path/plots``; returns the paths."""
    out = Path(run.path) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    figures = flow_figures(run.network, run.problem, resolution, _dtype(run),
                           min(run.config.eval.batch, 4096))
    if run.problem.name == "lid_driven_cavity":
        figures["centrelines.png"] = centreline_figure(run)
    paths = save(figures, out)
    if gif and "t" in run.problem.domain.coords:
        paths.append(animate(run, out / "flow.gif"))
    return paths
