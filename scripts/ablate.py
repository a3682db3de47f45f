"""Runs a list of configs (ablations) over seeds and tabulates error, wall time, steps/s.

    python scripts/ablate.py configs/ablations/burgers_*.yaml --seeds 0 1 --out runs/ablate
    python scripts/ablate.py ... --report          # no training: table from existing runs

Each (config, seed) trains in its own run folder ``OUT/<config stem>/seed<k>`` (in this
process, one after another: one training at a time), via `pinnkit.run.rundir.train_to_dir`
with ``--set train.seed=k`` and any extra ``--set`` overrides. Written to ``OUT``:

- ``ablation.csv``: one row per run (config, seed, rel. L2 of each field, wall s, CPU s,
  steps/s);
- ``ablation.md``: a markdown table, mean ± spread over seeds per config, with the load
  average (``uptime``) before and after;
- ``ablation.png``: a bar plot of the mean rel. L2 error (log scale; seeds as dots).

Wall time counts compilation and evaluation (``summary.json``'s ``wall_s``); CPU time is
this process's user + system seconds over the whole `train_to_dir` call (all threads),
kept in ``cpu_s.txt`` of the run folder so that ``--report`` shows it too. On a shared
machine the CPU seconds are the figure to compare.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "load " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def run_all(configs: list[Path], seeds: list[int], out: Path, overrides: list[str], report: bool):
    """Trains (unless ``report``) and returns one row per (config, seed)."""
    rows = []
    for cfg_path in configs:
        for seed in seeds:
            folder = out / cfg_path.stem / f"seed{seed}"
            if not report:
                import jax

                from pinnkit.run.config import load_config
                from pinnkit.run.rundir import train_to_dir

                cfg = load_config(cfg_path, [*overrides, f"train.seed={seed}"])
                jax.config.update("jax_enable_x64", bool(cfg.numerics.x64))
                print(f"[ablate] {cfg_path.stem} seed {seed} -> {folder}", file=sys.stderr, flush=True)
                cpu0 = time.process_time()
                train_to_dir(cfg, folder, overwrite=True, progress=False, plots=False)
                (folder / "cpu_s.txt").write_text(f"{time.process_time() - cpu0:.2f}\n")
            summary = json.loads((folder / "summary.json").read_text())
            cpu_file = folder / "cpu_s.txt"
            rows.append({"config": cfg_path.stem, "seed": seed, **{
                f"rel_l2_{k}": v for k, v in summary["rel_l2"].items()},
                "wall_s": summary["wall_s"],
                "cpu_s": float(cpu_file.read_text()) if cpu_file.exists() else None,
                "steps": summary["steps"],
                "steps_per_s": summary["steps_per_s"], "outcome": summary["outcome"]})
    return rows


def write_table(rows: list[dict], out: Path, load_before: str, load_after: str, command: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    keys = list(rows[0])
    with open(out / "ablation.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    err_keys = [k for k in keys if k.startswith("rel_l2_")]
    cpu = any(r.get("cpu_s") is not None for r in rows)
    lines = [f"`{command}`", "", f"load before: `{load_before}`", f"load after: `{load_after}`", "",
             "| config | seeds | " + " | ".join(f"rel. L2 {k[7:]} (mean, min–max)" for k in err_keys)
             + " | wall s (mean) | steps/s (mean) |" + (" CPU s (mean) |" if cpu else ""),
             "|---|---|" + "---|" * len(err_keys) + "---|---|" + ("---|" if cpu else "")]
    for name in dict.fromkeys(r["config"] for r in rows):
        rs = [r for r in rows if r["config"] == name]
        errs = []
        for k in err_keys:
            v = np.array([r[k] for r in rs])
            errs.append(f"{v.mean():.2e} ({v.min():.2e}–{v.max():.2e})")
        sps = [r["steps_per_s"] for r in rs if r["steps_per_s"]]
        lines.append(f"| {name} | {len(rs)} | " + " | ".join(errs)
                     + f" | {np.mean([r['wall_s'] for r in rs]):.0f} | "
                     + (f"{np.mean(sps):.1f}" if sps else "–") + " |")
        if cpu:
            cs = [r["cpu_s"] for r in rs if r.get("cpu_s") is not None]
            lines[-1] += (f" {np.mean(cs):.0f} |" if cs else " – |")
    text = "\n".join(lines) + "\n"
    (out / "ablation.md").write_text(text)
    _plot(rows, err_keys[0], out / "ablation.png")
    return text


def _plot(rows, key, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["config"] for r in rows))
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2, 3.5))
    for i, name in enumerate(names):
        v = np.array([r[key] for r in rows if r["config"] == name])
        ax.bar(i, v.mean(), color="C0", alpha=0.6)
        ax.plot(np.full(len(v), i), v, "k.", ms=6)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel(f"rel. L2 error ({key[7:]})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="+", type=Path)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "ablate")
    ap.add_argument("--set", action="append", default=[], help="override for every run, e.g. train.steps=500")
    ap.add_argument("--report", action="store_true", help="no training: tabulate existing runs")
    args = ap.parse_args(argv)
    before = _uptime()
    rows = run_all(args.configs, args.seeds, args.out, args.set, args.report)
    command = "python scripts/ablate.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(write_table(rows, args.out, before, _uptime(), command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
