"""Convergence of the Williamson test 6 reference (dinosaur, `pinnkit.solvers.shallow_water`):
solves at several truncations / time steps and prints Williamson's normalised l2/l∞
differences on the 48-latitude metrics grid against the finest (issue 6, docs/climate.md).

    python scripts/w6_reference_convergence.py                    # T42, T85, T85 (dt/2), T170; 1 day
    python scripts/w6_reference_convergence.py --runs 85:600 85:300 85:150 85:75   # time steps
    python scripts/w6_reference_convergence.py --days 0.25 --runs 21:2400 42:1200

Each solve is cached in ``$PINNKIT_CACHE`` (default ~/.cache/pinnkit), the same cache the
problem ``williamson6`` reads, so the finest one is reused by configs/climate_w6.yaml.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--runs", nargs="+", default=["42:1200", "85:600", "85:300", "170:300"],
                    help="TRUNCATION:DT_S, the last is the reference for the others")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)
    from pinnkit.solvers.shallow_water import williamson6_reference
    from pinnkit.sphere.domain import (
        EARTH_OMEGA,
        EARTH_RADIUS,
        GRAVITY,
        area_mean,
        gaussian_grid,
        williamson_errors,
    )

    si = dict(omega_rh=7.848e-6, K_rh=7.848e-6, wave=4, h0=8000.0, gravity=GRAVITY, radius=EARTH_RADIUS,
              omega=EARTH_OMEGA)  # the defaults of pinnkit.problems.climate.williamson6
    cache = os.environ.get("PINNKIT_CACHE", "~/.cache/pinnkit")
    w = gaussian_grid(48)[2]
    sols = {}
    for run in args.runs:
        L, dt = run.split(":")
        start = time.perf_counter()
        sols[run] = williamson6_reference(int(L), args.days, float(dt), 48, cache_dir=cache, **si)
        print(f"T{L} dt {dt} s: {time.perf_counter() - start:.1f} s (solve {sols[run]['wall_s']:.1f} s "
              f"when computed), energy drift {sols[run]['energy_drift']:.2e}, load {os.getloadavg()}",
              flush=True)
    best = sols[args.runs[-1]]
    anomaly = lambda p: p - area_mean(p, w)
    wind = lambda s: np.stack([s["u"], s["v"]], -1)
    table = {}
    for run in args.runs[:-1]:
        s = sols[run]
        table[run] = {"h": williamson_errors(s["phi"], best["phi"], w),
                      "h_anomaly": williamson_errors(anomaly(s["phi"]), anomaly(best["phi"]), w),
                      "wind": williamson_errors(wind(s), wind(best), w)}
        print(f"T{run} vs T{args.runs[-1]} at day {args.days:g}: "
              + ", ".join(f"{k} l2 {v['l2']:.2e} linf {v['linf']:.2e}" for k, v in table[run].items()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"days": args.days, "against": args.runs[-1], "differences": table}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
