"""Weak and strong scaling of P1 (Poisson 2D) and P2 (Kovasznay) training over 1..N devices.

- **strong**: the global batch is fixed; more devices should give more steps/s.
  Every device count must also give the same loss history (float32, rtol 1e-4): the
  check that sharding does not change the maths.
- **weak**: the per-device batch is fixed (global batch = per-device batch x devices);
  collocation points per second should grow with the device count.
- **batch**: throughput on all devices for a list of global batch sizes (4k ... 1M),
  the figure to record on a real GPU.

Network and optimiser follow the peer protocol of docs/benchmarks.md (tanh MLP 2->[64]*4, Adam 1e-3,
fixed points drawn once); batch sizes are per interior term (the boundary term gets a
quarter). steps/s excludes compilation (`fit` times every chunk after the first).

On CPU the devices are virtual (``jax_num_cpu_devices``) and share the same cores, so
the timings say nothing about scaling: the script then checks correctness only and
says so. On GPUs it records real figures.

    python scripts/bench_scaling.py                                   # CPU: correctness check
    python scripts/bench_scaling.py --devices 1,2,4,8 --batch 65536 --steps 300 --json out.json
    python scripts/bench_scaling.py --mode batch --batches 4096,65536,1048576 --problems P1,P2
    python scripts/bench_scaling.py --mode batch --matmul-precision default   # TPU: bf16 passes

``--matmul-precision`` is what ``numerics.matmul_precision`` sets in ``pinnkit train``
(default ``highest``, as there): on a TPU, ``default`` runs float32 products as bf16
passes, faster and less exact; a CPU ignores it. In batch mode a size that does not fit
in the device's memory prints a "failed" row and the script goes on to the next.

Under ``srun`` (several processes) the mesh spans every device of every process, so
only that device count is measured; compare jobs of different sizes instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default="P1,P2", help="comma list of P1, P2")
    ap.add_argument("--mode", default="strong,weak", help="comma list of strong, weak, batch")
    ap.add_argument("--devices", default=None,
                    help="device counts, e.g. 1,2,4 (default: 1,2,4,... up to all)")
    ap.add_argument("--cpu-devices", type=int, default=4,
                    help="virtual CPU devices when there is no accelerator")
    ap.add_argument("--batch", type=int, default=None,
                    help="interior points per term: global (strong) or per device (weak); "
                         "default 4096 on GPU, 256 on CPU")
    ap.add_argument("--batches", default="4096,16384,65536,262144,1048576",
                    help="global interior batches per term for --mode batch")
    ap.add_argument("--steps", type=int, default=None, help="steps per measurement (default 200 GPU, 20 CPU)")
    ap.add_argument("--chunk", type=int, default=None, help="steps per dispatch (default steps/4)")
    ap.add_argument("--method", default="taylor", help="diffops.method")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--matmul-precision", default="highest", choices=("default", "high", "highest"),
                    help="jax_default_matmul_precision, as numerics.matmul_precision in pinnkit train")
    ap.add_argument("--json", help="also write the records to this JSON file")
    ap.add_argument("--coordinator")
    ap.add_argument("--num-processes", type=int)
    ap.add_argument("--process-id", type=int)
    return ap.parse_args(argv)


def config(problem: str, batch: int, steps: int, chunk: int, method: str):
    from pinnkit.run.config import from_dict

    if problem == "P1":
        prob = {"name": "poisson2d"}
        terms = {"pde": batch, "boundary": max(batch // 4, 1)}
        net = {"width": 64, "depth": 4, "hard_constraint": False}
    else:
        prob = {"name": "kovasznay", "params": {"Re": 20.0}}
        terms = {"momentum": batch, "continuity": batch, "boundary": max(batch // 4, 1)}
        net = {"width": 64, "depth": 4}
    return from_dict({
        "problem": prob, "network": net,
        "sampler": {"method": "uniform", "batch": terms},
        "diffops": {"method": method},
        "optim": {"phases": [{"kind": "adam", "lr": 1e-3}]},
        "train": {"steps": steps, "chunk": chunk, "log_every": 1},
        "checkpoint": {"every": 0},
    })


def measure(problem, n_dev, batch, args):
    import numpy as np

    from pinnkit.parallel.mesh import make_mesh
    from pinnkit.run.build import build_run
    from pinnkit.train.loop import fit

    cfg = config(problem, batch, args.steps, args.chunk, args.method)
    run = build_run(cfg, mesh=make_mesh(n_dev))
    res = fit(run, progress=False, accumulate=args.accumulate)
    points = sum(run.sampler.batch.values())
    losses = np.array([[h["loss"], *h["terms"].values()] for h in res.history])
    return {
        "problem": problem, "devices": n_dev, "processes": _process_count(),
        "global_batch": points, "per_device_batch": points // n_dev,
        "steps_per_s": res.steps_per_s, "points_per_s": res.steps_per_s * points,
        "compile_s": sum(res.compile_s.values()),
        "final_loss": float(losses[-1, 0]), "_losses": losses,
    }


def _process_count():
    import jax

    return jax.process_count()


def main(argv=None):
    args = parse_args(argv)
    import jax

    from pinnkit.cli.jaxsetup import multiprocess_options
    from pinnkit.parallel.distributed import detect, initialize

    spec = detect(args.coordinator, args.num_processes, args.process_id)
    if spec.multi:
        multiprocess_options()
    initialize(spec)
    # Only affects the CPU backend (virtual devices); GPUs are used as they are.
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    jax.config.update("jax_default_matmul_precision", args.matmul_precision)
    backends = {d.platform for d in jax.devices()}
    cpu = backends == {"cpu"}
    args.batch = args.batch or (256 if cpu else 4096)
    args.steps = args.steps or (20 if cpu else 200)
    args.chunk = args.chunk or max(1, args.steps // 4)
    n_all = len(jax.devices())
    if args.devices:
        counts = [int(x) for x in args.devices.split(",")]
    else:
        counts, c = [], 1
        while c < n_all:
            counts.append(c)
            c *= 2
        counts.append(n_all)
    if spec.multi:
        counts = [n_all]
    main_proc = jax.process_index() == 0
    say = print if main_proc else (lambda *a, **k: None)
    platform = jax.devices()[0].device_kind if not cpu else "cpu (virtual devices)"
    say(f"# pinnkit scaling: {n_all} x {platform}, {jax.process_count()} process(es), jax {jax.__version__}, "
        f"matmul precision {args.matmul_precision}")
    if cpu:
        say("# CPU: the virtual devices share the same cores; timings below are NOT scaling figures. "
            "This run checks correctness only (same losses on every device count).")

    import numpy as np

    records, ok = [], True
    modes = args.mode.split(",")
    for problem in args.problems.split(","):
        if "strong" in modes:
            say(f"\n## {problem} strong scaling (global interior batch {args.batch} per term)\n")
            say("| devices | points/device | steps/s | points/s | speed-up | final loss |")
            say("|---:|---:|---:|---:|---:|---:|")
            base = None
            for n in counts:
                r = measure(problem, n, args.batch, args)
                r["mode"] = "strong"
                base = base or r
                same = np.allclose(r["_losses"], base["_losses"], rtol=1e-4)
                ok &= same
                speedup = "n/a" if cpu else f"{r['steps_per_s'] / base['steps_per_s']:.2f}"
                say(f"| {n} | {r['per_device_batch']} | {r['steps_per_s']:.2f} | {r['points_per_s']:.3g} | "
                    f"{speedup} | {r['final_loss']:.6g}{'' if same else ' MISMATCH'} |")
                records.append(r)
        if "weak" in modes:
            say(f"\n## {problem} weak scaling (interior batch {args.batch} per term per device)\n")
            say("| devices | global points | steps/s | points/s | efficiency |")
            say("|---:|---:|---:|---:|---:|")
            base = None
            for n in counts:
                r = measure(problem, n, args.batch * n, args)
                r["mode"] = "weak"
                base = base or r
                eff = r["points_per_s"] / (n / base["devices"] * base["points_per_s"])
                say(f"| {n} | {r['global_batch']} | {r['steps_per_s']:.2f} | "
                    f"{r['points_per_s']:.3g} | {'n/a' if cpu else f'{eff:.2f}'} |")
                records.append(r)
        if "batch" in modes:
            n = counts[-1]
            say(f"\n## {problem} throughput on {n} device(s)\n")
            say("| interior batch / term | global points | steps/s | points/s | compile s |")
            say("|---:|---:|---:|---:|---:|")
            for b in (int(x) for x in args.batches.split(",")):
                if b % n:
                    continue
                try:
                    r = measure(problem, n, b, args)
                except jax.errors.JaxRuntimeError as e:  # e.g. RESOURCE_EXHAUSTED: out of device memory
                    say(f"| {b} | failed: {str(e).splitlines()[0][:160]} | | | |")
                    records.append({"problem": problem, "devices": n, "global_batch": None,
                                    "interior_batch": b, "mode": "batch", "error": str(e)[:2000]})
                    continue
                r["mode"] = "batch"
                say(f"| {b} | {r['global_batch']} | {r['steps_per_s']:.2f} | {r['points_per_s']:.3g} | "
                    f"{r['compile_s']:.1f} |")
                records.append(r)
    if cpu and "strong" in modes:
        say("\ncorrectness: "
            + ("OK, every device count gave the same losses" if ok else "FAILED: losses differ"))
    if args.json and main_proc:
        with open(args.json, "w") as f:
            meta = {"devices": n_all, "platform": platform, "jax": jax.__version__, "cpu_check_only": cpu,
                    "steps": args.steps, "chunk": args.chunk, "method": args.method, "time": time.time(),
                    "matmul_precision": args.matmul_precision}
            json.dump({"meta": meta, "records": [{k: v for k, v in r.items() if not k.startswith("_")}
                                                 for r in records]}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
