"""How smooth is what a hard-constrained network has to represent on the mesh cube?

    taskset -c 0 .venv/bin/python scripts/mesh_adf_smoothness.py [--points 4000] [--seed 0]

For $u^* = \\sin\\pi x \\sin\\pi y \\sin\\pi z$ (configs/tiny/poisson_mesh_cube.yaml's
solution, zero on the unit cube's surface) and a distance function $\\phi$, the network
of the hard constraint $u = \\phi N$ has to fit $N = u^*/\\phi$. Printed for each $\\phi$:
the median, 99th percentile and maximum of $|\\Delta(u^*/\\phi)|$ over points uniform in
the cube, and the maximum over points at heights 1e-4 ... 1e-3 over a face (and 0.1
from its edges); $\\phi$ at the centre; the
largest relative difference of $\\phi$ between the cube's 768 triangles
(configs/meshes/cube.obj) and 12 (the same faces, two triangles each); and the CPU
seconds of one jitted evaluation of $\\phi$ on all points. The distance functions: the
mesh's ``adf`` options (`pinnkit.geometry.mesh.MESH_ADFS`) and the R-function distance
of the CSG ``box`` (`pinnkit.geometry.distance.adf`). Float64.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

CUBE = Path(__file__).resolve().parent.parent / "configs" / "meshes" / "cube.obj"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    import trimesh

    from pinnkit.geometry import Cuboid, TriangleMesh
    from pinnkit.geometry.distance import adf
    from pinnkit.geometry.mesh import MESH_ADFS

    fine = TriangleMesh.from_file(CUBE)
    lo, hi = (np.asarray(b) for b in fine.bbox())
    coarse = trimesh.creation.box(bounds=np.stack([lo, hi]))
    rng = np.random.default_rng(args.seed)
    x = jnp.asarray(lo + rng.random((args.points, 3)) * (hi - lo))
    # near the faces, away from their edges: a random face, height in (1e-4, 1e-3), the other
    # coordinates at least a tenth of the side from the edges (near the edges every phi has
    # second derivatives ~ 1/r, r the distance to the edge)
    y = lo + (0.1 + 0.8 * rng.random((args.points // 4, 3))) * (hi - lo)
    axis, side = rng.integers(0, 3, len(y)), rng.integers(0, 2, len(y))
    h = 1e-4 + 9e-4 * rng.random(len(y))  # lower, the quotient rule's terms (~1/h^2) lose it to rounding
    y[np.arange(len(y)), axis] = np.where(side == 1, hi[axis] - h, lo[axis] + h)
    y = jnp.asarray(y)
    exact = lambda p: jnp.prod(jnp.sin(jnp.pi * (p - lo) / (hi - lo)))  # noqa: E731

    phis = {}
    for kind in MESH_ADFS:
        phis[f"mesh adf: {kind}"] = (TriangleMesh.from_file(CUBE, adf=kind),
                                    TriangleMesh(coarse.vertices, coarse.faces, adf=kind))
    box = Cuboid(tuple(lo), tuple(hi))
    print(f"{'distance':<18} {'median':>9} {'p99':>9} {'max':>9} {'max<1e-3':>9} {'centre':>7} "
          f"{'768 vs 12':>9} {'CPU s':>7}")
    for name, shapes in [*phis.items(), ("CSG box (R-func.)", (box, None))]:
        phi = adf(shapes[0])
        lap = jax.jit(jax.vmap(lambda p, phi=phi: jnp.trace(jax.hessian(lambda q: exact(q) / phi(q))(p))))
        a, b = np.abs(np.asarray(lap(x))), np.abs(np.asarray(lap(y)))
        f = jax.jit(jax.vmap(phi))
        f(x).block_until_ready()
        t = time.process_time()
        v = np.asarray(f(x).block_until_ready())
        cpu = time.process_time() - t
        other = None if shapes[1] is None else np.asarray(jax.vmap(adf(shapes[1]))(x))
        same = "" if other is None else f"{np.max(np.abs(v - other) / v):9.1e}"
        centre = float(phi(jnp.asarray((lo + hi) / 2)))
        print(f"{name:<18} {np.median(a):9.3g} {np.percentile(a, 99):9.3g} {a.max():9.3g} {b.max():9.3g} "
              f"{centre:7.3f} {same:>9} {cpu:7.2f}")


if __name__ == "__main__":
    main()
