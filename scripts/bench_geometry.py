"""Geometry throughput: sampling points/s on a CSG of 10 primitives and on a mesh of
10,000 triangles, and the distance function's share of a hard-constrained training step.

    taskset -c 1 .venv/bin/python scripts/bench_geometry.py [--quick]
    taskset -c 1 .venv/bin/python scripts/bench_geometry.py --build [--timeout 60]
    taskset -c 1 .venv/bin/python scripts/bench_geometry.py --mesh [--sizes 10000,100000]
    taskset -c 1 .venv/bin/python scripts/bench_geometry.py --corners [--sizes 100,1000]

CPU seconds (`time.process_time`) per call after a warm-up (compile excluded), best of
``--repeat``. The step-share line compares one Adam step (loss and gradient, Taylor
derivatives, 1024 fixed points) of Poisson on the perforated plate with the
`DistanceDirichlet` transform against the same step with the box polynomial
`HardDirichlet` (same network, same points): the difference is what the distance
functions cost.

``--build`` prints the build time instead, against the number of polygon vertices and
CSG operands (10 ... 10^5): CPU seconds of parsing the YAML config, validating and
building the shape (`build_domain`: acceptance estimates included), drawing 1024
points of the interior and of the boundary once (jit: traced, compiled, run) and, with
``hard``, tracing and compiling the gradient of the boundary's distance function. Each
row runs in a fresh process (JAX and scipy imported before the clock starts); a row
that has used ``--timeout`` CPU seconds is stopped and reported as such, a refused one
with its first words.

``--mesh`` compares mesh query backends on tori of 10^4 and 10^5 triangles: signed
distance queries/s on 2*10^5 points uniform in the bounding box (Warp's BVH, exact and
clamped at the hard constraint's reach; libigl's AABB tree and fcpw's BVH where those
packages are importable; trimesh's R-tree and the jnp brute force on fewer points), the
max difference to the float64 brute force on 10^3 of them (10^2 at 10^5 triangles), the inside test, interior
sampling points/s (per step in jit and a fixed set on the host) and the smooth distance
function of `pinnkit.geometry.mesh_adf` in jit.

``--corners`` times the search for re-entrant no-slip corners that every incompressible
flow with the corner weight runs (`pinnkit.geometry.stokes_corner.reentrant_corners`) on
a star polygon of n vertices (radii 1 and 0.6 alternating: n/2 reflex corners), all
sides walls: CPU seconds of the first call (its batched sdf compilations included).
"""

from __future__ import annotations

import argparse
import math
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def cpu_time(fn, repeat: int) -> float:
    jax.block_until_ready(fn())  # compile / warm up
    best = math.inf
    for _ in range(repeat):
        t0 = time.process_time()
        jax.block_until_ready(fn())
        best = min(best, time.process_time() - t0)
    return best


def csg10():
    from pinnkit.geometry import Disk, Rectangle, difference

    holes = [Disk([0.25 + 0.25 * i, 0.25 + 0.25 * j], 0.08, name=f"h{i}{j}")
             for i in range(3) for j in range(3)]
    return difference(Rectangle([0, 0], [1, 1]), *holes)


