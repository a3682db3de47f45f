"""What a run writes for its users: the plots' choices (slices through a non-zero part of
the field, one colour scale for prediction and reference, full globes), and
``pinnkit predict`` grids in the domain's own coordinates written as CF NetCDF (opened by
xarray with default arguments), .vtu (read back by meshio) and .vts (parsed as XML), for a
box, a space-time box and the sphere, plus a masked irregular domain."""

import xml.etree.ElementTree as ET
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.cli.main import main as pinnkit_main
from pinnkit.geometry.domains import AbstractUnitCubeDomain, Box, SpaceTime, tensor_grid
from pinnkit.plot.fields import choose_slice, field_figure
from pinnkit.plot.sphere import latitude_edges, periodic_cells
from pinnkit.run.config import load_config
from pinnkit.run.gridded import grid_of
from pinnkit.run.predict import predict, predict_grid
from pinnkit.run.rundir import load_run, train_to_dir
from pinnkit.run.writers import write

ROOT = Path(__file__).resolve().parents[1]


def _train(name, tmp_path_factory, *extra):
    out = tmp_path_factory.mktemp("out") / name
    cfg = load_config(ROOT / "configs" / "tiny" / f"{name}.yaml",
                      ["train.steps=10", "train.chunk=10", "checkpoint.every=0", *extra])
    train_to_dir(cfg, out, progress=False, plots=False)
    return out


@pytest.fixture(scope="module")
def box_run(tmp_path_factory):
    return _train("poisson2d", tmp_path_factory)


@pytest.fixture(scope="module")
def spacetime_run(tmp_path_factory):
    return _train("burgers", tmp_path_factory)


@pytest.fixture(scope="module")
def sphere_run(tmp_path_factory):
    return _train("climate_tracer", tmp_path_factory)


# ------------------------------------------------------------------------- plots


def test_choose_slice_avoids_a_zero_of_the_field():
    y = np.linspace(0, 2 * np.pi, 17)  # the middle node is y = pi, where sin y = 0
    field = np.cos(np.linspace(0, 1, 5))[:, None] * np.sin(y)[None, :]
    k = choose_slice(field, axis=-1)
    assert abs(np.sin(y[k])) > 0.9
    assert choose_slice(np.cos(y)[None, :] + 2.0, axis=-1) == 8  # nothing vanishes: the middle


def _meshes(fig):
    return [m for ax in fig.axes if ax.get_label() != "<colorbar>" for m in ax.collections]


def test_time_dependent_3d_plot_slices_where_the_field_lives():
    """u = e^{-t} sin z on [0,1] x [0,2pi]^3: the middle z node is a zero of u; the maps
    show the z slice chosen by choose_slice, one colour scale for prediction and reference."""
    dom = SpaceTime(Box((0, 0, 0), (2 * np.pi,) * 3), 0.0, 1.0)
    shape = (3, 9, 9, 9)
    t, x, y, z = np.meshgrid(*(np.linspace(a, b, n) for a, b, n in zip(*dom.bounds(), shape, strict=True)),
                             indexing="ij")
    ref = (np.exp(-t) * np.sin(z)).ravel()
    fig = field_figure(dom, shape, 1.01 * ref, ref, "u", {"t": "s", "x": "m", "y": "m", "z": "m"})
    meshes = _meshes(fig)
    assert len(meshes) == 9  # 3 times x (prediction, reference, error)
    pred0, ref0 = meshes[0], meshes[1]
    assert np.max(np.abs(ref0.get_array())) > 0.9  # at t = 0 the slice holds |sin z| ~ 1
    assert pred0.get_clim() == ref0.get_clim()
    # x and y in metres: equal scale, the box sized from the domain (plot/layout.py)
    ax, (fw, fh) = fig.axes[0], fig.get_size_inches()
    box, (x0, x1), (y0, y1) = ax.get_position(), ax.get_xlim(), ax.get_ylim()
    assert ax.get_aspect() == 1.0 or np.isclose(box.width * fw / (box.height * fh),
                                                 (x1 - x0) / (y1 - y0), rtol=0.01)
    assert fig.axes[0].get_xlabel() == "x (m)" and "z = " in fig.axes[0].get_title()


