"""Where a flow run's error lives, against its field reference (``incompressible_flow``
with ``fem_reference: true``, or any 2-D flow with a reference on a shape): rel. L2 of
u, v, p over points of the shape binned by distance to the boundary, and each band's share
of the squared error and of the area; then the mean squared residual of every term on
fresh uniform points (a term with its own rows, such as the flux term's circles: on those
rows), next to the training loss of that term (overfitting of a fixed point
set shows as a large ratio), and for the equations also on the fresh points at least the
last band edge from the boundary (a re-entrant corner's singular derivatives can dominate
the whole mean: on the step, 2000x training overall, 2-3x away from the corner).

    python scripts/flow_error_by_wall.py runs/flow_step --bands 0.01 0.03 0.1

The pressure is compared less its mean where the problem has a gauge. The run's x64
setting is applied.
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--bands", type=float, nargs="+", default=[0.01, 0.03, 0.1],
                    help="band edges: distance to the boundary")
    ap.add_argument("--points", type=int, default=40000, help="uniform points in the shape")
    ap.add_argument("--fresh", type=int, default=4096, help="fresh points per term for residuals (0: none)")
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp

    from pinnkit.cli.jaxsetup import apply_numerics
    from pinnkit.diffops import Autodiff
    from pinnkit.run.rundir import load_run, read_config

    apply_numerics(read_config(args.run_dir), None)
    data = load_run(args.run_dir)
    prob = data.problem
    dtype = jnp.float64 if data.config.numerics.x64 else jnp.float32
    pts = np.asarray(prob.domain.sample(jax.random.key(123), args.points, "interior", dtype), np.float64)
    dist = -np.asarray(jax.vmap(prob.domain.sdf)(jnp.asarray(pts)))
    pred = data.predict(pts)
    ref = prob.reference.host(pts, np.float64)
    ok = np.all(np.isfinite(ref), axis=1)
    pred, ref, dist = pred[ok], ref[ok], dist[ok]
    for i in [prob.out_names.index(n) for n in prob.gauge_map]:
        pred[:, i] -= pred[:, i].mean()
        ref[:, i] -= ref[:, i].mean()
    edges = [0.0, *args.bands, np.inf]
    for i, n in enumerate(prob.out_names):
        err2, ref2 = (pred[:, i] - ref[:, i]) ** 2, ref[:, i] ** 2
        line = [f"{n}: rel. L2 {np.sqrt(err2.sum() / ref2.sum()):.3e}"]
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            m = (dist >= a) & (dist < b)
            if m.any():
                line.append(f"[{a:g},{b:g}): {np.sqrt(err2[m].sum() / ref2.sum()):.2e} "
                            f"({err2[m].sum() / err2.sum():.0%} of err², {m.mean():.0%} of area)")
        print("; ".join(line))
    if not args.fresh:
        return 0
    batch = {k: prob.domain.sample(jax.random.key(7 + j), args.fresh, t.where, dtype)
             for j, (k, t) in enumerate(sorted(prob.terms.items()))
             if k not in prob.enforced and t.where != "data"}
    # terms with their own rows (the flux term's circles): those rows, their training set
    batch.update({k: jnp.asarray(t.rows(), dtype) for k, t in prob.terms.items() if t.where == "data"})
    res = prob.residuals(data.network, data.coeffs, batch, Autodiff())
    last = next((h["terms"] for h in reversed(data.history) if "terms" in h), {})
    far = args.bands[-1]
    for k, r in res.items():
        r2 = np.asarray(jnp.sum(r**2, axis=-1) if r.ndim > 1 else r**2)
        train = last.get(k)
        line = f"residual {k}: fresh-point mean square {r2.mean():.3e} (training {train})"
        line += f", {r2.mean() / train:.3g}x training" if train else ""
        if prob.terms[k].where == "interior":  # a corner singularity can dominate the mean
            d = -np.asarray(jax.vmap(prob.domain.sdf)(batch[k]))
            m = d >= far
            line += f"; at >= {far:g} from the boundary ({m.mean():.0%}): {r2[m].mean():.3e}"
            line += f", {r2[m].mean() / train:.3g}x training" if train else ""
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
