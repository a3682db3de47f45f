"""Flow figures as `pinnkit plot` draws them for every 2-D flow: the DFG 2D-1 channel
(the trained run shipped in notebooks/data, no training here) keeps its 2.2 × 0.41
aspect ratio, the cylinder is outlined from the geometry (points on the circle, not a
pixel mask), streamlines are drawn and stay out of the cylinder; outlines of CSG shapes
reach their corners; labels carry units, never scale factors; times read "5 days"."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DFG = ROOT / "notebooks" / "data" / "ns_cylinder_dfg1"
CENTER, RADIUS, LENGTH, HEIGHT = (0.2, 0.2), 0.05, 2.2, 0.41
SCALED = re.compile(r"\d[eE][-+]?\d")  # a number in exponent notation inside a label


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
    return [t for t in out if t]


def _box_aspect(fig, ax) -> float:
    """Width/height of the axes box in inches over that of its data limits."""
    fw, fh = fig.get_size_inches()
    box = ax.get_position()
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    return (box.width * fw / (box.height * fh)) / ((x1 - x0) / (y1 - y0))


@pytest.fixture(scope="module")
def dfg_fields():
    import jax

    import pinnkit
    from pinnkit.plot import flow

    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)  # the shipped run is float64
    try:
        run = pinnkit.load_run(DFG)
        yield run, flow.flow_fields(run, resolution=41)
    finally:
        jax.config.update("jax_enable_x64", old)


def test_dfg_flow_figure_keeps_the_channel_shape(dfg_fields):
    from matplotlib.collections import LineCollection
    from matplotlib.patches import Polygon

    from pinnkit.plot import flow

    run, f = dfg_fields
    assert flow.is_flow(run.problem)
    assert f["u"].shape == (round(41 * LENGTH / HEIGHT), 41)  # square cells along the long side
    fig = flow.flow_figure(f, run.problem.description)
    maps = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split()[0] for ax in maps] == ["speed", "pressure,", "vorticity"]
    w, h = fig.get_size_inches()
    assert w / h < 1.6  # three long panels stacked, not a row of three thin strips
    for ax in maps:
        assert _box_aspect(fig, ax) == pytest.approx(1.0, rel=0.1)
        np.testing.assert_allclose(ax.get_xlim(), (0.0, LENGTH))
        np.testing.assert_allclose(ax.get_ylim(), (0.0, HEIGHT))
        # the cylinder: a filled polygon whose vertices lie on the circle, all the way round
        holes = [p for p in ax.patches if isinstance(p, Polygon)]
        assert len(holes) == 1
        xy = holes[0].get_xy()
        r = np.hypot(xy[:, 0] - CENTER[0], xy[:, 1] - CENTER[1])
        np.testing.assert_allclose(r, RADIUS, atol=1e-6)
        angles = np.sort(np.arctan2(xy[:, 1] - CENTER[1], xy[:, 0] - CENTER[0]))
        assert len(xy) >= 100 and np.max(np.diff(np.r_[angles, angles[0] + 2 * np.pi])) < 0.1
    # streamlines in the speed panel, none through the cylinder (one grid cell of slack)
    lines = [c for c in maps[0].collections if isinstance(c, LineCollection)]
    assert lines
    pts = np.concatenate([np.asarray(s) for s in lines[0].get_segments()])
    assert len(pts) > 500
    cell = HEIGHT / 40
    assert np.min(np.hypot(pts[:, 0] - CENTER[0], pts[:, 1] - CENTER[1])) > RADIUS - cell
    assert not any(SCALED.search(t) for t in _texts(fig)), _texts(fig)


def test_pinnkit_plot_draws_the_flow_figures(tmp_path):
    """`pinnkit plot` (plot_dir) on a copy of the shipped run writes plots/flow.png too,
    and the field map of u keeps the channel's shape."""
    run_dir = tmp_path / "dfg"
    shutil.copytree(DFG, run_dir)
    r = subprocess.run([sys.executable, "-m", "pinnkit.cli", "plot", str(run_dir)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    names = {Path(p).name for p in r.stdout.split()}
    assert {"u.png", "v.png", "p.png", "loss.png", "flow.png"} <= names, r.stdout
    from matplotlib.image import imread

    h, w = imread(run_dir / "plots" / "flow.png").shape[:2]
    assert w / h < 1.6  # three stacked channel panels (a row would be > 3 : 1)
    h, w = imread(run_dir / "plots" / "u.png").shape[:2]
    assert w / h > 2.5  # one channel map and its colour bar, not a square


def test_outline_of_csg_shapes():
    """The outline comes from the boundary parts: a disk hole is a closed loop on the
    circle, an L-shape (a square minus a square) one loop through its six corners."""
    from pinnkit.geometry import Disk, Rectangle, difference
    from pinnkit.geometry.outline import outline
    from pinnkit.plot.layout import outline_of

    channel = difference(Rectangle((0.0, 0.0), (LENGTH, HEIGHT)), Disk(CENTER, RADIUS))
    found = outline_of(channel)
    assert sorted(hole for _, hole in found) == [False, True]
    (circle,) = [c for c, hole in found if hole]
    np.testing.assert_allclose(np.hypot(circle[:, 0] - 0.2, circle[:, 1] - 0.2), RADIUS, atol=1e-6)
    (outer,) = [c for c, hole in found if not hole]
    np.testing.assert_allclose([outer[:, 0].min(), outer[:, 0].max(), outer[:, 1].min(), outer[:, 1].max()],
                               [0.0, LENGTH, 0.0, HEIGHT], atol=1e-6)
    ell = difference(Rectangle((0.0, 0.0), (1.0, 1.0)), Rectangle((0.5, 0.5), (1.5, 1.5)))
    (loop,) = outline(ell)
    assert np.array_equal(loop[0], loop[-1])
    for corner in [(0, 0), (1, 0), (1, 0.5), (0.5, 0.5), (0.5, 1), (0, 1)]:
        # the cut corners are located to 1/129 of a sampling step (1/129 of ~4e-3)
        assert np.min(np.linalg.norm(loop - corner, axis=1)) < 1e-4, corner
    # no point outside the L (the trimmed-away sides of the inner square are gone)
    assert not np.any((loop[:, 0] > 0.5 + 1e-4) & (loop[:, 1] > 0.5 + 1e-4))


def test_labels_have_units_never_scale_factors():
    from pinnkit.plot.labels import label, when
    from pinnkit.problems.climate import _shallow_water_units

    units = _shallow_water_units(6.37122e6)
    assert units["h"].startswith("4.05924e+13")  # what NetCDF files carry (UDUNITS)
    assert label("h", units) == "h" and label("u_x", units) == "u_x"
    assert label("T", {"T": "degC"}) == "T (°C)" and label("x", {"x": "m"}) == "x (m)"
    assert when("t", 5.0, units) == "t = 5 days" and when("t", 1.0, units) == "t = 1 day"
    assert when("t", 2.857, units) == "t = 2.86 days" and when("t", 0.5, {"t": "s"}) == "t = 0.5 s"
    assert when("t", 3.0, {}) == "t = 3"


def test_cells_in_a_hole_take_their_neighbours_values():
    """Wide cells centred in a hole would reach past its outline as white notches: they
    take the nearest valid value (the grey patch hides the rest); NaN outside the domain
    but in no hole stays NaN."""
    from pinnkit.plot.layout import under_holes

    X, Y = np.meshgrid(np.linspace(0, 1, 41), np.linspace(0, 1, 21), indexing="ij")
    V = X + 0.0
    in_disk = np.hypot(X - 0.5, Y - 0.5) < 0.2
    V[in_disk | (X > 0.9)] = np.nan
    th = np.linspace(0, 2 * np.pi, 129)
    circle = np.stack([0.5 + 0.2 * np.cos(th), 0.5 + 0.2 * np.sin(th)], axis=1)
    out = under_holes(X, Y, V, [(circle, True)])
    assert not np.isnan(out[in_disk]).any() and np.isnan(out[X > 0.9]).all()
    np.testing.assert_array_equal(out[~np.isnan(V)], V[~np.isnan(V)])
    assert np.all((out[in_disk] >= 0.25) & (out[in_disk] <= 0.75))  # values from the disk's rim
    assert under_holes(X, Y, V, [(circle, False)]) is V  # not a hole: untouched