def test_globe_cells_cover_poles_and_date_line():
    lon = np.arange(16) * 22.5
    for start in (-180.0, 0.0):
        edges, idx = periodic_cells(lon, start)
        assert edges[0] == start and edges[-1] == start + 360 and np.all(np.diff(edges) > 0)
        centre = 0.5 * (edges[1:] + edges[:-1])
        dist = np.abs((centre - lon[idx] + 180) % 360 - 180)
        assert dist.max() <= 22.5 / 2 + 1e-12  # every cell shows its nearest node
        assert set(idx) == set(range(16))
    lat = np.degrees(np.arcsin(np.polynomial.legendre.leggauss(8)[0]))
    e = latitude_edges(lat)
    assert e[0] == -90 and e[-1] == 90 and np.all((e[:-1] < lat) & (lat < e[1:]))


# ------------------------------------------------------------------------- predict


def test_predict_sphere_points_lie_on_the_sphere(sphere_run):
    g = predict_grid(sphere_run, "5")
    assert g.dims == ("time", "lat", "lon") and g.shape == (5, 5, 8)
    r = np.linalg.norm(g.points[:, 1:], axis=1)
    np.testing.assert_allclose(r, 1.0, rtol=1e-12)  # radius 1, lengths in Earth radii
    np.testing.assert_allclose(g.axes["lat"], [-90, -45, 0, 45, 90])
    np.testing.assert_allclose(g.axes["lon"], np.arange(8) * 45.0)
    run = load_run(sphere_run)
    np.testing.assert_allclose(g.fields["h"].ravel(), run.predict(g.points)[:, 0], rtol=1e-6, atol=1e-7)
    # the poles are single points: every longitude gives the same value there
    assert np.ptp(g.fields["h"][:, [0, -1], :], axis=-1).max() < 1e-5
    assert g.units["time"] == "day" and g.units["lat"] == "degrees_north"


def test_netcdf_opens_with_default_arguments(sphere_run, box_run, spacetime_run, tmp_path):
    xr = pytest.importorskip("xarray")
    for run_dir, spec, dims in ((sphere_run, "lat=-90:90:7,lon=0:330:12,t=0:12:4", ("time", "lat", "lon")),
                                (box_run, "6", ("x", "y")), (spacetime_run, "5", ("t", "x"))):
        path = tmp_path / f"{Path(run_dir).name}.nc"
        assert pinnkit_main(["predict", str(run_dir), "--grid", spec, "--out", str(path)]) == 0
        g = predict_grid(run_dir, spec)
        with xr.open_dataset(path) as ds:  # default arguments: no decode_times=False
            name = next(iter(g.fields))
            assert ds[name].dims == dims and ds.attrs["Conventions"] == "CF-1.8"
            np.testing.assert_allclose(ds[name].values, g.fields[name], rtol=1e-6)
            for d in dims:
                np.testing.assert_allclose(ds[d].values, g.axes[d])
            if "lat" in dims:
                assert ds.lat.attrs["units"] == "degrees_north" and ds.lon.attrs["units"] == "degrees_east"
                assert ds.time.attrs["units"] == "day" and ds.time.attrs["axis"] == "T"
                assert ds.h.attrs["units"] == "1"
            if dims == ("x", "y"):
                import matplotlib

                matplotlib.use("Agg")
                ds.u.plot()  # a map, not a scatter of points
                assert ds.x.attrs["axis"] == "X"


def _vts_arrays(path: Path) -> dict[str, np.ndarray]:
    root = ET.parse(path).getroot()
    piece = root.find("StructuredGrid/Piece")
    out = {a.get("Name"): np.array(a.text.split(), float) for a in piece.find("PointData")}
    out["points"] = np.array(piece.find("Points/DataArray").text.split(), float).reshape(-1, 3)
    out["extent"] = np.array(piece.get("Extent").split(), int)
    return out


