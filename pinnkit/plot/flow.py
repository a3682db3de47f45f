r"""Figures for incompressible-flow runs (problems in ``pinnkit/problems/navier_stokes.py``).

- `flow_fields`: velocity, pressure, vorticity (and the reference's) on a grid, at one
  time for unsteady problems. Derivatives (vorticity; the velocity of a
  stream-function network) are exact, by `jax.jacfwd` of the network.
- `flow_figure`: speed with streamlines, pressure, vorticity.
- `error_figure`: $|u - u^*|$, $|v - v^*|$, $|p - p^*|$ (pressure means removed), $|\omega - \omega^*|$.
- `centreline_figure`: lid-driven cavity profiles $u(0.5, y)$ and $v(x, 0.5)$ against
  Ghia, Ghia & Shin (1982).
- `animate`: a GIF of an unsteady run (matplotlib's ``PillowWriter``).
- `write_flow_plots`: all of the above that apply, into ``RUN/plots/``.

Everything takes a `pinnkit.RunData` (``pinnkit.load_run(DIR)``); matplotlib uses the Agg
backend when no interactive one is active.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ..run.metrics import predict
from .fields import _plt


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


def _outline(domain, pts: np.ndarray, coords) -> np.ndarray | None:
    """The signed distance of a shape's spatial part at ``pts`` (negative inside), whose
    zero contour is the outline; None for a box (the image fills it)."""
    from ..geometry.base import AbstractShape
    from ..geometry.domains import SpaceTime

    shape = domain.space if isinstance(domain, SpaceTime) else domain
    if not isinstance(shape, AbstractShape):
        return None
    space = [coords.index(c) for c in shape.coords]
    return np.asarray(jax.jit(jax.vmap(shape.sdf))(jnp.asarray(pts[:, space])))


def flow_fields(run, resolution: int | tuple[int, int] = 101, t: float | None = None,
                window: tuple[tuple[float, float], tuple[float, float]] | None = None,
                ) -> dict[str, np.ndarray]:
    r"""The flow of a run on a grid over its spatial box (or ``window``).

    **Arguments:**
    - `run`: a `pinnkit.RunData`.
    - `resolution`: points per direction, or ``(n_x, n_y)`` (a long channel wants more
      along $x$).
    - `t`: the time of an unsteady problem (default: its final time); ignored if steady.
    - `window`: ``((x0, y0), (x1, y1))``, a part of the box to draw (default: all of it).

    **Returns:** ``{"x", "y", "u", "v", "p", "omega", "speed"}`` as ``(n_x, n_y)`` arrays
    (``indexing="ij"``), plus ``"t"`` for unsteady problems and ``<name>_ref`` for each
    field when the problem has a reference. On a shape (`pinnkit.geometry`) the fields are
    NaN outside the domain and ``"sdf"`` holds its signed distance (the outline is its
    zero contour).
    """
    problem = run.problem
    coords = problem.domain.coords
    lo, hi = problem.domain.bounds()
    ix, iy = coords.index("x"), coords.index("y")
    nx, ny = (resolution, resolution) if isinstance(resolution, int) else resolution
    (x0, y0), (x1, y1) = window if window is not None else ((lo[ix], lo[iy]), (hi[ix], hi[iy]))
    X, Y = np.meshgrid(np.linspace(x0, x1, nx), np.linspace(y0, y1, ny), indexing="ij")
    pts = np.zeros((X.size, len(coords)))
    pts[:, ix], pts[:, iy] = X.ravel(), Y.ravel()
    out = {"x": X, "y": Y}
    if "t" in coords:
        t = hi[coords.index("t")] if t is None else float(t)
        pts[:, coords.index("t")] = t
        out["t"] = np.asarray(t)
    inside = problem.domain.inside(pts)
    sdf = _outline(problem.domain, pts, coords)
    if sdf is not None:
        out["sdf"] = sdf.reshape(X.shape)
    sources = [("", run.network)]
    if problem.reference is not None:
        sources.append(("_ref", problem.reference))
    batch = min(run.config.eval.batch, 4096)
    for suffix, fn in sources:
        vals = predict(_derived(fn, problem.out_names, coords), pts, batch, _dtype(run))
        if inside is not None:  # no values drawn outside the shape
            vals = np.where(inside[:, None], vals, np.nan)
        for i, name in enumerate(("u", "v", "p", "omega")):
            out[name + suffix] = vals[:, i].reshape(X.shape)
        out["speed" + suffix] = np.hypot(out["u" + suffix], out["v" + suffix])
    return out


def _panel(fig, ax, fields, values, title, cmap="viridis", symmetric=False):
    # Signed fields: a symmetric range at the 99.5th percentile, so that corner
    # singularities (cavity pressure and vorticity) do not wash out the interior.
    vmax = np.nanpercentile(np.abs(values), 99.5) if symmetric else None
    im = ax.pcolormesh(fields["x"], fields["y"], values, shading="auto", cmap=cmap,
                       vmin=-vmax if symmetric else None, vmax=vmax)
    if "sdf" in fields:  # the shape's outline
        ax.contour(fields["x"], fields["y"], fields["sdf"], levels=[0.0], colors="k", linewidths=0.8)
    ax.set(title=title, xlabel="x", ylabel="y", aspect="equal")
    fig.colorbar(im, ax=ax, shrink=0.85)
    return im


def flow_figure(fields: dict, title: str = "", suffix: str = ""):
    """Speed with streamlines, pressure and vorticity (``suffix="_ref"``: the reference)."""
    plt = _plt()
    has_p = not np.all(np.isnan(fields["p" + suffix]))
    names = ["speed", "p", "omega"] if has_p else ["speed", "omega"]
    # a long channel is drawn in rows, anything squarer side by side
    wide = np.ptp(fields["x"]) > 2.0 * np.ptp(fields["y"])
    layout = dict(nrows=len(names), ncols=1, figsize=(11, 2.9 * len(names))) if wide else dict(
        nrows=1, ncols=len(names), figsize=(4.8 * len(names), 4.2))
    fig, axes = plt.subplots(**layout, constrained_layout=True)
    for ax, name in zip(axes, names, strict=True):
        vals = fields[name + suffix]
        if name == "speed":
            _panel(fig, ax, fields, vals, "|u| and streamlines", "viridis")
            # streamplot wants 1-D axes and [y, x]-indexed arrays.
            # (masked outside a shape: no streamlines there)
            u, v = (np.ma.masked_invalid(fields[c + suffix].T) for c in ("u", "v"))
            lims = ax.get_xlim(), ax.get_ylim()  # streamplot may pad them: keep the image's
            ax.streamplot(fields["x"][:, 0], fields["y"][0], u, v, color="white", density=1.2,
                          linewidth=0.6, arrowsize=0.6)
            ax.set(xlim=lims[0], ylim=lims[1])
        elif name == "p":
            _panel(fig, ax, fields, vals - np.nanmean(vals), "pressure (mean removed, clipped)",
                   "RdBu_r", True)
        else:
            _panel(fig, ax, fields, vals, "vorticity ω (clipped at 99.5%)", "RdBu_r", True)
    if "t" in fields:
        title = f"{title} (at t = {float(fields['t']):.3g})".strip()
    if title:
        fig.suptitle(title)
    return fig


def error_figure(fields: dict, title: str = ""):
    """Absolute errors against the reference: u, v, p (means removed), ω."""
    plt = _plt()
    names = [n for n in ("u", "v", "p", "omega") if not np.all(np.isnan(fields[n]))]
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 4), constrained_layout=True)
    for ax, name in zip(np.atleast_1d(axes), names, strict=True):
        err = fields[name] - fields[name + "_ref"]
        ref = fields[name + "_ref"]
        if name == "p":  # NaN-aware: a shape's fields are NaN outside it
            err, ref = err - np.nanmean(err), ref - np.nanmean(ref)
        rel = np.sqrt(np.nansum(err**2)) / max(np.sqrt(np.nansum(ref**2)), 1e-300)
        _panel(fig, ax, fields, np.abs(err), f"|{name} error| (rel. L2 {rel:.1e})", "magma")
    if "t" in fields:
        title = f"{title} (at t = {float(fields['t']):.3g})".strip()
    if title:
        fig.suptitle(title)
    return fig


def centreline_figure(run, Re: float | None = None, n: int = 201):
    """Lid-driven cavity: $u(0.5, y)$ and $v(x, 0.5)$ of the run against Ghia et al."""
    from ..problems.navier_stokes import GHIA_U, GHIA_V, GHIA_X, GHIA_Y, ghia_deviation

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
    fig, axes = plt.subplots(1, len(keys), figsize=(4.6 * len(keys), 4.2), constrained_layout=True)
    axes = np.atleast_1d(axes)
    images = []
    for ax, k in zip(axes, keys, strict=True):
        im = ax.pcolormesh(snaps[0]["x"], snaps[0]["y"], snaps[0][k], shading="auto",
                           cmap="RdBu_r" if signed else "viridis",
                           vmin=-vmax if signed else 0.0, vmax=vmax)
        ax.set(title="pinnkit" if k == field else "reference", xlabel="x", ylabel="y", aspect="equal")
        images.append(im)
    fig.colorbar(images[0], ax=axes.tolist(), shrink=0.85, label=field)

    def update(i):
        for im, k in zip(images, keys, strict=True):
            im.set_array(snaps[i][k].ravel())
        fig.suptitle(f"{run.problem.name}: {field}, t = {times[i]:.3f}")
        return images

    anim = FuncAnimation(fig, update, frames=frames, blit=False)
    path = Path(path)
    anim.save(path, writer=PillowWriter(fps=fps))
    plt.close(fig)
    return path


def write_flow_plots(run, resolution: int = 101, gif: bool = True) -> list[Path]:
    """Writes ``flow.png``, ``flow_reference.png`` and ``flow_error.png`` (when there is a
    reference), ``centrelines.png`` (lid-driven cavity) and ``flow.gif`` (unsteady) into
    ``run.path/plots``; returns the paths."""
    plt = _plt()
    out = Path(run.path) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    fields = flow_fields(run, resolution)
    figures = {"flow.png": flow_figure(fields, run.problem.description)}
    if run.problem.reference is not None:
        figures["flow_reference.png"] = flow_figure(fields, "reference", suffix="_ref")
        figures["flow_error.png"] = error_figure(fields, run.problem.description)
    if run.problem.name == "lid_driven_cavity":
        figures["centrelines.png"] = centreline_figure(run)
    paths = []
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        paths.append(out / name)
    if gif and "t" in run.problem.domain.coords:
        paths.append(animate(run, out / "flow.gif"))
    return paths
