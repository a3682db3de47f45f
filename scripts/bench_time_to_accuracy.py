"""P1 time to rel. L2 <= 1e-3: pinnkit's default recipe against each peer's documented
default recipe, measured in one run (issue 7; P1 in docs/benchmarks.md).

Every library runs in its own process, in sequence, pinned to ONE core (``taskset``) with
one thread (the XLA/OMP/MKL flags of the peer harness's run_all.sh), under
``/usr/bin/time -v``:

- ``pinnkit``: ``configs/poisson2d.yaml`` (what ``make demo`` trains: 32x3 tanh MLP with
  the exact boundary transform, 1024 Sobol points, Adam 1500 steps -> L-BFGS 500, Taylor
  derivatives) through the normal CLI, with ``--set train.eval_every=EVERY``; the error
  trace is read from the run's ``metrics.jsonl`` (``eval`` records carry the training
  clock, evaluations excluded).
- the peers, on the harness's points and network (4096 interior + 1024 boundary points,
  tanh 2->[64]*4->1, Glorot weights seed 1, float32, loss mean(res^2) + mean(bc^2)), with
  the optimiser of their own Poisson examples (``scripts/peers/tta_*.py`` in the
  harness's venvs):
  ``deepxde_torch``: Adam lr 1e-3 then L-BFGS with DeepXDE's default options
  (examples/pinn_forward/Poisson_Lshape.py; its 50 000 Adam iterations would alone outlast
  the cap, so the Adam phase is ``--dde-adam-steps`` long, 1000 by default, where the
  peers' Adam runs are at rel. L2 ~0.1, so that L-BFGS gets most of the cap);
  ``deepxde_jax``: the same (Adam only if the JAX backend has no L-BFGS);
  ``jinns``: ``jinns.solve`` with ``optax.adam(1e-3)``; ``baseline_jax``: plain JAX,
  Adam lr 1e-3.

Time to accuracy = training clock (wall and process CPU seconds from just before the first
training step, compilation included, set-up and evaluations excluded) at the first
evaluation (every ``--every`` steps; L-BFGS: every ``--every`` iterations) with rel. L2 u
<= ``--threshold`` on the 101 x 101 grid. A peer stops there or when the CPU time on its
clock passes ``--cap`` or its wall time ``--cap-wall`` ("> cap": the whole run must fit in
a session on a shared machine). CPU time is what a quiet core would take (one thread),
so it is the figure compared on a shared machine.

    python scripts/bench_time_to_accuracy.py [--cap 420] [--cap-wall 480] [--every 100] [--libs ...] \\
        [--out runs/tta]   # needs PEER_VENVS: venvs deepxde/, jinns/, base/

Writes OUT/results.json, OUT/table.md, OUT/logs/<lib>.{log,time}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = Path(os.environ.get("PEERS_DIR", ROOT.parent / "shared" / "peers")).resolve()
RUNNERS = ROOT / "scripts" / "peers"
CONFIG = ROOT / "configs" / "poisson2d.yaml"
LIBS = ("pinnkit", "deepxde_torch", "deepxde_jax", "jinns", "baseline_jax")
# library -> (venv, runner script, DDE_BACKEND)
PEER_RUN = {"deepxde_torch": ("deepxde", "tta_deepxde.py", "pytorch"),
            "deepxde_jax": ("deepxde", "tta_deepxde.py", "jax"),
            "jinns": ("jinns", "tta_jinns.py", ""),
            "baseline_jax": ("base", "tta_baseline_jax.py", "")}
ONE_THREAD = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
              "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "JAX_PLATFORMS": "cpu"}


def _env(**extra) -> dict:
    # cold compilation, like the peers: no JAX cache, nor the command's default one
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env.update(ONE_THREAD, PEERS_DIR=str(PEERS_DIR), PINNKIT_JAX_CACHE="off", **extra)
    return env


def _time_v(path: Path) -> dict:
    """Wall, user + sys CPU and peak RSS of a ``/usr/bin/time -v`` report."""
    s = path.read_text() if path.exists() else ""
    out = {}
    m = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", s)
    if m:
        out["process_wall_s"] = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    u = re.search(r"User time \(seconds\): ([\d.]+)", s)
    k = re.search(r"System time \(seconds\): ([\d.]+)", s)
    if u and k:
        out["process_cpu_s"] = float(u.group(1)) + float(k.group(1))
    r = re.search(r"Maximum resident set size \(kbytes\): (\d+)", s)
    if r:
        out["peak_rss_mb"] = int(r.group(1)) / 1024
    return out


def _launch(cmd: list[str], env: dict, log: Path, core: int) -> int:
    full = ["/usr/bin/time", "-v", "-o", str(log.with_suffix(".time")), "taskset", "-c", str(core), *cmd]
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} $ {' '.join(cmd)}", flush=True)
    with open(log, "w") as f:
        return subprocess.run(full, env=env, stdout=f, stderr=subprocess.STDOUT).returncode


def run_pinnkit(args, logs: Path) -> dict:
    run_dir = Path(args.out) / "pinnkit_run"
    cmd = [sys.executable, "-m", "pinnkit.cli", "train", str(CONFIG), "--out", str(run_dir),
           "--overwrite", "--quiet", "--set", f"train.eval_every={args.every}"]
    for kv in args.set:
        cmd += ["--set", kv]
    rc = _launch(cmd, _env(PYTHONPATH=str(ROOT)), logs / "pinnkit.log", args.core)
    if rc != 0:
        return {"library": "pinnkit", "error": f"exit {rc} (see {logs / 'pinnkit.log'})"}
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    kinds = [ph["kind"] for ph in yaml.safe_load(CONFIG.read_text())["optim"]["phases"]]
    phase, trace = 0, []
    for r in recs:  # loss records say which phase a step belongs to; eval records follow them
        if "eval" not in r:
            phase = r["phase"]
            continue
        trace.append({"step": r["step"], "rel_l2": r["eval"]["rel_l2"]["u"], "wall_s": r["wall_s"],
                      "cpu_s": r["cpu_s"], "phase": kinds[phase]})
    summary = json.loads((run_dir / "summary.json").read_text())
    hit = next((r for r in trace if r["rel_l2"] <= args.threshold), None)
    return {"library": "pinnkit", "recipe": "configs/poisson2d.yaml (the default demo): 32x3 tanh "
            "MLP, exact BC, 1024 Sobol points, Adam 3e-3 (decay) 1500 -> L-BFGS 500",
            "threshold": args.threshold, "every": args.every, "stopped": "end of recipe",
            "reached": hit, "final": trace[-1] if trace else None, "trace": trace,
            "overrides": args.set, "final_rel_l2_harness_grid": _harness_grid_error(run_dir),
            "summary": {k: summary.get(k) for k in ("wall_s", "steps_per_s", "rel_l2", "steps")}}


def _harness_grid_error(run_dir: Path) -> float:
    """The final network's rel. L2 on the harness's own grid and exact solution (the
    check that pinnkit's eval grid is the same)."""
    sys.path.insert(0, str(PEERS_DIR))
    import common  # the harness (numpy-only)
    import numpy as np

    from pinnkit.run.metrics import predict
    from pinnkit.run.rundir import load_run

    x, exact = common.eval_grid("P1")
    net = load_run(run_dir).network
    return common.rel_l2(predict(net, np.asarray(x, np.float32)), exact)


def run_peer(lib: str, args, logs: Path) -> dict:
    venv, script, backend = PEER_RUN[lib]
    py = Path(args.venvs) / venv / "bin" / "python"
    out = logs / f"{lib}.json"
    out.unlink(missing_ok=True)
    cmd = [str(py), str(RUNNERS / script), "--out", str(out), "--threshold", str(args.threshold),
           "--every", str(args.every), "--cap-cpu", str(args.cap), "--cap-wall", str(args.cap_wall)]
    if lib.startswith("deepxde"):
        cmd += ["--adam-steps", str(args.dde_adam_steps)]
    rc = _launch(cmd, _env(DDE_BACKEND=backend), logs / f"{lib}.log", args.core)
    if not out.exists():
        return {"library": lib, "error": f"exit {rc}, no result (see {logs / (lib + '.log')})"}
    return json.loads(out.read_text())


def _fmt_time(res: dict, key: str) -> str:
    hit = res.get("reached")
    if hit:
        return f"{hit[key]:.1f}"
    if res.get("stopped") == "cap":
        return f"> {res['final'][key]:.0f} (cap)"
    return "not reached"


def table(results: list[dict], args) -> str:
    rows = ["| library | recipe | time to 1e-3, wall s | time to 1e-3, CPU s | steps | "
            "final rel. L2 (step) | set-up wall s | process wall / CPU s |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            rows.append(f"| {r['library']} | — | failed: {r['error']} | | | | | |")
            continue
        fin, hit = r.get("final") or {}, r.get("reached")
        steps = str(hit["step"]) if hit else f"> {fin.get('step', 0)}"
        setup = f"{r['setup_wall_s']:.0f}" if "setup_wall_s" in r else "—"
        proc = f"{r.get('process_wall_s', float('nan')):.0f} / {r.get('process_cpu_s', float('nan')):.0f}"
        rows.append(f"| {r['library']} | {r['recipe']} | {_fmt_time(r, 'wall_s')} | "
                    f"{_fmt_time(r, 'cpu_s')} | {steps} | {fin.get('rel_l2', float('nan')):.2e} "
                    f"({fin.get('step', '—')}) | {setup} | {proc} |")
    return "\n".join(rows)


def ratios(results: list[dict]) -> dict:
    """Best peer's time over pinnkit's (CPU and wall); a lower bound when no peer reached
    the threshold (their time on the clock when capped)."""
    pk = next((r for r in results if r["library"] == "pinnkit" and r.get("reached")), None)
    peers = [r for r in results if r["library"] != "pinnkit" and "error" not in r]
    if pk is None or not peers:
        return {}
    out = {}
    for key in ("cpu_s", "wall_s"):
        times = [(r["reached"][key], False) if r.get("reached") else (r["final"][key], True)
                 for r in peers if r.get("final")]
        best, lower = min(times)
        out[key] = {"best_peer_s": best, "pinnkit_s": pk["reached"][key],
                    "ratio": best / pk["reached"][key], "lower_bound": lower}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--cap", type=float, default=420.0, help="CPU seconds per peer on its clock")
    ap.add_argument("--cap-wall", type=float, default=480.0, help="wall seconds per peer on its clock")
    ap.add_argument("--every", type=int, default=100, help="steps between error evaluations")
    ap.add_argument("--threshold", type=float, default=1e-3)
    ap.add_argument("--dde-adam-steps", type=int, default=1000, help="DeepXDE's Adam phase before L-BFGS")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra pinnkit config override (repeatable; the default recipe has none)")
    ap.add_argument("--core", type=int, default=0, help="CPU core for taskset")
    ap.add_argument("--venvs", default=os.environ.get("PEER_VENVS", str(ROOT / ".peers" / "venvs")))
    ap.add_argument("--out", default=str(ROOT / "runs" / "tta"))
    args = ap.parse_args(argv)
    logs = Path(args.out) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    load = {"before": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}
    results = []
    for lib in args.libs.split(","):
        res = run_pinnkit(args, logs) if lib == "pinnkit" else run_peer(lib, args, logs)
        res.update(_time_v(logs / f"{lib}.time"))
        results.append(res)
        print(table([res], args).splitlines()[-1], flush=True)
    load["after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rat = ratios(results)
    md = [f"P1, time to rel. L2 u <= {args.threshold:g}; one core, one thread each; eval every "
          f"{args.every} steps; cap {args.cap:g} CPU s or {args.cap_wall:g} wall s per peer.", "",
          f"load before: `{load['before']}`", f"load after: `{load['after']}`", "", table(results, args), ""]
    for key, r in rat.items():
        md.append(f"best peer / pinnkit ({key[:-2]}): {'>= ' if r['lower_bound'] else ''}"
                  f"{r['ratio']:.1f}x ({r['best_peer_s']:.1f} s / {r['pinnkit_s']:.1f} s)")
    text = "\n".join(md)
    print("\n" + text)
    (Path(args.out) / "table.md").write_text(text + "\n")
    (Path(args.out) / "results.json").write_text(json.dumps(
        {"args": vars(args), "load": load, "ratios": rat, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
