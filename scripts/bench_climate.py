"""Climate acceptance benchmarks (issue 6): trains the full configs and prints the measured
figures against the targets (C1–C4 in docs/benchmarks.md).

    C1        configs/climate_ebm.yaml           max |T - T*| <= 0.05 °C over 5 years
    C2        configs/climate_tracer.yaml        Williamson l2(h) <= 1e-2 at day 12, alpha = 0
    C2-polar  configs/climate_tracer_polar.yaml  the same, alpha = pi/2 - 0.05 (cross-polar)
    C3        configs/climate_sw2.yaml           l2(h) <= 1e-3, l2(h - mean) <= 2e-2, wind l2 <= 1e-2 (day 5)
    C3-rot    configs/climate_sw2_rotated.yaml   the same, alpha = pi/4
    C4        configs/climate_rh.yaml            Rossby–Haurwitz (barotropic) l2(psi) <= 1e-2 after 1 day
    C4-W6     configs/climate_w6.yaml            Williamson 6 (shallow water), 1 day, errors against the
                                                 dinosaur T85 / 75 s reference: reported, no target

Usage::

    python scripts/bench_climate.py                       # all, runs in runs/bench_climate/<item>
    python scripts/bench_climate.py --only C1 C4          # some
    python scripts/bench_climate.py --report              # no training: report existing folders

Each item is one ``pinnkit train CONFIG --out DIR --overwrite --quiet`` command, timed from
start to exit (compilation, evaluation and plots included). Sphere maps and Hovmöller
diagrams (`pinnkit.plot.sphere`) go to ``DIR/plots``; a JSON record of everything to
``OUT/bench_climate.json``. Print ``uptime`` next to the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# the same timed `pinnkit train ... --quiet` command (scripts/ is on sys.path)
from bench_ns import ROOT, train

# name: (config, {metric path in summary.json: target, None for a figure reported without one})
ITEMS = {
    "C1": ("configs/climate_ebm.yaml", {"linf.T": 0.05}),
    "C2": ("configs/climate_tracer.yaml", {"metrics.h.l2": 1e-2}),
    "C2-polar": ("configs/climate_tracer_polar.yaml", {"metrics.h.l2": 1e-2}),
    "C3": ("configs/climate_sw2.yaml",
           {"metrics.h.l2": 1e-3, "metrics.h_anomaly.l2": 2e-2, "metrics.wind.l2": 1e-2}),
    "C3-rot": ("configs/climate_sw2_rotated.yaml",
               {"metrics.h.l2": 1e-3, "metrics.h_anomaly.l2": 2e-2, "metrics.wind.l2": 1e-2}),
    "C4": ("configs/climate_rh.yaml", {"metrics.psi.l2": 1e-2}),
    "C4-W6": ("configs/climate_w6.yaml", {"metrics.h.l2": None, "metrics.h_anomaly.l2": None,
                                          "metrics.wind.l2": None, "metrics.persistence.h_anomaly": None}),
}


def lookup(summary: dict, path: str):
    value = summary
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(ITEMS), default=sorted(ITEMS))
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_climate")
    ap.add_argument("--report", action="store_true", help="no training: read existing run folders")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    import pinnkit
    from pinnkit.plot import sphere as plot_sphere
    from pinnkit.sphere.domain import Sphere

    records = {}
    for name in args.only:
        config, targets = ITEMS[name]
        out = args.out / name
        load = os.getloadavg()
        command_s = None if args.report else train(config, out)
        run = pinnkit.load_run(out)
        summary = run.summary or {}
        if not args.no_plots and isinstance(run.problem.domain, Sphere):
            plot_sphere.write_sphere_plots(run)
        rows = {k: (lookup(summary, k), t) for k, t in targets.items()}
        records[name] = {"config": config, "command_s": command_s, "load_before": load,
                         "wall_s": summary.get("wall_s"), "steps_per_s": summary.get("steps_per_s"),
                         "measured": {k: v for k, (v, _) in rows.items()}, "targets": targets,
                         "metrics": summary.get("metrics")}
        for k, (v, t) in rows.items():
            if v is None:
                print(f"{name:9s} {k:22s} missing from summary.json")
                continue
            if t is None:  # no numeric target: report only
                print(f"{name:9s} {k:22s} measured {v:.3e}  (no target)")
                continue
            ok = v <= t
            print(f"{name:9s} {k:22s} measured {v:.3e}  target {t:.0e}  {'met' if ok else 'NOT met'}")
        print(f"{name:9s} train wall {summary.get('wall_s')} s, {summary.get('steps_per_s')} steps/s, "
              f"command {command_s and round(command_s, 1)} s, load before {load}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_climate.json").write_text(json.dumps(records, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
