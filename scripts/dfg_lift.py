"""Where a DFG 2D-1 run's lift goes wrong: its fields against the finite-element reference.

    python scripts/dfg_lift.py notebooks/data/ns_cylinder_dfg1

Needs the ``fem`` extra. The reference is `pinnkit.problems.dfg.fem_solution` at P3/P2,
maxh 0.02 / 0.002 on the cylinder (c_L within 0.001 % of the benchmark's; about 10 CPU s
once, then read from the cache). Prints, for the run and for the reference:

- the surface force split into its pressure and viscous parts (traction just outside
  the circle, as `pinnkit.problems.dfg.circle_force` reads it);
- the antisymmetric part (under $y - 0.2 \\to 0.2 - y$) of the run's error in u, v, p on
  circles about the cylinder: the part of the field that makes lift;
- the volume formulation's c_D, c_L over several rings (`volume_force` with ``inner``):
  for the reference they agree with the benchmark on every ring; a run's figure that is
  the same on every ring is a property of its field away from the wall, not of the
  force integral;
- the volume flux through sections of the channel, and the divergence integrated over
  rings next to the cylinder, above and below it: mass the network loses at the wall;
- the channel's y-momentum budget: for a solution the lift equals
  $\int (p_\text{bottom} - p_\text{top})\,dx - \nu\int \partial_x v\,dy|_\text{inlet}
  - \int (u v - \nu \partial_x v)\,dy|_\text{outlet}$ (the y-momentum equation
  integrated over the fluid; the walls' viscous normal stress is 0 by continuity). Printed
  by stretches of the walls; a run's sum less its lift is its y-momentum residual
  integrated over the whole channel, which the mean-square loss does not control.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np


def _ring_integral(fn, center, r0, r1, n_r=16, n_theta=512):
    """``sum(w * fn(points, y_above_center))`` over the annulus r0 < r < r1, split by
    whether a point lies above the centre; returns (above, below)."""
    g, wg = np.polynomial.legendre.leggauss(n_r)
    r = r0 + (r1 - r0) * (g + 1) / 2
    th = 2 * np.pi * (np.arange(n_theta) + 0.5) / n_theta
    rr, tt = np.meshgrid(r, th, indexing="ij")
    pts = np.asarray(center) + np.stack([(rr * np.cos(tt)).ravel(), (rr * np.sin(tt)).ravel()], 1)
    w = ((wg * (r1 - r0) / 2)[:, None] * rr * (2 * np.pi / n_theta)).ravel()
    val = fn(pts)
    up = pts[:, 1] > center[1]
    return float(np.sum(w * val * up)), float(np.sum(w * val * ~up))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--order", type=int, default=3, help="reference elements (3: P3/P2)")
    ap.add_argument("--maxh", type=float, default=0.02, help="reference mesh size (cylinder: a tenth)")
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    import pinnkit
    from pinnkit.problems import dfg
    from pinnkit.run.metrics import Predictor
    from pinnkit.solvers.fem_ns import ngsolve_modules

    data = pinnkit.load_run(args.run_dir)
    run = Predictor(data.network, 4096, jnp.float64)
    fem = dfg.fem_solution(maxh=args.maxh, order=args.order)
    ng, _ = ngsolve_modules()
    grad_u = ng.grad(fem.velocity)

    def fem_jacobian(pts):  # (n, 3, 2); the pressure's row is not used
        g = np.asarray(grad_u(fem.mesh(pts[:, 0], pts[:, 1]))).reshape(-1, 2, 2)
        return np.concatenate([g, np.zeros((len(pts), 1, 2))], axis=1)

    nu, u_mean, radius = float(data.problem.coeffs["nu"]), 0.2, dfg.RADIUS
    scale = 2 / (u_mean**2 * 2 * radius)
    center = np.asarray(dfg.CENTER)
    n = 512
    th = 2 * np.pi * np.arange(n) / n
    nb = np.stack([np.cos(th), np.sin(th)], 1)
    mirror = (-np.arange(n)) % n  # theta -> -theta: y - 0.2 -> 0.2 - y on a circle

    def split(values, jac):  # (pressure, viscous) parts of (c_D, c_L) at r = R + 1e-3 R
        grad = jac[:, :2, :2]
        visc = nu * np.einsum("nij,nj->ni", grad + np.swapaxes(grad, 1, 2), nb)
        ds = 2 * np.pi * radius / n * scale
        return (-values[:, 2:3] * nb).sum(0) * ds, visc.sum(0) * ds

    pts = center + radius * (1 + 1e-3) * nb
    print("surface force at r = R(1 + 1e-3): pressure part, viscous part, sum")
    for name, pred, jac in (("run", run, run.jacobian), ("FEM", fem.evaluate, fem_jacobian)):
        pp, vv = split(np.asarray(pred(pts)), np.asarray(jac(pts)))
        print(f"  {name}: c_D {pp[0]:.5f} + {vv[0]:.5f} = {pp[0] + vv[0]:.5f}   "
              f"c_L {pp[1]:+.5f} + {vv[1]:+.5f} = {pp[1] + vv[1]:+.5f}")
    print(f"  reference: c_D {dfg.DFG1_REFERENCE['c_D']:.5f}, c_L {dfg.DFG1_REFERENCE['c_L']:.6f}")

    print("antisymmetric part of the run's error, rms on circles (the FEM field's own for p)")
    print("  r        u         v         p         p (FEM's signal)")
    for r in (0.0501, 0.051, 0.055, 0.06, 0.07, 0.08, 0.1, 0.12, 0.15, 0.18):
        q = center + r * nb
        a, b = np.asarray(run(q)), fem.evaluate(q)
        e = a - b
        anti = [(e[:, 0] - e[mirror, 0]) / 2, (e[:, 1] + e[mirror, 1]) / 2, (e[:, 2] - e[mirror, 2]) / 2]
        sig = (b[:, 2] - b[mirror, 2]) / 2
        rms = [np.sqrt(np.mean(x**2)) for x in (*anti, sig)]
        print(f"  {r:.4f}  " + "  ".join(f"{x:.2e}" for x in rms))

    print("volume formulation by ring (inner..outer): run c_D, c_L | FEM c_D, c_L")
    for inner, outer in ((0.05, 0.15), (0.05, 0.1), (0.07, 0.15), (0.1, 0.15), (0.07, 0.19), (0.12, 0.19)):
        a = dfg.volume_force(run, nu, outer=outer, inner=inner, n_r=32) * scale
        b = dfg.volume_force(fem.evaluate, nu, outer=outer, inner=inner, n_r=32) * scale
        print(f"  {inner:.2f}..{outer:.2f}: {a[0]:.5f} {a[1]:+.5f} | {b[0]:.5f} {b[1]:+.5f}")

    inflow = u_mean * dfg.HEIGHT
    print(f"volume flux (inflow {inflow:.6f}): run | FEM")
    for x in (0.1, 0.3, 1.0, dfg.LENGTH):
        print(f"  x = {x:.1f}: {dfg.section_flux(run, x):.6f} | {dfg.section_flux(fem.evaluate, x):.6f}")
    lo, hi = (0.0, center[1] - radius), (center[1] + radius, dfg.HEIGHT)
    print(f"  x = 0.2 below / above the cylinder: {dfg.section_flux(run, 0.2, *lo):.6f} / "
          f"{dfg.section_flux(run, 0.2, *hi):.6f} | {dfg.section_flux(fem.evaluate, 0.2, *lo):.6f} / "
          f"{dfg.section_flux(fem.evaluate, 0.2, *hi):.6f}")

    def div(q):
        j = np.asarray(run.jacobian(q))
        return j[:, 0, 0] + j[:, 1, 1]

    print("run's divergence integrated over rings, above / below the centre")
    for r0, r1 in ((radius, 0.051), (0.051, 0.055), (0.055, 0.07), (0.07, 0.15)):
        up, down = _ring_integral(div, center, r0, r1)
        print(f"  {r0:.3f}..{r1:.3f}: {up:+.3e} / {down:+.3e}")

    edges = (0.0, 0.1, 0.15, 0.25, 0.3, 0.5, 1.0, 1.5, dfg.LENGTH)
    print("y-momentum budget in c_L units: int (p_bottom - p_top) dx over the wall stretches; "
          "the inlet's and outlet's terms; their sum (a solution's lift)")
    y, wy = dfg.gauss_legendre(64, 0.0, dfg.HEIGHT)
    d = 1e-4  # the hard constraint's kink on the inlet: dv/dx from just inside, 2 J(d) - J(2d)
    for name, pred, jac in (("run", run, run.jacobian), ("FEM", fem.evaluate, fem_jacobian)):
        walls = []
        for a, b in itertools.pairwise(edges):
            x, wx = dfg.gauss_legendre(64, a, b)
            p = [np.asarray(pred(np.stack([x, np.full_like(x, yw)], 1)))[:, 2]
                 for yw in (0.0, dfg.HEIGHT)]
            walls.append(float((wx * (p[0] - p[1])).sum()) * scale)
        dvdx = [np.asarray(jac(np.stack([np.full_like(y, x), y], 1)))[:, 1, 0]
                for x in (d, 2 * d, dfg.LENGTH)]
        inlet = -nu * float((wy * (2 * dvdx[0] - dvdx[1])).sum()) * scale
        out = np.asarray(pred(np.stack([np.full_like(y, dfg.LENGTH), y], 1)))
        outlet = -float((wy * (out[:, 0] * out[:, 1] - nu * dvdx[2])).sum()) * scale
        stretches = zip(itertools.pairwise(edges), walls, strict=True)
        print(f"  {name}: " + " ".join(f"[{a:.2f}, {b:.2f}] {w:+.5f}" for (a, b), w in stretches))
        print(f"       walls {sum(walls):+.5f}  inlet {inlet:+.5f}  outlet {outlet:+.5f}  "
              f"sum {sum(walls) + inlet + outlet:+.5f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
