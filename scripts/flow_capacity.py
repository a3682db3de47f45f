"""How well a run's network can represent its reference field at all: the same network
(architecture, hard constraint, starting from the run's trained parameters) fitted to the
reference by Levenberg–Marquardt on the data alone, no physics. A trained PINN's error far
above this fit's is the optimiser's or the points'; close to it, the network's size.

    python scripts/flow_capacity.py runs/flow_obstacles --points 6000 --iters 100

Least squares over ``--points`` uniform points of the shape (key 11): residuals
$(\\hat y_k - y_k)/\\mathrm{rms}(y_k)$ for every output $k$ (an output whose rms is under 1e-3
of the largest, v of Poiseuille flow: divided by the largest), the gauged outputs
(`Problem.gauge`, the pressure of a flow with the velocity given on the whole boundary)
less their means over the points. Each iteration solves
$(J^\\top J + \\lambda\\,\\overline{\\mathrm{diag}}\\,I)\\,\\delta = J^\\top r$ with the Jacobian of
the network's raw outputs times the hard constraint's distance factor (the lifting is
fixed data), $\\lambda$ divided by 3 after an accepted step and multiplied by 4 after a
refused one. Every 10 iterations it prints the mean square residual and the rel. L2 of each
output on 20 000 other points (key 5; absolute RMS for a vanishing reference, as the
evaluation reports it). Needs the run's reference (`fem_reference: true`
for ``incompressible_flow``); the run's x64 setting is applied.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--points", type=int, default=6000, help="fitting points in the shape")
    ap.add_argument("--iters", type=int, default=100, help="Levenberg-Marquardt iterations")
    ap.add_argument("--block", type=int, default=200, help="points per block of the Jacobian (memory)")
    args = ap.parse_args()

    import equinox as eqx
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    from pinnkit.cli.jaxsetup import apply_numerics
    from pinnkit.geometry.distance import DistanceDirichlet
    from pinnkit.parallel.mesh import relative_errors
    from pinnkit.run.rundir import load_run, read_config

    apply_numerics(read_config(args.run_dir), None)
    data = load_run(args.run_dir)
    prob, net = data.problem, data.network
    if prob.reference is None:
        print(f"{args.run_dir}: the problem has no reference field to fit (for incompressible_flow: "
              "problem.params.fem_reference: true in the run's config.yaml)", file=sys.stderr)
        return 2
    if net.parity is not None:  # the fit below differentiates `raw`, which skips the symmetrisation
        print(f"{args.run_dir}: the network has network.parity; this script fits networks without it",
              file=sys.stderr)
        return 2
    if net.transform is not None and not isinstance(net.transform, DistanceDirichlet):
        print(f"{args.run_dir}: the network's hard constraint is {type(net.transform).__name__}; this "
              "script fits networks without one or with DistanceDirichlet (hard_velocity: all)",
              file=sys.stderr)
        return 2
    dtype = jnp.float64 if data.config.numerics.x64 else jnp.float32
    m = len(prob.out_names)
    gauged = [prob.out_names.index(n) for n in prob.gauge_map]

    def sample(key: int, n: int):
        p = np.asarray(prob.domain.sample(jax.random.key(key), n, "interior", dtype), np.float64)
        r = np.array(prob.reference.host(p, np.float64))
        ok = np.all(np.isfinite(r), axis=1)
        p, r = p[ok], r[ok]
        r[:, gauged] -= r[:, gauged].mean(axis=0)
        return p, r

    pts, ref = sample(11, args.points)
    keep = len(pts) // args.block * args.block
    pts, ref = jnp.asarray(pts[:keep], dtype), jnp.asarray(ref[:keep], dtype)
    test, tref = sample(5, 20000)

    def lifting(x):  # (A, D) with the network's output A + D * raw; no constraint: (0, 1)
        if net.transform is None:
            return jnp.zeros(m, x.dtype), jnp.ones(m, x.dtype)
        return net.transform.lifting(x, m)

    lift = jax.jit(jax.vmap(lifting))
    a, d = lift(pts)
    params, static = eqx.partition(net, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    rms = jnp.sqrt(jnp.mean(ref**2, axis=0))  # a vanishing output (v of Poiseuille flow): the largest's scale
    scale = jnp.where(rms > 1e-3 * jnp.max(rms), rms, jnp.max(rms))
    gmask = jnp.zeros(m, bool).at[jnp.asarray(gauged, int)].set(True) if gauged else jnp.zeros(m, bool)

    def fields(f, x, a, d):
        y = a + d * jax.vmap(eqx.combine(unravel(f), static).raw)(x)
        return jnp.where(gmask, y - y.mean(axis=0), y)

    residual = jax.jit(lambda f: ((fields(f, pts, a, d) - ref) / scale).ravel())

    @jax.jit
    def jacobian(f):  # blocks of points, each point's (m, P) rows by reverse mode
        def one(x, ai, di):
            return jax.jacrev(lambda g: ai + di * eqx.combine(unravel(g), static).raw(x))(f)
        blocks = (pts.reshape(-1, args.block, pts.shape[1]), a.reshape(-1, args.block, m),
                  d.reshape(-1, args.block, m))
        jm = jax.lax.map(lambda b: jax.vmap(one)(*b), blocks).reshape(-1, m, f.size)
        jm = jnp.where(gmask[None, :, None], jm - jm.mean(axis=0), jm)
        return (jm / scale[None, :, None]).reshape(-1, f.size)

    ta, td = lift(jnp.asarray(test, dtype))

    def errors(f):  # the evaluation's rule: relative, or absolute RMS for a vanishing reference
        out = np.asarray(fields(f, jnp.asarray(test, dtype), ta, td))
        return relative_errors(prob.out_names, ((out - tref) ** 2).sum(0), (tref**2).sum(0), len(tref))

    def line(it, f):
        errs = ", ".join(f"{n} {e:.3e}" for n, e in errors(f).items())
        return f"iteration {it}: mean square {float(jnp.mean(residual(f) ** 2)):.3e}; rel. L2 {errs}"

    print(f"{args.run_dir}: {flat.size} parameters, {keep} points x {m} outputs", flush=True)
    print(line(0, flat), flush=True)
    lam, f = 1e-3, flat
    for it in range(1, args.iters + 1):
        r, jm = residual(f), jacobian(f)
        g, gram = jm.T @ r, jm.T @ jm
        mean_diag, r0 = jnp.trace(gram) / gram.shape[0], float(jnp.sum(r**2))
        while lam < 1e8:
            trial = f - jnp.linalg.solve(gram + lam * mean_diag * jnp.eye(f.size, dtype=f.dtype), g)
            if float(jnp.sum(residual(trial) ** 2)) < r0:
                f, lam = trial, max(lam / 3, 1e-12)
                break
            lam *= 4
        else:
            print(f"iteration {it}: no step lowers the misfit (lambda {lam:.1e}); stopping", flush=True)
            break
        if it % 10 == 0 or it == args.iters:
            print(line(it, f), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