def test_vtk_files_read_back_equal_the_prediction(box_run, spacetime_run, sphere_run, tmp_path):
    meshio = pytest.importorskip("meshio")
    g = predict_grid(box_run, "x=0:1:5,y=0:1:4")
    (path,) = write(tmp_path / "u.vtu", g)
    m = meshio.read(path)
    np.testing.assert_allclose(m.point_data["u"], g.fields["u"].ravel(), rtol=1e-6)
    np.testing.assert_allclose(m.points[:, :2], g.points)
    assert m.cells[0].type == "quad" and len(m.cells[0].data) == 4 * 3
    v = _vts_arrays(write(tmp_path / "u.vts", g)[0])
    np.testing.assert_allclose(v["u"], g.fields["u"].ravel(), rtol=1e-6)
    np.testing.assert_allclose(v["points"][:, :2], g.points)
    assert list(v["extent"]) == [0, 3, 0, 4, 0, 0]  # i runs over y (fastest in C order)
    # space-time: one file per time and a ParaView collection
    g = predict_grid(spacetime_run, "t=0:1:3,x=-1:1:9")
    paths = write(tmp_path / "b.vtu", g)
    assert paths[0].suffix == ".pvd" and len(paths) == 4
    assert [d.get("timestep") for d in ET.parse(paths[0]).getroot().iter("DataSet")] == ["0.0", "0.5", "1.0"]
    for k, p in enumerate(paths[1:]):
        m = meshio.read(p)
        np.testing.assert_allclose(m.point_data["u"], g.fields["u"][k], rtol=1e-6)
        assert m.cells[0].type == "line"
    # sphere: a closed surface of quads (across the date line), points on the sphere
    g = predict_grid(sphere_run, "lat=-90:90:5,lon=0:270:4,t=0:12:2")
    paths = write(tmp_path / "h.vtu", g)
    m = meshio.read(paths[2])
    np.testing.assert_allclose(m.point_data["h"], g.fields["h"][1].ravel(), rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(m.points, axis=1), 1.0, rtol=1e-12)
    assert len(m.cells[0].data) == 4 * 4  # 4 latitude bands x 4 longitude cells, the last wraps
    v = _vts_arrays(write(tmp_path / "h.vts", g)[2])
    assert v["h"].size == 5 * 5  # the first longitude repeated to close the surface
    np.testing.assert_allclose(v["h"].reshape(5, 5)[:, :4], g.fields["h"][1], rtol=1e-6)


class _Disk(AbstractUnitCubeDomain):
    """The unit disk, just enough of a domain for a masked grid (the geometry helpers
    bring real irregular domains)."""

    coords: tuple[str, ...] = eqx.field(static=True, default=("x", "y"))

    def pieces(self):
        return ("interior",)

    def from_unit(self, u, piece):
        return u

    def normal(self, x, piece):
        return x

    def contains(self, x):
        return jnp.sum(x * x) <= 1.0

    def bounds(self):
        return (-1.0, -1.0), (1.0, 1.0)

    def inside(self, points):
        return None

    def grid(self, resolution):
        return tensor_grid(self.bounds(), resolution)

    def grid_size(self, resolution):
        return resolution**2


def test_irregular_domain_grid_is_masked(tmp_path):
    xr = pytest.importorskip("xarray")
    meshio = pytest.importorskip("meshio")
    g = grid_of(_Disk(), "5")
    inside = np.hypot(*np.meshgrid(g.axes["x"], g.axes["y"], indexing="ij")) <= 1.0
    np.testing.assert_array_equal(g.mask, inside)
    g = g.with_fields(np.ones((25, 1)), ["u"])
    assert np.isnan(g.fields["u"][~inside]).all() and (g.fields["u"][inside] == 1).all()
    with xr.open_dataset(write(tmp_path / "d.nc", g)[0]) as ds:
        np.testing.assert_array_equal(np.isnan(ds.u.values), ~inside)
    m = meshio.read(write(tmp_path / "d.vtu", g)[0])
    assert len(m.cells[0].data) == 4  # only the quads with all four corners in the disk
    v = _vts_arrays(write(tmp_path / "d.vts", g)[0])
    np.testing.assert_array_equal(v["vtkGhostType"] == 0, inside.ravel())


def test_predict_table_columns_on_the_sphere(sphere_run):
    cols = predict(sphere_run, grid="3")
    assert {"t", "x", "y", "z", "lat", "lon", "h", "shape"} <= set(cols)
    assert tuple(cols["shape"]) == (3, 3, 4)


def test_mean_free_field_is_plotted_without_its_constant():
    """A pressure off by a constant (per time) is a correct pressure: the error panels
    show ~0, as the error figures in summary.json do."""
    dom = SpaceTime(Box((0, 0), (1, 1)), 0.0, 1.0)
    shape = (3, 5, 5)
    ref = np.random.default_rng(0).normal(size=shape)
    pred = ref + np.array([1.0, 5.0, -2.0])[:, None, None]
    fig = field_figure(dom, shape, pred.ravel(), ref.ravel(), "p", mean_free=True)
    errors = _meshes(fig)[2::3]
    assert len(errors) == 3 and max(float(np.max(m.get_array())) for m in errors) < 1e-12
