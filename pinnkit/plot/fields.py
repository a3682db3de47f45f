"""Figures of a run: solution, reference and error maps per field; loss curves per term.

Uses matplotlib's non-interactive Agg backend when writing files, so it works on
clusters without a display. What each problem gets:

- steady 1-D: the field and the reference as lines, the error on a log scale;
- steady 2-D: maps over ``(x, y)``; 3-D: the map of one slice of the last coordinate;
- time-dependent, 1-D in space: the ``(t, x)`` maps and profiles at several times;
- time-dependent, 2-D or 3-D in space: spatial maps at three times (start, middle, end);
- the sphere: `pinnkit.plot.sphere` maps at three times;
- a scattered evaluation set (no tensor grid: the d-dimensional ball, `HyperBall.grid`):
  prediction against reference at its points (`parity_figure`).

Prediction and reference share one colour scale; spatial maps have equal aspect when
their axes share a unit; every axis and colour bar carries the unit the problem
declares (`pinnkit.Problem` ``units``). A slice of a trailing coordinate is taken in
the middle unless the field (reference if known) nearly vanishes there (`choose_slice`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..sphere.domain import Sphere
from .labels import label as label
from .labels import unit_text as unit_text
from .labels import when
from .layout import _plt, colorbar, draw_outline, map_grid, outline_of, under_holes


def choose_slice(values: np.ndarray, axis: int = -1, floor: float = 0.1) -> int:
    """The index along ``axis`` to show a slice of ``values`` at: the middle one, unless
    its RMS is below ``floor`` times the largest slice RMS (a slice through a zero of the
    field, e.g. $\\sin y$ at $y = \\pi$), then the slice of largest RMS."""
    v = np.moveaxis(np.asarray(values, np.float64), axis, 0)
    rms = np.sqrt(np.nanmean(v.reshape(v.shape[0], -1) ** 2, axis=1))
    mid = v.shape[0] // 2
    return mid if rms[mid] >= floor * np.nanmax(rms) else int(np.nanargmax(rms))


def _limits(*arrays) -> tuple[float, float]:
    vals = [np.asarray(a) for a in arrays if a is not None]
    return float(min(np.nanmin(v) for v in vals)), float(max(np.nanmax(v) for v in vals))


def _axes_of(domain, shape) -> dict[str, np.ndarray]:
    lo, hi = domain.bounds()
    return {c: np.linspace(a, b, n) for c, a, b, n in zip(domain.coords, lo, hi, shape, strict=True)}


def field_figure(domain, shape, pred, ref, name: str, units: dict[str, str] | None = None,
                 mean_free: bool = False, outline: list | None = None):
    """Prediction, reference and |error| of field ``name`` on a box grid of ``shape``
    (``indexing="ij"`` over ``domain.coords``); the layouts of the module docstring.
    ``mean_free``: a field defined up to a constant (pressure; up to a function of time
    when time-dependent) is shown with its spatial mean removed, as its errors are.
    ``outline``: the boundary of a 2-D shape to draw on the maps (default: from
    ``domain``, `pinnkit.plot.layout.outline_of`)."""
    units = dict(units or {})
    coords = list(domain.coords)
    P = np.asarray(pred).reshape(shape)
    R = None if ref is None else np.asarray(ref).reshape(shape)
    ax_of = _axes_of(domain, shape)
    if "t" in coords:
        it = coords.index("t")
        P = np.moveaxis(P, it, 0)
        R = None if R is None else np.moveaxis(R, it, 0)
    if mean_free:
        space = tuple(range(1 if "t" in coords else 0, P.ndim))
        P = P - np.mean(P, axis=space, keepdims=True)
        R = None if R is None else R - np.mean(R, axis=space, keepdims=True)
        if name in units:
            units[f"{name} (mean removed)"] = units[name]
        name = f"{name} (mean removed)"
    if "t" in coords:
        space = [c for c in coords if c != "t"]
        if len(space) == 1:
            return _time_line_figure(ax_of, space[0], P, R, name, units)
        k = np.linspace(0, P.shape[0] - 1, 3).round().astype(int)
        times = [(when("t", ax_of["t"][i], units), P[i], None if R is None else R[i]) for i in k]
        rows = times
    elif len(coords) == 1:
        return _line_figure(ax_of[coords[0]], coords[0], P, R, name, units)
    else:
        space, rows = coords, [("", P, R)]
    if outline is None:
        outline = outline_of(domain) if len(space) == 2 else []
    return _maps_figure(ax_of, space, rows, name, units, outline)


def _line_figure(x, c, P, R, name, units):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True)
    axes[0].plot(x, P, label="pinnkit")
    if R is not None:
        axes[0].plot(x, R, "--", label="reference")
        axes[1].semilogy(x, np.abs(P - R) + 1e-300)
    axes[0].set(xlabel=label(c, units), ylabel=label(name, units), title=name)
    axes[0].legend()
    axes[1].set(xlabel=label(c, units), ylabel=f"|error| of {label(name, units)}", title=f"|error| of {name}")
    return fig


def _image(fig, ax, X, Y, V, *, cmap, vmin, vmax, xlabel, ylabel, title, cbar, outline=()):
    im = ax.pcolormesh(X, Y, under_holes(X, Y, V, outline), shading="nearest", cmap=cmap, vmin=vmin,
                       vmax=vmax, rasterized=True)
    draw_outline(ax, outline)
    ax.set(xlabel=xlabel, ylabel=ylabel, xlim=(X.min(), X.max()), ylim=(Y.min(), Y.max()))
    ax.set_title(title, fontsize=10)
    colorbar(fig, ax, im, cbar)


def _maps_figure(ax_of, space, rows, name, units, outline=()):
    """Rows of (title, prediction, reference) maps over the first two spatial
    coordinates; a third is sliced (`choose_slice`) at one index for every row. Boxes
    keep the coordinates' aspect ratio when they share a unit (`pinnkit.plot.layout`); a
    long domain (wider than 1.6 : 1) puts prediction, reference and error in a column,
    one column per time."""
    cx, cy = space[0], space[1]
    note = ""
    if len(space) == 3:
        cz = space[2]
        ref_or_pred = np.stack([r if r is not None else p for _, p, r in rows])
        k = choose_slice(ref_or_pred, axis=-1)
        rows = [(t, p[..., k], None if r is None else r[..., k]) for t, p, r in rows]
        note = f"{cz} = {ax_of[cz][k]:.3g}"
        outline = ()
    has_ref = rows[0][2] is not None
    ncol = 3 if has_ref else 1
    equal = units.get(cx, "") == units.get(cy, "")
    aspect = float(np.ptp(ax_of[cx]) / np.ptp(ax_of[cy])) if equal else 1.25
    long = aspect > 1.6
    fig, axes = map_grid(*((ncol, len(rows)) if long else (len(rows), ncol)), aspect)
    vmin, vmax = _limits(*(p for _, p, _ in rows), *(r for _, _, r in rows))
    emax = max(float(np.nanmax(np.abs(p - r))) for _, p, r in rows) if has_ref else None
    X, Y = np.meshgrid(ax_of[cx], ax_of[cy], indexing="ij")
    common = dict(xlabel=label(cx, units), ylabel=label(cy, units), outline=outline)
    for i, (at, p, r) in enumerate(rows):
        panel = axes[:, i] if long else axes[i]
        where = ", ".join(s for s in (at, note) if s)
        suffix = f" ({where})" if where else ""
        _image(fig, panel[0], X, Y, p, cmap="viridis", vmin=vmin, vmax=vmax,
               title=f"{name}: prediction{suffix}", cbar=label(name, units), **common)
        if has_ref:
            _image(fig, panel[1], X, Y, r, cmap="viridis", vmin=vmin, vmax=vmax,
                   title=f"{name}: reference{suffix}", cbar=label(name, units), **common)
            _image(fig, panel[2], X, Y, np.abs(p - r), cmap="magma", vmin=0.0, vmax=emax,
                   title=f"|error|{suffix}", cbar=f"|error| of {label(name, units)}", **common)
    return fig


def _time_line_figure(ax_of, cx, P, R, name, units):
    """``(t, x)`` problems: maps over time (horizontal) and space, and the profiles
    $u(x)$ at four times, prediction solid and reference dashed."""
    plt = _plt()
    t, x = ax_of["t"], ax_of[cx]
    has_ref = R is not None
    ncol = 3 if has_ref else 1
    fig = plt.figure(figsize=(4.8 * max(ncol, 2), 7.6), layout="constrained")
    # room between panels: a colour bar's label must not run into the next map's axis label
    fig.get_layout_engine().set(w_pad=0.06, wspace=0.08, h_pad=0.08)
    grid = fig.add_gridspec(2, 2 * ncol)
    T, X = np.meshgrid(t, x, indexing="ij")
    vmin, vmax = _limits(P, R)
    top = [fig.add_subplot(grid[0, 2 * j:2 * j + 2]) for j in range(ncol)]
    maps = [(P, "viridis", vmin, vmax, f"{name}: prediction", label(name, units))]
    if has_ref:
        maps += [(R, "viridis", vmin, vmax, f"{name}: reference", label(name, units)),
                 (np.abs(P - R), "magma", 0.0, None, "|error|", f"|error| of {label(name, units)}")]
    for j, (ax, (V, cmap, lo, hi, title, bar)) in enumerate(zip(top, maps, strict=True)):
        im = ax.pcolormesh(T, X, V, shading="nearest", cmap=cmap, vmin=lo, vmax=hi, rasterized=True)
        # the maps share their axes: the space label once, on the first (beside a colour bar's
        # label it would read as one word)
        ax.set(xlabel=label("t", units), ylabel=label(cx, units) if j == 0 else "")
        ax.set_title(title, fontsize=10)
        fig.colorbar(im, ax=ax, shrink=0.9, pad=0.03).set_label(bar, fontsize=9)
    half = ncol  # bottom row: two panels, each half the width
    prof = fig.add_subplot(grid[1, :half])
    errs = fig.add_subplot(grid[1, half:]) if has_ref else None
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, i in enumerate(np.linspace(0, len(t) - 1, 4).round().astype(int)):
        c = colours[j % len(colours)]
        at = when("t", t[i], units)
        prof.plot(x, P[i], color=c, label=at)
        if has_ref:
            prof.plot(x, R[i], "--", color=c, lw=1)
            errs.semilogy(x, np.abs(P[i] - R[i]) + 1e-300, color=c, label=at)
    if has_ref:  # an exact initial condition gives ~1e-16 errors: keep six decades in view
        top = float(np.nanmax(np.abs(P - R)))
        if top > 0:
            errs.set_ylim(top * 1e-6, top * 2)
    prof.set(xlabel=label(cx, units), ylabel=label(name, units),
             title=f"{name} at four times" + (" (dashed: reference)" if has_ref else ""))
    prof.legend(fontsize=8)
    if has_ref:
        errs.set(xlabel=label(cx, units), ylabel=f"|error| of {label(name, units)}",
                 title="|error| at the same times")
        errs.legend(fontsize=8)
    return fig


def loss_figure(history: list[dict]):
    """Total loss and each term's loss against the step (log scale)."""
    plt = _plt()
    recs = [h for h in history if "loss" in h]
    fig, ax = plt.subplots(figsize=(6.5, 4), constrained_layout=True)
    if recs:
        steps = [h["step"] for h in recs]
        ax.semilogy(steps, [h["loss"] for h in recs], "k", lw=2, label="total (weighted)")
        for name in recs[0]["terms"]:
            ax.semilogy(steps, [h["terms"][name] for h in recs], lw=1, label=name)
        phases = [h["step"] for a, h in zip(recs, recs[1:], strict=False) if h["phase"] != a["phase"]]
        for s in phases:
            ax.axvline(s, color="grey", ls=":", lw=1)
    ax.set(xlabel="step", ylabel="mean squared residual", title="training loss per term")
    ax.legend()
    return fig


