"""The finite-element flow reference (pinnkit.solvers.fem_ns): exact and manufactured
solutions, the convergence order of Taylor–Hood, the volume force, DFG 2D-1 on a coarse
mesh, CSG boundary names, the cache. Needs the ``fem`` extra (in ``dev``)."""

import math

import numpy as np
import pytest

pytest.importorskip("ngsolve", reason="the fem extra (NGSolve) is not installed: pip install -e .[fem]")

from pinnkit.geometry import Cuboid, Disk, Rectangle, difference, rotate, union  # noqa: E402
from pinnkit.problems.dfg import DFG1_REFERENCE, channel_domain  # noqa: E402
from pinnkit.solvers.fem_cache import FemCacheError  # noqa: E402
from pinnkit.solvers.fem_geometry import FemGeometryError, boundary_names  # noqa: E402
from pinnkit.solvers.fem_ns import solve_steady  # noqa: E402


def _kovasznay(re=40.0):
    lam = re / 2 - math.sqrt(re**2 / 4 + 4 * math.pi**2)

    def vel(x, y, m):
        e = m.exp(lam * x)
        return 1 - e * m.cos(2 * m.pi * y), lam / (2 * m.pi) * e * m.sin(2 * m.pi * y)

    def pressure(x):
        return 0.5 * (1 - np.exp(2 * lam * x))

    return 1 / re, vel, pressure


def _l2_velocity_error(sol, vel):
    import ngsolve as ng

    from pinnkit.solvers.fem_ns import _boundary_cf

    diff = sol.velocity - _boundary_cf(ng, vel)
    return math.sqrt(ng.Integrate(ng.InnerProduct(diff, diff), sol.mesh, order=8))


def test_kovasznay_p2_velocity_converges_at_third_order():
    # Kovasznay flow (Re 40) is an exact Navier–Stokes solution with no body force; the
    # velocity on every side of [-0.5, 1] x [-0.5, 1.5], pressure fixed by its mean. P2
    # velocity: L2 error O(h^3); on three meshes halving maxh (44, 178, 698 triangles) the
    # fitted slope must exceed 2.5 (measured 3.4: 1.2e-1, 9.8e-3, 1.1e-3; a lost order,
    # P1-like, gives about 2).
    nu, vel, pressure = _kovasznay()
    box = Rectangle((-0.5, -0.5), (1.0, 1.5))
    names = {n: vel for n in ("left", "right", "bottom", "top")}
    hs, errs = [], []
    for maxh in (0.4, 0.2, 0.1):
        sol = solve_steady(box, nu, names, maxh=maxh, cache=False)
        hs.append(math.sqrt(3.0 / sol.info["elements"]))  # the mean element size
        errs.append(_l2_velocity_error(sol, vel))
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert slope > 2.5, (hs, errs, slope)
    assert errs[-1] < 2e-3
    # pressure (mean zero on both sides) to the P1 accuracy of the finest mesh (measured
    # errors up to 1.2e-3)
    xy = np.array([[0.0, 0.0], [0.5, 0.7], [-0.3, 1.2]])
    p = sol.evaluate(xy)[:, 2]
    xs = np.linspace(-0.5, 1.0, 2001)
    mean = np.trapezoid(pressure(xs), xs) / 1.5
    np.testing.assert_allclose(p, pressure(xy[:, 0]) - mean, atol=5e-3)


