"""The finite-element reference's own error: a flow config's reference (and variants of
it) against a finer one, on the config's error grid, as a run's errors are measured.

    python scripts/fem_reference_error.py configs/flows/step.yaml \\
        --variant fem_corner_maxh=null --variant "" \\
        --fine fem_order=3,fem_maxh=0.0125,fem_corner_maxh=5e-5

Each ``--variant`` (comma-separated ``problem.params`` overrides; ``""``: the config as
it is) and ``--fine`` builds the problem with its ``fem_reference``; the script prints
each variant's rel. L2 error of every field against the fine reference on the grid of
``eval.resolution`` points (``--resolution``), less the grid points on the problem's
`singular` points (the re-entrant corners, where the exact pressure is infinite), the
same points the runs' errors count (`Problem.error_mask`), and the CPU seconds its
problem took to build (the solve, or a second when read from the cache). Float64.
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("--variant", action="append", default=None,
                    help="problem.params overrides, comma-separated ('' = the config); repeatable")
    ap.add_argument("--fine", required=True, help="the finer reference's problem.params overrides")
    ap.add_argument("--resolution", type=int, default=None, help="grid points per coordinate")
    args = ap.parse_args()

    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    from pinnkit.run.build import build_problem
    from pinnkit.run.config import load_config

    def problem(spec: str):
        sets = [f"problem.params.{s.strip()}" for s in spec.split(",") if s.strip()]
        t = time.process_time()
        cfg = load_config(args.config, ["problem.params.fem_reference=true", *sets])
        return cfg, build_problem(cfg), time.process_time() - t

    cfg, fine, took = problem(args.fine)
    print(f"fine: {args.fine}  ({took:.0f} CPU s)")
    pts, _ = fine.domain.grid(args.resolution or cfg.eval.resolution)
    pts = pts[fine.error_mask(pts)]
    want = fine.reference.host(pts)
    for spec in args.variant or [""]:
        _, p, took = problem(spec)
        got = p.reference.host(pts)
        errs = "  ".join(f"{n} {np.linalg.norm(got[:, i] - want[:, i]) / np.linalg.norm(want[:, i]):.2e}"
                         for i, n in enumerate(p.out_names))
        print(f"{spec or '(config)':45s} {errs}  ({took:.0f} CPU s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
