"""Does a trained run's residual hold between its training points? The interior equation
terms' mean-square residual on fresh points, over all of them and in rings about a centre.

For DFG 2D-1 (the cylinder at (0.2, 0.2), radius 0.05):

    python scripts/residual_by_radius.py runs/dfg1 --center 0.2 0.2 \\
        --edges 0.05 0.051 0.06 0.1 0.2 10

Prints, per interior term, the fresh points' mean of $\\sum_i r_i^2$ (the loss's own
per-term measure) next to the run's final training value, then the same mean in each ring
$e_k \\le |x - c| < e_{k+1}$ with its number of points. A fresh value far above the
training one means the fixed training set no longer samples the residual (between its
points, or where it has few). The run's own x64 setting is applied.

``--coords`` measures the distance in some coordinates only: about the axis of DFG
3D-1Z's cylinder (along z through (0.5, 0.2)),

    python scripts/residual_by_radius.py runs/dfg3d --center 0.5 0.2 --coords x y \
        --edges 0.05 0.06 0.1 0.2 10
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--center", type=float, nargs="+", required=True, help="ring centre")
    ap.add_argument("--coords", nargs="+", default=None,
                    help="the coordinates the distance is taken in (default: all)")
    ap.add_argument("--edges", type=float, nargs="+", required=True, help="ring radii, increasing")
    ap.add_argument("--points", type=int, default=16384, help="fresh interior points (Sobol)")
    ap.add_argument("--seed", type=int, default=12345, help="their Sobol seed")
    args = ap.parse_args()

    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from pinnkit.cli.jaxsetup import apply_numerics
    from pinnkit.geometry.rejection import host_points, sobol_unit
    from pinnkit.run.build import build_method
    from pinnkit.run.rundir import load_run, read_config

    apply_numerics(read_config(args.run_dir), None)
    data = load_run(args.run_dir)
    prob, dom = data.problem, data.problem.domain
    coords = list(dom.coords) if args.coords is None else args.coords
    if any(c not in dom.coords for c in coords) or len(args.center) != len(coords):
        raise SystemExit(f"--center: give one value per coordinate of {coords} (of {dom.coords})")
    axes = [list(dom.coords).index(c) for c in coords]
    dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
    pts, _ = host_points(dom, "interior", args.points,
                         lambda r, m: sobol_unit(m, dom.dim, args.seed + r), dtype)
    # the problem's own residuals (its one vmap), restricted to the interior terms
    terms = {k: t for k, t in prob.terms.items() if t.where == "interior"}
    inner = eqx.tree_at(lambda q: q.terms, prob, terms)
    method = build_method(data.config)
    res = jax.jit(lambda x: inner.residuals(data.network, data.coeffs, dict.fromkeys(terms, x), method))(
        jnp.asarray(pts))
    dist = np.linalg.norm(np.asarray(pts, np.float64)[:, axes] - np.asarray(args.center)[None], axis=1)
    final = (data.summary or {}).get("final_terms", {})
    print(f"{args.run_dir}: step {data.step}, {args.points} fresh interior points")
    for k in sorted(res):
        sq = np.sum(np.asarray(res[k], np.float64) ** 2, axis=1)
        train = f"{final[k]:.3e}" if k in final else "n/a"
        print(f"{k}: fresh {sq.mean():.3e} (training {train}); share of the fresh sum by ring:")
        for lo, hi in zip(args.edges[:-1], args.edges[1:], strict=True):
            m = (dist >= lo) & (dist < hi)
            mean = f"{sq[m].mean():.3e}" if m.any() else "-"
            print(f"  [{lo:g}, {hi:g}): mean {mean}, n = {m.sum()}, share {sq[m].sum() / sq.sum():.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
