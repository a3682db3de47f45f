"""Sparse velocity probes and a full-field reference of DFG 2D-2 from the finite-element
solution (`pinnkit.problems.dfg_fem.dfg2_fem`, BDF2 from rest), for the data assimilation
problem `dfg_assimilation` (`configs/assimilation_dfg2.yaml`).

Writes two observation tables (`pinnkit.physics.observations.write_table`):

- ``--out`` (default ``configs/data/dfg2_probes.npz``): columns ``t`` (s), ``x``, ``y``,
  ``u``, ``v`` at a grid of wake probes (``--probe-x`` × ``--probe-y``), sampled every
  ``--every`` time steps over the last ``--periods`` lift periods before ``--t-end`` (the
  earliest times dropped until the row count is a multiple of 8, so that the rows shard
  over any device count up to 8);
  with ``--noise`` > 0, Gaussian noise of that fraction of each velocity's standard
  deviation over the samples (seeded by ``--seed``).
- ``--fields`` (default ``configs/data/dfg2_fields.npz``): columns ``t``, ``x``, ``y``,
  ``u``, ``v``, ``p`` on a uniform grid of spacing ``--spacing`` over the fluid (cell
  centres outside the cylinder) at ``--phases`` times equally spaced over the last
  period (each the nearest time step): the field reference of the same run.

and prints the FEM's own figures (`dfg2_figures` over the last three periods: St,
c_D,max, c_L,max) for the config's ``reference_figures``. The FEM run is cached
(``~/.cache/pinnkit/fem``), so a second call with the same mesh and steps only samples.
Needs the ``fem`` extra (NGSolve).

Usage (the shipped files: P3/P2, whose St, c_D,max and c_L,max lie inside the benchmark's
bands; 1214 CPU s at the default mesh)::

    taskset -c 0 python scripts/dfg2_probes.py
    taskset -c 0 python scripts/dfg2_probes.py --order 2 ...    # P2/P1: a quarter of the CPU, peaks 1-9 % low
    taskset -c 0 python scripts/dfg2_probes.py --order 2 --maxh 0.05 --cylinder-maxh 0.005 --dt 0.01 \\
        --every 2 --out /tmp/p.npz --fields /tmp/f.npz          # coarse, ~40 CPU s
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from pinnkit.physics.observations import write_table
from pinnkit.problems.dfg import CENTER, HEIGHT, LENGTH, RADIUS
from pinnkit.problems.dfg_fem import dfg2_fem, dfg2_figures

ROOT = Path(__file__).resolve().parent.parent


def fluid_grid(spacing: float) -> np.ndarray:
    """Cell centres of a uniform grid over the channel, those in or on the cylinder dropped."""
    x = np.arange(0.5 * spacing, LENGTH, spacing)
    y = np.arange(0.5 * spacing, HEIGHT, spacing)
    xx, yy = (a.ravel() for a in np.meshgrid(x, y, indexing="xy"))
    keep = np.hypot(xx - CENTER[0], yy - CENTER[1]) > RADIUS * 1.001
    return np.stack([xx[keep], yy[keep]], axis=1)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--maxh", type=float, default=0.03)
    ap.add_argument("--cylinder-maxh", type=float, default=0.003)
    ap.add_argument("--dt", type=float, default=0.005)
    ap.add_argument("--order", type=int, default=3, choices=(2, 3),
                    help="velocity element order: 2 = P2/P1 Taylor-Hood, 3 = P3/P2")
    ap.add_argument("--t-end", type=float, default=10.0)
    ap.add_argument("--probe-x", type=float, nargs="+", default=[0.3, 0.45, 0.6, 0.8, 1.0, 1.25])
    ap.add_argument("--probe-y", type=float, nargs="+", default=[0.1, 0.15, 0.2, 0.25, 0.3])
    ap.add_argument("--every", type=int, default=4, help="time steps between probe samples")
    ap.add_argument("--periods", type=float, default=2.0, help="probe samples over this many periods")
    ap.add_argument("--noise", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--phases", type=int, default=8)
    ap.add_argument("--spacing", type=float, default=0.02)
    ap.add_argument("--keep", type=float, default=0.4,
                    help="seconds before t_end whose whole solutions are kept (>= one period)")
    ap.add_argument("--out", default=str(ROOT / "configs/data/dfg2_probes.npz"))
    ap.add_argument("--fields", default=str(ROOT / "configs/data/dfg2_fields.npz"))
    a = ap.parse_args(argv)

    probes = np.array([(x, y) for x in a.probe_x for y in a.probe_y], np.float64)
    t0 = time.process_time()
    h = dfg2_fem(t_end=a.t_end, dt=a.dt, maxh=a.maxh, cylinder_maxh=a.cylinder_maxh, probes=probes,
                 order=a.order, keep_from=a.t_end - a.keep)
    fem_s = time.process_time() - t0
    fig = dfg2_figures(h)
    period = fig["period"]
    if a.keep < period:
        raise SystemExit(f"--keep {a.keep} s is shorter than the period {period:.4f} s: raise it")

    # probe samples: every `every` steps over the last `periods` periods
    times = h.times
    first = int(np.searchsorted(times, times[-1] - a.periods * period - 1e-12))
    idx = np.arange(len(times) - 1, first - 1, -a.every)[::-1]
    while len(idx) * len(probes) % 8:  # the rows shard over any device count up to 8
        idx = idx[1:]
    vel = h.probes[idx][:, 2:, :2]  # (k, m, 2): the front/back points are the first two
    if a.noise > 0:
        rng = np.random.default_rng(a.seed)
        scale = vel.reshape(-1, 2).std(axis=0)
        vel = vel + a.noise * scale * rng.standard_normal(vel.shape)
    tt = np.repeat(times[idx], len(probes))
    obs = {"t": tt, "x": np.tile(probes[:, 0], len(idx)), "y": np.tile(probes[:, 1], len(idx)),
           "u": vel[..., 0].ravel(), "v": vel[..., 1].ravel()}
    write_table(a.out, obs)

    # field reference: `phases` kept steps equally spaced over the last period
    grid = fluid_grid(a.spacing)
    want = times[-1] - period + period * np.arange(a.phases) / a.phases
    kept = [int(np.argmin(np.abs(h.kept_times - w))) for w in want]
    cols = {k: [] for k in ("t", "x", "y", "u", "v", "p")}
    for i in kept:
        f = h.snapshot(i).evaluate(grid)
        if not np.all(np.isfinite(f)):
            raise SystemExit("a reference grid point fell outside the mesh: change --spacing")
        for k, v in zip(("t", "x", "y", "u", "v", "p"),
                        (np.full(len(grid), h.kept_times[i]), grid[:, 0], grid[:, 1], *f.T), strict=True):
            cols[k].append(v)
    write_table(a.fields, {k: np.concatenate(v).astype(np.float32 if k != "t" else np.float64)
                           for k, v in cols.items()})
    out = {"St": fig["St"], "c_D_max": fig["c_D_max"], "c_L_max": fig["c_L_max"], "period": period,
           "probe_rows": int(len(tt)), "probe_times": int(len(idx)), "probes": int(len(probes)),
           "field_rows": int(sum(len(v) for v in cols["t"])), "field_times": h.kept_times[kept].tolist(),
           "order": a.order, "ndof": h.final.info.get("ndof"), "fem_cpu_s": fem_s,
           "cached": bool(h.info.get("cached"))}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