def test_poiseuille_with_a_do_nothing_outlet_is_exact():
    # Plane Poiseuille flow, do-nothing outlet: u = 4 U y (H - y) / H^2, p = G (L - x),
    # G = 8 nu U / H^2 (nu du/dx - p = 0 at x = L), lies in P2 x P1, so the discrete
    # solution is exact to the solver's tolerance on any mesh.
    L, H, U, nu = 2.0, 0.5, 0.7, 0.05
    inflow = lambda x, y: (4 * U * y * (H - y) / H**2, 0 * y)  # noqa: E731
    sol = solve_steady(Rectangle((0, 0), (L, H), names={"left": "inlet", "right": "outlet"}), nu,
                       {"inlet": inflow, "bottom": (0, 0), "top": (0, 0)}, maxh=0.2, cache=False)
    xy = np.array([[0.3, 0.1], [1.0, 0.25], [1.9, 0.4], [2.0, 0.3]])
    exact = np.stack([4 * U * xy[:, 1] * (H - xy[:, 1]) / H**2, 0 * xy[:, 0],
                      8 * nu * U / H**2 * (L - xy[:, 0])], 1)
    np.testing.assert_allclose(sol.evaluate(xy), exact, atol=1e-9)


def test_dfg1_coarse_mesh_forces_near_the_reference():
    # DFG 2D-1 on a coarse mesh (maxh 0.05, 0.005 on the cylinder: ~5.8k dofs, under a
    # second). Measured: c_D +0.04 %, Delta p -0.7 %, c_L +11 % (lift, the small asymmetric
    # part, converges last: +0.22 % at 48k dofs, +0.05 % at 103k, docs/benchmarks.md).
    # Bounds about 3x the measured errors: a sign error, a wrong viscosity or a lost
    # curved boundary moves c_D by far more than 0.2 %.
    H = 0.41
    sol = solve_steady(channel_domain(), 1e-3,
                       {"inlet": lambda x, y: (4 * 0.3 * y * (H - y) / H**2, 0 * y),
                        "walls": (0, 0), "cylinder": (0, 0)},
                       maxh=0.05, boundary_maxh={"cylinder": 0.005}, cache=False)
    fx, fy = sol.force("cylinder")
    scale = 2 / (0.2**2 * 0.1)
    front_back = sol.evaluate(np.array([[0.15, 0.2], [0.25, 0.2]]))[:, 2]
    ref = DFG1_REFERENCE
    assert scale * fx == pytest.approx(ref["c_D"], rel=2e-3)
    assert front_back[0] - front_back[1] == pytest.approx(ref["delta_p"], rel=2e-2)
    assert scale * fy == pytest.approx(ref["c_L"], rel=0.3)
    assert np.isnan(sol.evaluate(np.array([[0.2, 0.2], [3.0, 0.2]]))).all()  # in the cylinder, outside


def test_csg_names_survive_and_other_shapes_are_refused():
    two = union(Rectangle((0, 0), (1, 1), name="a"), Rectangle((1, 0), (2, 1), name="b"))
    assert boundary_names(two) == ("a", "b")
    holed = difference(rotate(Rectangle((0, 0), (2, 1), names={"left": "inlet"}), 0.3),
                       Disk((0.8, 0.8), 0.2, name="hole"))
    assert boundary_names(holed) == ("bottom", "hole", "inlet", "right", "top")
    # the meshed areas: booleans cut what pinnkit cuts (straight edges: exact; cubic curved
    # edges at maxh 0.1: measured 9e-5 on a disk of radius 0.2, so rel 3e-4)
    import ngsolve as ng

    from pinnkit.geometry import Ellipse, Polygon, intersection, scale, translate
    from pinnkit.solvers.fem_geometry import make_mesh

    tilted = rotate(Ellipse((0.0, 0.0), (0.3, 0.1), name="body"), 0.7)
    cases = [
        (holed, 2.0 - math.pi * 0.04),
        (difference(Rectangle((-1, -1), (1, 1)), translate(tilted, (0.2, 0.1))), 4.0 - math.pi * 0.03),
        (intersection(Rectangle((0, 0), (2, 2)), scale(Disk((0, 0), 1.0), 1.5)), math.pi * 2.25 / 4),
        (union(Polygon([(0, 0), (1, 0), (0, 1)]), Rectangle((0.5, 0), (1, 0.5))), 0.5 + 0.25 - 0.125),
    ]
    for shape, area in cases:
        mesh = make_mesh(shape, 0.1)
        assert ng.Integrate(ng.CF(1.0), mesh, order=10) == pytest.approx(area, rel=3e-4), shape
    # the rotated, shifted ellipse's hole lies along 0.7 rad: its major axis' end (0.28
    # from the centre) is cut out, the same distance across the minor axis is fluid
    mesh = make_mesh(cases[1][0], 0.1)
    c, a = np.array([0.2, 0.1]), 0.28
    along = c + a * np.array([math.cos(0.7), math.sin(0.7)])
    across = c + a * np.array([-math.sin(0.7), math.cos(0.7)])
    found = mesh(np.array([along[0], across[0]]), np.array([along[1], across[1]]))["nr"]
    assert found[0] < 0 <= found[1]
    assert boundary_names(cases[1][0]) == ("body", "bottom", "left", "right", "top")
    with pytest.raises(FemGeometryError, match="cannot rebuild a Cuboid"):
        boundary_names(Cuboid((0, 0, 0), (1, 1, 1)))
    with pytest.raises(FemGeometryError, match="does not have"):
        solve_steady(two, 0.1, {"inlet": (1, 0)}, maxh=0.5, cache=False)