def parity_figure(pred, ref, name: str, units: dict[str, str] | None = None):
    """Prediction against reference at the points of a scattered evaluation set, with the
    line of equality; the prediction alone (against the point index) without a reference."""
    plt = _plt()
    lab = label(name, dict(units or {}))
    fig, ax = plt.subplots(figsize=(4.8, 4.5), constrained_layout=True)
    pred = np.asarray(pred)
    if ref is None:
        ax.plot(pred, ".", ms=2)
        ax.set(xlabel="evaluation point", ylabel=lab, title=f"{name} (no reference)")
        return fig
    ref = np.asarray(ref)
    lo, hi = _limits(pred, ref)
    ax.plot([lo, hi], [lo, hi], "k:", lw=1)
    ax.plot(ref, pred, ".", ms=2)
    ax.set(xlabel=f"reference {lab}", ylabel=f"predicted {lab}", aspect="equal",
           title=f"{name} at {pred.size} evaluation points")
    return fig


def write_plots(run_dir: Path, problem, grid: dict, history: list[dict], network=None,
                dtype=None, batch: int = 4096) -> list[Path]:
    """Writes ``plots/<field>.png`` for every field and ``plots/loss.png``; for a 2-D flow
    (`pinnkit.plot.flow.is_flow`) given its trained ``network`` also ``plots/flow.png``
    (speed and streamlines, pressure, vorticity) and, with a reference,
    ``flow_reference.png`` and ``flow_error.png`` (`pinnkit.plot.flow.flow_figures`,
    evaluated in ``dtype``, default float32, ``batch`` points at a time)."""
    plt = _plt()
    out = Path(run_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    units = problem.units_map
    on_sphere = isinstance(problem.domain, Sphere)
    if on_sphere:  # maps at three times instead of box slices
        from .sphere import fields_from_grid, map_figure

        sphere_fields = fields_from_grid(problem, grid)
        nt = len(sphere_fields["time"])
        times = sorted(set(np.linspace(0, nt - 1, 3).round().astype(int).tolist()))
    inside = None if on_sphere else problem.error_mask(grid["points"])  # shapes: mask the box
    outline = [] if on_sphere else outline_of(problem.domain)
    for i, name in enumerate(problem.out_names):
        ref = grid["ref"][:, i] if grid.get("ref") is not None else None
        pred = grid["pred"][:, i]
        if inside is not None:  # NaN outside the shape: drawn blank, the outline drawn over
            pred = np.where(inside, pred, np.nan)
            ref = None if ref is None else np.where(inside, ref, np.nan)
        if on_sphere:
            fig = map_figure(sphere_fields, name, times, units=units)
        elif len(grid["shape"]) != problem.domain.dim:  # scattered points: no map to draw
            fig = parity_figure(pred, ref, name, units)
        else:
            fig = field_figure(problem.domain, grid["shape"], pred, ref, name, units,
                               mean_free=name in problem.mean_free, outline=outline)
        p = out / f"{name}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    fig = loss_figure(history)
    p = out / "loss.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    if network is not None and not on_sphere:
        from . import flow

        if flow.is_flow(problem):
            kw = {} if dtype is None else {"dtype": dtype}
            paths += flow.save(flow.flow_figures(network, problem, batch=batch, **kw), out)
    return paths
