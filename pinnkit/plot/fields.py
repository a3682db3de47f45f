"""Figures of a run: solution, reference and error maps per field; loss curves per term.

Uses matplotlib's non-interactive Agg backend when writing files, so it works on
clusters without a display. 1-D problems give line plots, 2-D problems (including
``(t, x)``) images, 3-D problems the mid-plane slice of the last coordinate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..sphere.domain import Sphere


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _as_2d(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    v = values.reshape(shape)
    while v.ndim > 2:  # take the middle slice of trailing coordinates
        v = v[..., v.shape[-1] // 2]
    return v


def field_figure(coords, bounds, shape, pred, ref, name: str):
    """Figure with prediction, reference and |error| of one field (1-D: overlaid lines)."""
    plt = _plt()
    lo, hi = bounds
    if len(shape) == 1:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True)
        x = np.linspace(lo[0], hi[0], shape[0])
        axes[0].plot(x, pred, label="pinnkit")
        if ref is not None:
            axes[0].plot(x, ref, "--", label="reference")
            axes[1].semilogy(x, np.abs(pred - ref) + 1e-300)
        axes[0].set(xlabel=coords[0], ylabel=name, title=name)
        axes[0].legend()
        axes[1].set(xlabel=coords[0], title=f"|error| of {name}")
        return fig
    panels = [("prediction", pred)]
    if ref is not None:
        panels += [("reference", ref), ("|error|", np.abs(pred - ref))]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4), constrained_layout=True)
    axes = np.atleast_1d(axes)
    # x horizontal, second coordinate vertical; for (t, x) put t horizontal, x vertical.
    extent = (lo[0], hi[0], lo[1], hi[1])
    for ax, (title, vals) in zip(axes, panels, strict=True):
        img = _as_2d(vals, shape).T
        cmap = "magma" if title == "|error|" else "viridis"
        im = ax.imshow(img, origin="lower", extent=extent, aspect="auto", cmap=cmap)
        ax.set(xlabel=coords[0], ylabel=coords[1], title=f"{name}: {title}")
        fig.colorbar(im, ax=ax, shrink=0.85)
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


def write_plots(run_dir: Path, problem, grid: dict, history: list[dict]) -> list[Path]:
    """Writes ``plots/<field>.png`` for every field and ``plots/loss.png``."""
    plt = _plt()
    out = Path(run_dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    bounds = problem.domain.bounds()
    on_sphere = isinstance(problem.domain, Sphere)
    if on_sphere:  # maps at the final time instead of box slices
        from .sphere import fields_from_grid, map_figure

        sphere_fields = fields_from_grid(problem, grid)
    inside = None if on_sphere else problem.domain.inside(grid["points"])  # shapes: mask the box
    for i, name in enumerate(problem.out_names):
        ref = grid["ref"][:, i] if grid.get("ref") is not None else None
        pred = grid["pred"][:, i]
        if inside is not None:  # NaN outside the shape: drawn blank
            pred = np.where(inside, pred, np.nan)
            ref = None if ref is None else np.where(inside, ref, np.nan)
        if on_sphere:
            fig = map_figure(sphere_fields, name)
        else:
            fig = field_figure(problem.domain.coords, bounds, grid["shape"], pred, ref, name)
        p = out / f"{name}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    fig = loss_figure(history)
    p = out / "loss.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    return paths