def test_cache_reads_back_the_same_solution_and_keys_on_the_inputs(tmp_path):
    box = Rectangle((0, 0), (1, 1), names={"top": "lid"})
    bc = {"lid": (1, 0), "left": (0, 0), "right": (0, 0), "bottom": (0, 0)}
    first = solve_steady(box, 0.01, bc, maxh=0.25, cache=tmp_path)
    again = solve_steady(box, 0.01, bc, maxh=0.25, cache=tmp_path)
    other = solve_steady(box, 0.02, bc, maxh=0.25, cache=tmp_path)
    assert not first.info["cached"] and again.info["cached"] and not other.info["cached"]
    assert again.info["path"] == first.info["path"] != other.info["path"]
    assert len(list(tmp_path.glob("*.npz"))) == 2
    xy = np.array([[0.5, 0.5], [0.2, 0.9]])
    np.testing.assert_array_equal(again.evaluate(xy), first.evaluate(xy))
    assert not np.allclose(other.evaluate(xy), first.evaluate(xy))
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(FemCacheError, match="cache=False"):
        solve_steady(box, 0.03, bc, maxh=0.25, cache=blocker / "sub")


def test_dfg_problem_carries_the_fem_field_reference(tmp_path, monkeypatch):
    # problem.params.fem_reference: the PINN problem's reference is the FE solution, so a
    # run's summary.json gets rel_l2 per field (run/metrics.evaluate, the path the CLI
    # takes). The reference matches the solver's own evaluation and the inflow profile; on
    # the float32 evaluation grid (boundary points rounded off the mesh are snapped back)
    # the reference has error 0 against itself and 0.1 against 1.1 times itself.
    from pinnkit.physics.host import HostFunction
    from pinnkit.problems import PROBLEMS
    from pinnkit.problems.dfg import fem_solution
    from pinnkit.run.metrics import evaluate

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    prob = PROBLEMS["dfg_cylinder"](fem_reference=True, fem_maxh=0.05)
    pts = np.array([[0.0, 0.2], [0.6, 0.1], [1.5, 0.3]])
    ref = prob.reference.host(pts)
    np.testing.assert_array_equal(ref, fem_solution(maxh=0.05).evaluate(pts))
    assert ref[0, 0] == pytest.approx(4 * 0.3 * 0.2 * 0.21 / 0.41**2, rel=1e-9)
    assert len(list((tmp_path / "cache").rglob("*.npz"))) == 1  # solved once, then read
    errors, _ = evaluate(prob.reference, prob, resolution=21)
    assert errors["rel_l2"] == {"u": 0.0, "v": 0.0, "p": 0.0, "velocity": 0.0}
    scaled = HostFunction(lambda x: 1.1 * prob.reference.fn(x), 3)
    errors, _ = evaluate(scaled, prob, resolution=21)
    for name in ("u", "v", "p", "velocity"):
        assert errors["rel_l2"][name] == pytest.approx(0.1, rel=1e-5)


