"""The natural gradient's residual Jacobian with XLA:CPU's defaults against the ``pinnkit``
command's XLA option (`pinnkit.cli.jaxsetup.xla_cpu_flags`: no YNNPACK fusions), in the
same run: each mode in its own process (XLA reads ``XLA_FLAGS`` once per process), the
same config, parameters and batch.

Per mode, after one compile-and-run call, the median of ``--repeats`` calls of:

- ``rows``: `Loss.residual_rows`, the weighted residual Jacobian $\\hat J$ (N x P) and
  residual of one step's batch (a reverse pass through each point's Taylor rows);
- ``solve``: the point-space direction from them (`natural_gradient_direction`,
  ``woodbury``: $\\hat J\\hat J^\\top$, Cholesky, $\\hat J^\\top z$);
- ``adam``: `Loss.value_and_grad`, what a first-order step costs;
- ``gram plain`` / ``gram blocks``: the solve's $\\hat J\\hat J^\\top$ alone, as ``J @ J.T``
  and as `pinnkit.optim.woodbury.gram_rows` (4 row blocks, 10 of 16 block products; the
  solve uses it).

CPU seconds (``time.process_time``) and wall seconds; the ratio is option / default.
Pin it (``taskset -c 1`` for one core, or nothing else running for both):

    .venv/bin/python scripts/bench_jacobian.py [CONFIG] [--set KEY=VALUE ...] [--repeats 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

DEFAULT_CONFIG = "configs/highdim/poisson_d100.yaml"


def child(config: str, overrides: list[str], repeats: int, mode: str) -> dict:
    if mode == "pinnkit":
        from pinnkit.cli.jaxsetup import xla_cpu_flags

        xla_cpu_flags()
    import jax

    from pinnkit.cli.jaxsetup import apply_numerics
    from pinnkit.optim.woodbury import gram_rows, natural_gradient_direction
    from pinnkit.run.build import build_run
    from pinnkit.run.config import load_config
    from pinnkit.train.loss import make_loss
    from pinnkit.train.step import point_arrays, split_model, train_key

    cfg = load_config(config, overrides)
    apply_numerics(cfg, None)
    run = build_run(cfg)
    params, static = split_model(run)
    loss = make_loss(run, static)
    arrays = point_arrays(run)
    key = jax.random.fold_in(train_key(run), 300)
    rows = jax.jit(lambda p, k: loss.residual_rows(p, k, arrays)[2:])
    solve = jax.jit(lambda j, r: natural_gradient_direction(j, r, damping=1e-3, solver="woodbury")[0])
    adam = jax.jit(lambda p, k: loss.value_and_grad(p, k, arrays, None))

    def timed(fn, *args):
        out = jax.block_until_ready(fn(*args))
        cpu, wall = [], []
        for _ in range(repeats):
            w0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn(*args))
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        return out, {"cpu": statistics.median(cpu), "wall": statistics.median(wall)}

    (jac, res), t_rows = timed(rows, params, key)
    _, t_solve = timed(solve, jac, res)
    _, t_adam = timed(adam, params, key)
    _, t_plain = timed(jax.jit(lambda j: j @ j.T), jac)
    _, t_blocks = timed(jax.jit(gram_rows), jac)
    return {"rows": t_rows, "solve": t_solve, "adam": t_adam, "gram plain": t_plain,
            "gram blocks": t_blocks, "shape": list(jac.shape),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config", nargs="?", default=DEFAULT_CONFIG)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--child", choices=("default", "pinnkit"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.config, args.set, args.repeats, args.child)))
        return
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    user = os.environ.get("XLA_FLAGS", "")
    if "ynn_fusion_type" in user:
        sys.exit("bench_jacobian: XLA_FLAGS sets the YNNPACK option itself; unset it to compare")
    if user:
        env["XLA_FLAGS"] = user  # e.g. an ISA cap: both modes get it
    results = {}
    for mode in ("default", "pinnkit"):
        cmd = [sys.executable, __file__, args.config, "--repeats", str(args.repeats), "--child", mode]
        for s in args.set:
            cmd += ["--set", s]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
    n, p = results["default"]["shape"]
    print(f"{args.config} {' '.join(args.set)}: J {n} x {p}, median of {args.repeats}; "
          f"pinnkit's option: {results['pinnkit']['xla_flags']!r}\n")
    print("| part | default CPU s (wall) | pinnkit CPU s (wall) | CPU ratio |")
    print("|---|---|---|---|")
    for part in ("rows", "solve", "adam", "gram plain", "gram blocks"):
        a, b = results["default"][part], results["pinnkit"][part]
        print(f"| {part} | {a['cpu']:.3f} ({a['wall']:.3f}) | {b['cpu']:.3f} ({b['wall']:.3f}) "
              f"| {b['cpu'] / a['cpu']:.2f} |")


if __name__ == "__main__":
    main()
