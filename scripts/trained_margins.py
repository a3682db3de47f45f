"""Margins of the tests marked ``trained`` over seeds and CPU instruction sets.

Runs ``pytest -m trained`` once per (ISA, seed): ``XLA_FLAGS=--xla_cpu_max_isa=AVX``,
``AVX2`` and the machine's default, seeds 0, 1, 2 (``PINNKIT_TEST_SEED``), each with a
fresh compilation cache, and collects every ``trained.check`` (tests/conftest.py). Prints,
per check, the value range and the smallest margin (bound / value for ``<`` checks: the
factor by which the worst case stays inside its bound) with where it occurred.

    python scripts/trained_margins.py [--seeds 0 1 2] [--isas default AVX2 AVX] [-k EXPR]

Exit status 1 if any check failed anywhere in the matrix.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--isas", nargs="+", default=["default", "AVX2", "AVX"])
    ap.add_argument("-k", default=None, help="pytest -k expression (a subset of the tests)")
    ap.add_argument("--out", default="trained_margins.jsonl", help="raw records (JSON lines)")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.unlink(missing_ok=True)
    failed_runs = []
    for isa in args.isas:
        for seed in args.seeds:
            flags = os.environ.get("XLA_FLAGS", "")
            if isa != "default":
                flags = f"{flags} --xla_cpu_max_isa={isa}".strip()
            env = {**os.environ, "XLA_FLAGS": flags, "PINNKIT_TEST_SEED": str(seed),
                   "PINNKIT_TEST_MARGINS": str(out),
                   "PINNKIT_TEST_JAX_CACHE": tempfile.mkdtemp(prefix="pinnkit-margins-")}
            cmd = [sys.executable, "-m", "pytest", "-m", "trained", "-q", "-p", "no:cacheprovider"]
            if args.k:
                cmd += ["-k", args.k]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]
            print(f"isa {isa:7s} seed {seed}: {tail} ({time.perf_counter() - t0:.0f} s)", flush=True)
            if r.returncode != 0:
                failed_runs.append((isa, seed))
    recs = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    by = defaultdict(list)
    for r in recs:
        by[(r["test"], r["check"])].append(r)
    print(f"\n{'test :: check':90s} {'bound':>9s} {'min value':>10s} {'max value':>10s} "
          f"{'min margin':>10s}  worst at")
    bad = False
    for (test, check), rs in sorted(by.items()):
        worst = min(rs, key=lambda r: r["margin"])
        vals = [r["value"] for r in rs]
        isa = worst["xla_flags"].rpartition("max_isa=")[2] or "default"
        bad |= worst["margin"] <= 1
        print(f"{(test.split('/')[-1] + ' :: ' + check)[:90]:90s} {rs[0]['op']}{rs[0]['bound']:<8.3g} "
              f"{min(vals):10.3g} {max(vals):10.3g} {worst['margin']:10.3g}  seed {worst['seed']}, "
              f"{isa} ({len(rs)} runs)")
    if failed_runs:
        print(f"pytest failed in: {failed_runs}")
    return 1 if bad or failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())