def torus(n_tri: int):
    import trimesh

    from pinnkit.geometry import TriangleMesh

    major = int(round(math.sqrt(n_tri / 2 * 2)))
    t = trimesh.creation.torus(major_radius=1.0, minor_radius=0.4, major_sections=major,
                               minor_sections=max(3, n_tri // (2 * major)))
    return TriangleMesh(t.vertices, t.faces)


def sampling_rows(name, shape, n, repeat):
    from pinnkit.geometry.domains import AbstractRejectionDomain

    rows = []
    for piece in ("interior", "boundary"):
        m = shape.unit_rows(n, piece)
        u = jax.random.uniform(jax.random.key(0), (m, shape.dim))
        f = jax.jit(lambda u, piece=piece: shape.points(u, piece, n))
        t = cpu_time(lambda f=f, u=u: f(u), repeat)
        # an image of the unit cube (a box) rejects nothing: acceptance 1
        acc = shape.acceptance(piece) if isinstance(shape, AbstractRejectionDomain) else 1.0
        rows.append((name, piece, "per-step (jit)", n, acc, n / t))
    return rows


def host_rows(name, shape, n, repeat):
    from pinnkit.geometry.rejection import host_points

    draw = lambda r, m: np.random.default_rng(r).uniform(size=(m, shape.dim))  # noqa: E731
    t = cpu_time(lambda: jnp.asarray(host_points(shape, "interior", n, draw, np.float32)[0]), repeat)
    return [(name, "interior", "fixed set (host)", n, shape.acceptance("interior"), n / t)]


def mesh_host_rows(mesh, n, repeat):
    pts = np.random.default_rng(0).uniform(-1.4, 1.4, (n, 3)) * [1, 1, 0.3]
    t_in = cpu_time(lambda: jnp.asarray(mesh.host_contains(pts)), repeat)
    t_sd = cpu_time(lambda: jnp.asarray(mesh.host_signed_distance(pts)), repeat)
    x = jnp.asarray(pts, jnp.float32)
    sd = jax.jit(lambda x: jax.lax.map(mesh.sdf, x, batch_size=256))
    t_j = cpu_time(lambda: sd(x), repeat)
    return [("mesh", "inside test", "host (trimesh rays, R-tree)", n, None, n / t_in),
            ("mesh", "signed distance", "host (trimesh, R-tree)", n, None, n / t_sd),
            ("mesh", "signed distance", "jnp brute force O(T)", n, None, n / t_j)]


def _brute(mesh, x):
    """Float64 signed distance by the O(T) jnp path (the reference)."""
    ref = TriangleMeshJax(mesh)
    with jax.enable_x64(True):
        sd = jax.jit(lambda x: jax.lax.map(ref.sdf, x, batch_size=16))
        return np.asarray(sd(jnp.asarray(x, jnp.float64)))


def mesh_backend_rows(n_tri: int, n: int, repeat: int):
    from pinnkit.geometry.mesh_warp import WarpMesh

    mesh = torus(n_tri)
    tri = mesh.triangles
    lo, hi = (np.asarray(b) for b in mesh.bbox())
    x = np.random.default_rng(0).uniform(lo, hi, (n, 3))
    # the O(T) paths (the float64 reference, the jnp brute force, trimesh) on fewer points
    # as T grows: 10^3 at 10^4 triangles, 10^2 at 10^5 (10^8 triangle tests took an hour
    # of wall time on a shared core)
    m = min(1000, max(100, int(1e7 / len(tri))))
    ref = _brute(mesh, x[:m])
    rows = []

    def row(name, fn, pts, err=True):
        t = cpu_time(lambda: fn(pts), repeat)
        e = f"{np.abs(np.asarray(fn(x[:m])) - ref).max():.1e}" if err else ""
        rows.append((len(tri), name, len(pts) / t, e))

    w = WarpMesh(tri)
    row("Warp BVH (sign: pseudo-normal)", w.signed_distance, x)
    reach = mesh.smooth.radius
    row(f"Warp BVH, clamped at {reach:.2g}", lambda p: w.signed_distance(p, reach), x, err=False)
    try:
        import igl

        v, f = tri.reshape(-1, 3), np.arange(tri.size // 3, dtype=np.int64).reshape(-1, 3)
        typ = igl.SignedDistanceType.SIGNED_DISTANCE_TYPE_PSEUDONORMAL
        row("libigl AABB (pseudo-normal)", lambda p: igl.signed_distance(p, v, f, sign_type=typ)[0], x)
    except ImportError:
        rows.append((len(tri), "libigl: not installed", float("nan"), ""))
    try:
        import fcpw

        sc = fcpw.scene_3D()
        sc.set_object_count(1)
        sc.set_object_vertices(np.asfortranarray(tri.reshape(-1, 3), np.float32), 0)
        sc.set_object_triangles(np.asfortranarray(np.arange(tri.size // 3, dtype=np.int32).reshape(-1, 3)), 0)
        sc.build(fcpw.aggregate_type.bvh_surface_area, True)

        def fc(p):  # unsigned: the batched contains of fcpw 1.2.0 returned 0 for every point here
            q = np.asfortranarray(p, np.float32)
            hits = fcpw.interaction_3D_list()
            sc.find_closest_points(q, np.full(len(q), np.inf, np.float32), hits)
            return np.fromiter((h.d for h in hits), np.float64, len(q))

        t = cpu_time(lambda: fc(x), repeat)
        err = f"{np.abs(fc(x[:m]) - np.abs(ref)).max():.1e} (unsigned)"
        rows.append((len(tri), "fcpw BVH (unsigned distance)", len(x) / t, err))
    except ImportError:
        rows.append((len(tri), "fcpw: not installed", float("nan"), ""))
    import trimesh

    tm = mesh.trimesh()
    row("trimesh R-tree", lambda p: -trimesh.proximity.signed_distance(tm, p), x[:2 * m], err=False)
    jax_mesh = TriangleMeshJax(mesh)
    sd = jax.jit(lambda p: jax.lax.map(jax_mesh.sdf, p, batch_size=32))
    row("jnp brute force O(T) (jit, float32)", lambda p: sd(jnp.asarray(p, jnp.float32)), x[:m])
    sdw = jax.jit(jax.vmap(mesh.sdf))
    row("Warp through jax.pure_callback (jit, float32)", lambda p: sdw(jnp.asarray(p, jnp.float32)), x)
    row("Warp inside test (ray parity)", w.contains, x, err=False)
    k = 16384
    m = mesh.unit_rows(k, "interior")
    u = jax.random.uniform(jax.random.key(0), (m, 3))
    f = jax.jit(lambda u: mesh.points(u, "interior", k))
    rate = k / cpu_time(lambda: f(u), repeat)
    rows.append((len(tri), "interior sampling, per step (jit, Warp callback), points/s", rate, ""))
    from pinnkit.geometry.rejection import host_points

    draw = lambda r, mm: np.random.default_rng(r).uniform(size=(mm, 3))  # noqa: E731
    t = cpu_time(lambda: jnp.asarray(host_points(mesh, "interior", k, draw, np.float32)[0]), repeat)
    rows.append((len(tri), "interior sampling, fixed set (host), points/s", k / t, ""))
    try:
        phi = jax.jit(jax.vmap(mesh.smooth.get()))
        pin = f(u)
        name = f"smooth ADF (jit, reach {reach:.2g}, {mesh.smooth.get().width} triangles/cell)"
        rows.append((len(tri), name, k / cpu_time(lambda: phi(pin), repeat), ""))
    except ValueError as e:
        rows.append((len(tri), f"smooth ADF: refused ({str(e)[:60]}...)", float("nan"), ""))
    return rows


class TriangleMeshJax:
    """The jnp brute-force signed distance of a mesh (whatever its backend)."""

    def __init__(self, mesh):
        self.mesh = mesh

    def sdf(self, x):
        from pinnkit.geometry.mesh import _tri_distance2, _winding

        tri = jnp.asarray(self.mesh.triangles, x.dtype)
        d2 = jnp.min(_tri_distance2(x, tri))
        d = jnp.sqrt(jnp.maximum(d2, 0.0))
        return jnp.where(_winding(x, tri) > 0.5, -d, d)


def mesh_table(sizes, n: int, repeat: int) -> None:
    print(f"Mesh backends: tori, {n} points uniform in the bounding box, CPU s, best of {repeat}")
    print("| triangles | backend / path | queries/s (CPU) | max abs. error vs float64 brute force "
          "(10^3 points; 10^2 at 10^5 triangles) |")
    print("|---|---|---|---|")
    for n_tri in sizes:
        for t, name, rate, err in mesh_backend_rows(n_tri, n, repeat):
            print(f"| {t:,} | {name} | {rate:,.0f} | {err} |", flush=True)


def step_share(repeat):
    import optax

    from pinnkit.diffops import Taylor
    from pinnkit.geometry import Disk, DistanceDirichlet, Rectangle, difference
    from pinnkit.nn.layers import HardDirichlet
    from pinnkit.nn.nets import build_mlp_network
    from pinnkit.physics.problem import Problem
    from pinnkit.physics.terms import Equation

    dom = difference(Rectangle([-1, -1], [1, 1]), Disk([0.3, 0.2], 0.4, name="hole"))
    pts = dom.sample(jax.random.key(0), 1024, "interior")
    prob = Problem(dom, ("u",), {"pde": Equation(lambda f, c: -f.laplacian("u") - 1.0)})
    out = {}
    for label, tr in (("distance", DistanceDirichlet(dom, ("boundary",), ((0,),), (None,))),
                      ("box", HardDirichlet((-1.0, -1.0), (1.0, 1.0), (0, 1), (0,)))):
        net = build_mlp_network(("x", "y"), ("u",), width=32, depth=3, activation="tanh",
                                init="glorot_normal", bounds=((-1, -1), (1, 1)), transform=tr,
                                key=jax.random.key(1))
        opt = optax.adam(1e-3)
        state = opt.init(eqx.filter(net, eqx.is_array))

        @eqx.filter_jit
        def step(net, state, opt=opt):
            loss = lambda n: prob.loss_terms(n, prob.coeffs, {"pde": pts}, Taylor())["pde"]  # noqa: E731
            g = eqx.filter_grad(loss)(net)
            upd, state = opt.update(g, state)
            return eqx.apply_updates(net, upd), state

        first = lambda net=net, state=state, step=step: step(net, state)[0].core.layers[0].weight  # noqa: E731
        out[label] = cpu_time(first, repeat)
    return out


def build_spec(kind: str, n: int) -> str:
    """The YAML text of a domain of ``n`` vertices / operands."""
    import yaml

    if kind.startswith("polygon"):
        th = np.linspace(0, 2 * np.pi, n, endpoint=False)
        r = 1.0 + 0.3 * np.cos(7 * th)  # a non-convex star
        tree = {"polygon": {"vertices": np.round(np.stack([r * np.cos(th), r * np.sin(th)], 1), 9).tolist()}}
    elif kind == "union":  # disks on a grid, each overlapping its neighbours, one name each
        side = int(math.ceil(math.sqrt(n)))
        tree = {"union": [{"disk": {"center": [0.1 * (i % side), 0.1 * (i // side)], "radius": 0.07,
                                    "name": f"d{i}"}} for i in range(n)]}
    else:  # a plate with n holes sharing one name
        side = int(math.ceil(math.sqrt(n)))
        tree = {"difference": [{"rectangle": {"lower": [0, 0], "upper": [side, side]}}] + [
            {"disk": {"center": [0.5 + i % side, 0.5 + i // side], "radius": 0.3, "name": "holes"}}
            for i in range(n)]}
    return yaml.safe_dump({"domain": tree}, default_flow_style=True, width=1 << 30)


def build_one(kind: str, n: int) -> None:
    """One row of ``--build`` (in its own process): prints ``{"cpu_s": ...}`` or the refusal."""
    import json

    import scipy.stats  # noqa: F401  (imported before the clock, as JAX is)

    from pinnkit.geometry.config import build_domain
    from pinnkit.geometry.distance import adf
    from pinnkit.run.yamlsafe import ConfigError, loads  # the CLI's parser (libyaml)

    text = build_spec(kind, n)
    jnp.zeros(1).block_until_ready()
    t0 = time.process_time()
    try:
        dom = build_domain(loads(text, "bench")["domain"])
        for piece in ("interior", "boundary"):
            m = dom.unit_rows(1024, piece)
            u = jax.random.uniform(jax.random.key(0), (m, dom.dim))
            jax.block_until_ready(jax.jit(lambda u, piece=piece: dom.points(u, piece, 1024))(u))
        if kind.endswith("hard"):
            phi = adf(dom)
            jax.block_until_ready(jax.jit(jax.vmap(jax.grad(phi)))(jnp.full((8, 2), 0.1)))
    except (ValueError, ConfigError) as e:
        print(json.dumps({"cpu_s": time.process_time() - t0, "refused": str(e)[:90]}))
        return
    print(json.dumps({"cpu_s": time.process_time() - t0, "pieces": len(dom.pieces())}))


def build_table(timeout: float, sizes) -> None:
    import json
    import resource
    import signal
    import subprocess
    import sys

    print(f"Build time (CPU s, one process per row, timeout {timeout:g} s)")
    print("| shape | n | CPU s | note |")
    print("|---|---|---|---|")
    for kind, label in (("polygon", "polygon (vertices)"), ("polygon-hard", "polygon + hard constraint"),
                        ("union", "union of named disks (operands)"),
                        ("difference", "plate minus disks (operands)")):
        for n in sizes:
            try:  # the limit is on CPU seconds (a shared machine stretches wall time)
                out = subprocess.run([sys.executable, __file__, "--build-one", kind, str(n)],
                                     capture_output=True, text=True, timeout=50 * timeout,
                                     preexec_fn=lambda: resource.setrlimit(
                                         resource.RLIMIT_CPU, (math.ceil(timeout), math.ceil(timeout) + 5)))
            except subprocess.TimeoutExpired:
                print(f"| {label} | {n} | - | still building after {50 * timeout:g} wall s (killed) |",
                      flush=True)
                continue
            if out.returncode == -signal.SIGXCPU:
                print(f"| {label} | {n} | > {timeout:g} | still building (killed) |", flush=True)
                continue
            try:
                row = json.loads(out.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                print(f"| {label} | {n} | - | failed: {out.stderr.strip().splitlines()[-1:]} |", flush=True)
                continue
            note = f"refused: {row['refused']}" if "refused" in row else f"{row['pieces']} pieces"
            print(f"| {label} | {n} | {row['cpu_s']:.2f} | {note} |", flush=True)


def star(n: int):
    """A star polygon of ``n`` vertices, radii 1 and 0.6 alternating, every side a wall."""
    from pinnkit.geometry import Polygon

    th = 2 * np.pi * np.arange(n) / n
    r = np.where(np.arange(n) % 2 == 0, 1.0, 0.6)
    return Polygon(np.stack([r * np.cos(th), r * np.sin(th)], 1).tolist(), name="walls")


def corner_table(sizes) -> None:
    from pinnkit.geometry.stokes_corner import reentrant_corners

    print("| star vertices | re-entrant corners | CPU s |")
    print("|---|---|---|")
    for n in sizes:
        shape = star(n)
        t0 = time.process_time()
        found = reentrant_corners(shape, {"walls"}, 0.01)
        print(f"| {n} | {len(found)} | {time.process_time() - t0:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sets (a smoke test)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--build", action="store_true", help="build time against vertices/operands")
    ap.add_argument("--timeout", type=float, default=60.0, help="--build: CPU seconds per row")
    ap.add_argument("--sizes", default=None, help="--build / --mesh: comma-separated sizes")
    ap.add_argument("--mesh", action="store_true", help="mesh query backends side by side")
    ap.add_argument("--corners", action="store_true", help="re-entrant corner search against vertices")
    ap.add_argument("--build-one", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.build_one:
        return build_one(a.build_one[0], int(a.build_one[1]))
    if a.build:
        return build_table(a.timeout, [int(v) for v in (a.sizes or "10,100,1000,10000,100000").split(",")])
    if a.corners:
        return corner_table([int(v) for v in (a.sizes or "100,1000").split(",")])
    if a.mesh:
        return mesh_table([int(v) for v in (a.sizes or "10000,100000").split(",")], 200_000, a.repeat)
    n = 4096 if a.quick else 16384
    n_tri = 2000 if a.quick else 10000
    shape, mesh = csg10(), torus(n_tri)
    print(f"CSG: rectangle minus 9 disks ({len(shape.parts())} boundary parts); "
          f"mesh: torus of {len(mesh.triangles)} triangles; {n} points; CPU s, best of {a.repeat}")
    from pinnkit.geometry.domains import Box

    rows = sampling_rows("box (baseline)", Box((0.0, 0.0), (1.0, 1.0)), n, a.repeat)
    rows += sampling_rows("csg10", shape, n, a.repeat) + host_rows("csg10", shape, n, a.repeat)
    rows += sampling_rows("mesh", mesh, n // 4, a.repeat) + mesh_host_rows(mesh, n // 4, a.repeat)
    base = {piece: rate for name, piece, _, _, _, rate in rows[:2]}
    print("| shape | piece | path | points | acceptance | points/s (CPU) | vs box |")
    print("|---|---|---|---|---|---|---|")
    for name, piece, path, k, p, rate in rows:
        acc = "" if p is None else f"{p:.3f}"
        ratio = f"{rate / base.get(piece, base['interior']):.3g}"
        print(f"| {name} | {piece} | {path} | {k} | {acc} | {rate:,.0f} | {ratio} |")
    s = step_share(a.repeat)
    share = (s["distance"] - s["box"]) / s["distance"]
    print(f"\nAdam step, 1024 points, 32x3 tanh, Taylor: with DistanceDirichlet {1e3 * s['distance']:.2f} "
          f"ms, with the box HardDirichlet {1e3 * s['box']:.2f} ms: distance functions = "
          f"{100 * share:.0f} % of the step")


if __name__ == "__main__":
    main()
