"""Throughput of P1 written as expressions vs the built-in P1 (issue: "same steps/s").

Trains ``configs/poisson2d.yaml`` (built-in `poisson2d`) and
``configs/poisson2d_expr.yaml`` (the same problem as expressions, same hyper-parameters)
with identical settings, interleaved, ``--repeats`` times each, on one CPU thread, and
prints the steps/s of both (median over repeats, compilation excluded: `fit` times
only chunks after the first) and their ratio.

Usage::

    .venv/bin/python scripts/bench_expr.py [--steps 600] [--repeats 3] [--threads 1]

Only Adam is timed (``optim.phases`` is replaced by one Adam phase), so that the
line-search of L-BFGS, whose number of evaluations varies with rounding, does not blur
the comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=600, help="Adam steps per training run")
    p.add_argument("--chunk", type=int, default=100, help="steps per dispatch")
    p.add_argument("--repeats", type=int, default=3, help="runs of each variant, interleaved")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for XLA")
    args = p.parse_args()

    # Before JAX starts: pin XLA's CPU thread pools (a script may set global state).
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if args.threads == 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "")
            + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
    sys.path.insert(0, str(ROOT))

    from pinnkit.build import build_run
    from pinnkit.config import load_config
    from pinnkit.train import fit

    overrides = [
        f"train.steps={args.steps}", f"train.chunk={args.chunk}", "train.log_every=100",
        "optim.phases=[{kind: adam, lr: 3.0e-3}]", "checkpoint.every=0", "mesh.data=1",
    ]
    variants = {
        "builtin": ROOT / "configs" / "poisson2d.yaml",
        "expression": ROOT / "configs" / "poisson2d_expr.yaml",
    }
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(args.repeats):
        for name, path in variants.items():
            res = fit(build_run(load_config(path, overrides)), progress=False)
            rates[name].append(res.steps_per_s)
            print(f"repeat {r}: {name:10s} {res.steps_per_s:8.1f} steps/s "
                  f"(final loss {res.history[-1]['loss']:.4g})", flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"median steps/s: builtin {med['builtin']:.1f}, expression {med['expression']:.1f}, "
          f"ratio expression/builtin {med['expression'] / med['builtin']:.3f} "
          f"({args.steps} Adam steps x {args.repeats} repeats, {args.threads} thread(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