def _bend():
    from pinnkit.geometry import Polygon

    return Polygon([(0, 0), (2, 0), (2, 2), (1, 2), (1, 1), (0, 1)],
                   names={"side0": "walls", "side1": "walls", "side2": "outlet", "side3": "walls",
                          "side4": "walls", "side5": "inlet"})


def test_reentrant_vertices_are_the_reflex_corners_only():
    from pinnkit.geometry import Polygon
    from pinnkit.solvers.fem_geometry import occ_face, reentrant_vertices

    def corners(shape):
        found = reentrant_vertices(shape, occ_face(shape))
        return sorted({(round(v.p.x, 9), round(v.p.y, 9)) for v in found})

    assert corners(_bend()) == [(1.0, 1.0)]
    assert corners(Polygon([(0, 0.5), (1, 0.5), (1, 0), (5, 0), (5, 1), (0, 1)])) == [(1.0, 0.5)]
    assert corners(Rectangle((0, 0), (3, 1))) == []  # convex corners: a quarter inside
    # a square obstacle's four corners are reflex seen from the fluid; a disk's seam is not
    obstacles = difference(Rectangle((0, 0), (3, 1)),
                           union(Disk((0.5, 0.4), 0.1), Rectangle((2.0, 0.3), (2.2, 0.5))))
    assert corners(obstacles) == [(2.0, 0.3), (2.0, 0.5), (2.2, 0.3), (2.2, 0.5)]


def test_corner_refinement_removes_the_reentrant_corners_pollution():
    r"""The bend (nu 0.05): a uniform mesh (maxh 0.1) resolves the pressure's singularity
    at the re-entrant corner ($r^{-0.456}$) so poorly that the whole field is off: against
    P3 on maxh 0.05 refined to 5e-4 at the corner, measured rel. L2 of u, v, p 7.7e-3,
    7.8e-3, 2.0e-2 with the uniform mesh and 2.8e-4, 3.0e-4, 1.4e-3 with the same mesh
    refined to 4e-3 at the corner (120 more elements). The grid leaves out the corner
    itself, where the exact pressure is infinite and a mesh's value is its own."""
    from pinnkit.solvers.fem_geometry import make_mesh

    bend = _bend()
    bc = {"inlet": lambda x, y: (4 * y * (1 - y), 0 * y), "walls": (0, 0)}
    g = np.stack(np.meshgrid(np.linspace(0, 2, 81), np.linspace(0, 2, 81)), -1).reshape(-1, 2)
    g = g[np.asarray(bend.inside(g)) & (np.hypot(g[:, 0] - 1, g[:, 1] - 1) > 1e-9)]
    fine = solve_steady(bend, 0.05, bc, maxh=0.05, corner_maxh=5e-4, order=3, cache=False).evaluate(g)

    def errors(**kw):
        got = solve_steady(bend, 0.05, bc, maxh=0.1, cache=False, **kw).evaluate(g)
        return [np.linalg.norm(got[:, i] - fine[:, i]) / np.linalg.norm(fine[:, i]) for i in range(3)]

    uniform, graded = errors(), errors(corner_maxh=4e-3)
    assert min(uniform) > 5e-3 and uniform[2] > 1.5e-2, uniform
    assert max(graded[:2]) < 6e-4 and graded[2] < 3e-3, graded  # 2x the measured
    assert make_mesh(bend, 0.1, corner_maxh=4e-3).ne > make_mesh(bend, 0.1).ne
    with pytest.raises(FemGeometryError, match="corner_maxh must be a positive number"):
        make_mesh(bend, 0.1, corner_maxh=0.0)
