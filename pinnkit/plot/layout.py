"""Layout of map figures: data boxes with the domain's aspect ratio, figures sized from
them, colour bars as tall as their panel, and outlines drawn from the geometry.

A map of a 2.2 × 0.41 channel must look like a channel: `map_grid` places every axes
box at a fixed size in inches whose width/height is the data's aspect ratio, with fixed
margins for the title (above), the tick and axis labels (left, below) and the colour
bar with its ticks and label (right), so no label of one panel reaches the next and
the figure's size follows the domain. No layout engine moves the boxes afterwards.
"""

from __future__ import annotations

import math

import numpy as np

# Margins around each data box, in inches: y ticks and label; colour bar (pad, bar,
# ticks, label); title; x ticks and label. The suptitle band on top of the figure.
LEFT, RIGHT, TOP, BOTTOM, SUPTITLE = 0.8, 1.1, 0.4, 0.58, 0.35
_BAR_PAD, _BAR_WIDTH = 0.1, 0.14


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def panel_size(aspect: float, area: float = 12.0, max_width: float = 9.0,
               max_height: float = 4.5) -> tuple[float, float]:
    """``(width, height)`` in inches of a data box with ``width/height = aspect``: about
    ``area`` square inches, at most ``max_width`` wide and ``max_height`` tall (a 5:1
    channel: 8.1 × 1.5; a square: 3.5 × 3.5)."""
    if not (aspect > 0 and math.isfinite(aspect)):
        raise ValueError(f"panel_size: the aspect ratio must be positive and finite: actual={aspect}")
    w = math.sqrt(area * aspect)
    w = min(w, max_width, max_height * aspect)
    return w, w / aspect


def map_grid(nrows: int, ncols: int, aspect: float, *, suptitle: bool = False,
             colorbars: bool = True, max_width: float = 17.0, **size):
    """A figure of ``nrows × ncols`` data boxes of aspect ratio ``aspect`` (`panel_size`;
    ``size``: its keywords), shrunk together when the row would be wider than
    ``max_width`` inches. **Returns:** ``(fig, axes)``, ``axes`` an ``(nrows, ncols)``
    object array; `colorbar` adds a bar to the right of a box, in its margin."""
    plt = _plt()
    w, h = panel_size(aspect, **size)
    right = RIGHT if colorbars else 0.3
    fit = (max_width / ncols - LEFT - right) / w
    if fit < 1.0:
        w, h = w * fit, h * fit
    cw, ch = LEFT + w + right, TOP + h + BOTTOM
    top = SUPTITLE if suptitle else 0.0
    fw, fh = ncols * cw, nrows * ch + top
    fig = plt.figure(figsize=(fw, fh))
    axes = np.empty((nrows, ncols), dtype=object)
    for i in range(nrows):
        for j in range(ncols):
            y0 = fh - top - (i + 1) * ch + BOTTOM
            axes[i, j] = fig.add_axes(((j * cw + LEFT) / fw, y0 / fh, w / fw, h / fh))
    return fig, axes


def colorbar(fig, ax, mappable, label: str = ""):
    """A vertical colour bar in the right margin of ``ax`` (`map_grid`), as tall as its
    box; ticks at 8 pt, the label at 9 pt."""
    box = ax.get_position()
    fw, fh = fig.get_size_inches()
    # labelled as matplotlib labels the bars it places itself, so figures can be read back
    cax = fig.add_axes((box.x1 + _BAR_PAD / fw, box.y0, _BAR_WIDTH / fw, box.height), label="<colorbar>")
    bar = fig.colorbar(mappable, cax=cax)
    bar.ax.tick_params(labelsize=8)
    if label:
        bar.set_label(label, fontsize=9)
    return bar


def outline_of(domain) -> list[tuple[np.ndarray, bool]]:
    """The outline of a 2-D shape (the spatial part of a `SpaceTime` on one) from its
    boundary parts (`pinnkit.geometry.outline.outline`), each polyline with whether it
    is a hole's (a closed loop enclosing no point of the domain, such as a cylinder);
    ``[]`` for a box (the axes are its outline) and for shapes that are not 2-D."""
    from ..geometry.base import AbstractShape
    from ..geometry.domains import SpaceTime
    from ..geometry.outline import outline

    shape = domain.space if isinstance(domain, SpaceTime) else domain
    if not isinstance(shape, AbstractShape) or shape.dim != 2:
        return []
    out = []
    for c in outline(shape):
        closed = len(c) > 3 and np.array_equal(c[0], c[-1])
        out.append((c, closed and _is_hole(c, shape.inside)))
    return out


def draw_outline(ax, curves: list[tuple[np.ndarray, bool]], fill: str = "0.82"):
    """`outline_of`'s polylines as black lines over a map, holes filled grey."""
    from matplotlib.patches import Polygon

    for c, hole in curves:
        if hole:
            ax.add_patch(Polygon(c[:-1], closed=True, facecolor=fill, edgecolor="k", lw=0.9, zorder=3))
        else:
            ax.plot(c[:, 0], c[:, 1], "k-", lw=0.9, zorder=3)


def under_holes(X: np.ndarray, Y: np.ndarray, V: np.ndarray, curves) -> np.ndarray:
    """``V`` with its NaN cells inside a hole (`outline_of`) given their nearest valid
    neighbour's value: the grey patch hides them, and a cell that is centred in the hole
    but reaches past its outline (wide cells of a long channel's square grid) shows the
    flow beside it instead of a white notch. NaN elsewhere (outside the domain) stays."""
    holes = [c for c, hole in curves if hole]
    bad = np.isnan(V)
    if not holes or not bad.any() or bad.all():
        return V
    from matplotlib.path import Path
    from scipy.ndimage import distance_transform_edt

    pts = np.stack([X.ravel(), Y.ravel()], axis=1)
    in_hole = np.zeros(V.size, bool)
    for c in holes:
        in_hole |= Path(c).contains_points(pts)
    fill = bad & in_hole.reshape(V.shape)
    idx = distance_transform_edt(bad, return_distances=False, return_indices=True)
    out = np.array(V, copy=True)
    out[fill] = V[tuple(i[fill] for i in idx)]
    return out


def _is_hole(loop: np.ndarray, inside) -> bool:
    """The loop encloses no point of the domain: the points of an 8 × 8 grid over its
    box that lie inside it (even-odd rule) are all outside the domain."""
    from matplotlib.path import Path

    lo, hi = loop.min(axis=0), loop.max(axis=0)
    g = np.stack(np.meshgrid(*(np.linspace(a, b, 10)[1:-1] for a, b in zip(lo, hi, strict=True))), -1)
    pts = g.reshape(-1, 2)
    pts = pts[Path(loop).contains_points(pts)]
    return pts.size > 0 and not np.any(inside(pts))
