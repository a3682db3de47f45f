"""Where a trained run's error lives: rel. L2 on the eval grid over all points and over the
points at least ``W`` away from given planes of one coordinate.

For P6 (Allen–Cahn, periodic in x) it separates the periodic seam x = ±1 from the rest:

    python scripts/error_by_region.py runs/p6_ssb --coord x --at -1 1 --widths 0.005 0.05 0.1

Prints one line per field and width: rel. L2 (‖u − u*‖₂ / ‖u*‖₂ over the kept points) and
the share of the squared error the excluded points carry. The run's own x64 setting is
applied (float64 runs are evaluated in float64).
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--coord", required=True, help="coordinate name, e.g. x")
    ap.add_argument("--at", type=float, nargs="+", required=True, help="plane positions")
    ap.add_argument("--widths", type=float, nargs="+", default=[0.01, 0.05, 0.1])
    ap.add_argument("--resolution", type=int, default=None, help="default: the run's eval.resolution")
    args = ap.parse_args()

    from pinnkit.cli.jaxsetup import apply_numerics
    from pinnkit.run.rundir import load_run, read_config

    apply_numerics(read_config(args.run_dir), None)
    data = load_run(args.run_dir)
    if args.coord not in data.problem.domain.coords:
        raise SystemExit(f"--coord {args.coord}: the problem's coordinates are {data.problem.domain.coords}")
    g = data.grid(args.resolution)
    dist = np.min([np.abs(g[args.coord] - a) for a in args.at], axis=0)
    for n in data.problem.out_names:
        if f"{n}_ref" not in g:
            raise SystemExit(f"{args.run_dir}: the problem has no reference for {n}")
        err2, ref2 = (g[n] - g[f"{n}_ref"]) ** 2, g[f"{n}_ref"] ** 2
        print(f"{n}: all points rel. L2 {np.sqrt(err2.sum() / ref2.sum()):.3e}")
        for w in args.widths:
            keep = dist >= w
            rel = np.sqrt(err2[keep].sum() / ref2[keep].sum())
            share = 1.0 - err2[keep].sum() / err2.sum()
            print(f"{n}: {args.coord} at least {w:g} from {args.at}: rel. L2 {rel:.3e} "
                  f"({share:.1%} of the squared error excluded, {1 - keep.mean():.1%} of the points)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
