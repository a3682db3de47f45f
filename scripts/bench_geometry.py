"""Geometry throughput: sampling points/s on a CSG of 10 primitives and on a mesh of
10,000 triangles, and the distance function's share of a hard-constrained training step.

    taskset -c 1 .venv/bin/python scripts/bench_geometry.py [--quick]
    taskset -c 1 .venv/bin/python scripts/bench_geometry.py --build [--timeout 60]

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
    rows = []
    for piece in ("interior", "boundary"):
        m = shape.unit_rows(n, piece)
        u = jax.random.uniform(jax.random.key(0), (m, shape.dim))
        f = jax.jit(lambda u, piece=piece: shape.points(u, piece, n))
        t = cpu_time(lambda f=f, u=u: f(u), repeat)
        rows.append((name, piece, "per-step (jit)", n, shape.acceptance(piece), n / t))
    return rows


def host_rows(name, shape, n, repeat):
    from pinnkit.geometry.sampling import host_points

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
    import yaml

    from pinnkit.geometry.config import build_domain
    from pinnkit.geometry.distance import adf

    text = build_spec(kind, n)
    jnp.zeros(1).block_until_ready()
    t0 = time.process_time()
    try:
        dom = build_domain(yaml.safe_load(text)["domain"])
        for piece in ("interior", "boundary"):
            m = dom.unit_rows(1024, piece)
            u = jax.random.uniform(jax.random.key(0), (m, dom.dim))
            jax.block_until_ready(jax.jit(lambda u, piece=piece: dom.points(u, piece, 1024))(u))
        if kind.endswith("hard"):
            phi = adf(dom)
            jax.block_until_ready(jax.jit(jax.vmap(jax.grad(phi)))(jnp.full((8, 2), 0.1)))
    except ValueError as e:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sets (a smoke test)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--build", action="store_true", help="build time against vertices/operands")
    ap.add_argument("--timeout", type=float, default=60.0, help="--build: CPU seconds per row")
    ap.add_argument("--sizes", default="10,100,1000,10000,100000", help="--build: comma-separated")
    ap.add_argument("--build-one", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.build_one:
        return build_one(a.build_one[0], int(a.build_one[1]))
    if a.build:
        return build_table(a.timeout, [int(v) for v in a.sizes.split(",")])
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
