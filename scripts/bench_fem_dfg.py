"""The finite-element DFG reference (pinnkit.problems.dfg_fem) against the benchmark's
values: 2D-1 on a sequence of mesh levels, 2D-2 (``--shedding``) by BDF2.

Usage::

    taskset -c 1 python scripts/bench_fem_dfg.py                 # 2D-1, P2/P1, four levels
    taskset -c 1 python scripts/bench_fem_dfg.py --order 3       # P3/P2
    taskset -c 1 python scripts/bench_fem_dfg.py --shedding --dt 0.005 --t-end 10
    taskset -c 1 python scripts/bench_fem_dfg.py --shedding --order 3 --t-end 8   # P3/P2

Prints one row per level: maxh, the cylinder's maxh, dofs, c_D, c_L, Δp, their errors
against `DFG1_REFERENCE` (%), and the solve's CPU seconds (process time of meshing
excluded; nothing cached: ``cache=False``). ``--json FILE`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import time

from pinnkit.problems.dfg import DFG1_REFERENCE
from pinnkit.problems.dfg2 import DFG2_BANDS
from pinnkit.problems.dfg_fem import dfg1_fem, dfg2_fem, dfg2_figures, fem_quantities

LEVELS = ((0.05, 0.005), (0.03, 0.003), (0.02, 0.002), (0.01, 0.001))


def steady(order: int) -> list[dict]:
    rows = []
    print(f"{'maxh':>6} {'cyl':>7} {'dofs':>7} {'c_D':>12} {'err%':>8} {'c_L':>12} {'err%':>8} "
          f"{'dp':>12} {'err%':>8} {'cpu_s':>7}")
    for maxh, cyl in LEVELS:
        sol = dfg1_fem(maxh=maxh, cylinder_maxh=cyl, order=order, cache=False)
        q = fem_quantities(sol)
        err = {k: 100 * (q[k] / DFG1_REFERENCE[k] - 1) for k in q}
        print(f"{maxh:6.3f} {cyl:7.4f} {sol.info['ndof']:7d} {q['c_D']:12.8f} {err['c_D']:+8.4f} "
              f"{q['c_L']:12.9f} {err['c_L']:+8.4f} {q['delta_p']:12.9f} {err['delta_p']:+8.4f} "
              f"{sol.info['cpu_s']:7.1f}")
        rows.append({"maxh": maxh, "cylinder_maxh": cyl, "order": order, **sol.info, **q,
                     "error_percent": err})
    return rows


def shedding(dt: float, t_end: float, maxh: float, cyl: float, order: int) -> list[dict]:
    t0 = time.process_time()
    hist = dfg2_fem(dt=dt, t_end=t_end, maxh=maxh, cylinder_maxh=cyl, order=order, cache=False)
    fig = dfg2_figures(hist)
    inside = {k: DFG2_BANDS[k][0] <= fig[k] <= DFG2_BANDS[k][1] for k in ("c_D_max", "c_L_max", "St")}
    print(f"2D-2 P{order}/P{order - 1} dt={dt} t_end={t_end} maxh={maxh}/{cyl} dofs={hist.info['ndof']}: "
          f"c_D_max {fig['c_D_max']:.5f}, c_L_max {fig['c_L_max']:.5f}, St {fig['St']:.5f}; "
          f"inside the bands {inside}; {time.process_time() - t0:.0f} CPU s")
    return [{"dt": dt, "t_end": t_end, "maxh": maxh, "cylinder_maxh": cyl, "order": order, **hist.info, **fig,
             "inside": inside}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--order", type=int, default=2)
    ap.add_argument("--shedding", action="store_true")
    ap.add_argument("--dt", type=float, default=0.005)
    ap.add_argument("--t-end", type=float, default=10.0)
    ap.add_argument("--maxh", type=float, default=0.03)
    ap.add_argument("--cylinder-maxh", type=float, default=0.003)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = (shedding(a.dt, a.t_end, a.maxh, a.cylinder_maxh, a.order) if a.shedding else steady(a.order))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)


if __name__ == "__main__":
    main()
