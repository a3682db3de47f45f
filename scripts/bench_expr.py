"""Throughput of P1 written as expressions vs the built-in P1 (issue: "same steps/s"), or
(``--case biharmonic``) of ``lap(lap(w))`` vs the same residual as fourth partials.

Builds ``configs/poisson2d.yaml`` (built-in `poisson2d`) and
``configs/poisson2d_expr.yaml`` (the same problem as expressions, same hyper-parameters)
with `build_run`, compiles one training chunk for each (``--chunk`` Adam steps of the
full loss on the runs' fixed collocation points, in a `lax.scan`), then times the two
chunks alternately ``--repeats`` times on one CPU thread. Alternating short chunks
makes both variants see the same machine load, which matters on a shared CPU. Prints
XLA's flop count of each compiled chunk (independent of the load), the median steps/s
of each and the median of the per-repeat ratios.

The chunk is the training step without the device mesh: the only thing that differs
between the two problems is the residual code inside the loss, which is what is
measured. (``pinnkit train`` on both configs gives the same numbers less precisely.)

``--case biharmonic`` compares ``configs/tiny/expr_biharmonic.yaml`` as written
(``-D*lap(lap(w))``: one bi-Laplacian request, `f.biharmonic`) with the same config whose
residual spells out ``-D*(w_xxxx + 2*w_xxyy + w_yyyy)`` (three fourth-partial requests),
both with its ``diffops.method`` (taylor), in float32 (``numerics.x64=false``).

Usage::

    .venv/bin/python scripts/bench_expr.py [--case p1|biharmonic] [--chunk 50] [--repeats 20]
        [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_chunk(run, n_steps: int, lr: float = 1e-3):
    """``chunk(params, opt_state) -> (params, opt_state, losses)``: ``n_steps`` Adam steps."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax

    problem, method = run.problem, run.method
    params, static = eqx.partition(run.network, eqx.is_inexact_array)
    arrays = run.sampler.host_arrays(jax.random.key(0), problem, run.dtype)
    batch = {k: jnp.asarray(v) for k, v in arrays.items()}
    opt = optax.adam(lr)

    def loss(p):
        terms = problem.loss_terms(eqx.combine(p, static), problem.coeffs, batch, method)
        return sum(terms.values())

    @jax.jit
    def chunk(p, s):
        def body(carry, _):
            p, s = carry
            value, g = jax.value_and_grad(loss)(p)
            updates, s = opt.update(g, s, p)
            return (optax.apply_updates(p, updates), s), value

        (p, s), values = jax.lax.scan(body, (p, s), None, length=n_steps)
        return p, s, values

    return chunk, (params, opt.init(params))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunk", type=int, default=50, help="Adam steps per timed chunk")
    p.add_argument("--repeats", type=int, default=20, help="timed chunks of each variant")
    p.add_argument("--threads", type=int, default=1, help="CPU threads for XLA (1 or all)")
    p.add_argument("--case", choices=("p1", "biharmonic"), default="p1",
                   help="p1: built-in vs expression P1; biharmonic: fourth partials vs lap(lap(w))")
    args = p.parse_args()

    # Before JAX starts: pin XLA's CPU thread pool (a script may set global state).
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if args.threads == 1:
        flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flags}"
    sys.path.insert(0, str(ROOT))

    import jax

    from pinnkit.run.build import build_run
    from pinnkit.run.config import load_config

    if args.case == "p1":  # name -> (config, overrides); the first is the baseline
        variants = {
            "builtin": (ROOT / "configs" / "poisson2d.yaml", []),
            "expression": (ROOT / "configs" / "poisson2d_expr.yaml", []),
        }
    else:
        plate = ROOT / "configs" / "tiny" / "expr_biharmonic.yaml"
        partials = "-D*(w_xxxx + 2*w_xxyy + w_yyyy)/pi**4 + 4*D*we"
        f32 = ["numerics.x64=false"]
        variants = {
            "partials": (plate, [*f32, f"problem.params.equations.pde={partials}"]),
            "lap(lap)": (plate, f32),
        }
    base, other = variants
    chunks, states = {}, {}
    for name, (path, over) in variants.items():
        run = build_run(load_config(path, ["mesh.data=1", *over]), with_mesh=False)
        chunks[name], states[name] = make_chunk(run, args.chunk)
        t0 = time.perf_counter()
        out = jax.block_until_ready(chunks[name](*states[name]))  # compile + first chunk
        # XLA's own operation count: a load-independent measure of the step's cost.
        cost = chunks[name].lower(*states[name]).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        print(f"{name:10s} compiled in {time.perf_counter() - t0:.1f} s; "
              f"XLA flops per chunk {cost.get('flops', float('nan')):.4g}; "
              f"loss after {args.chunk} steps {float(out[2][-1]):.6g}", flush=True)

    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.repeats):
        for name in variants:  # alternate: both see the same load
            t0 = time.perf_counter()
            jax.block_until_ready(chunks[name](*states[name]))
            times[name].append(time.perf_counter() - t0)
    rate = {k: args.chunk / statistics.median(v) for k, v in times.items()}
    ratios = [b / e for b, e in zip(times[base], times[other], strict=True)]
    print(f"median steps/s: {base} {rate[base]:.1f}, {other} {rate[other]:.1f}; "
          f"median per-repeat ratio {other}/{base} {statistics.median(ratios):.3f} "
          f"(quartiles {statistics.quantiles(ratios, n=4)[0]:.3f}-"
          f"{statistics.quantiles(ratios, n=4)[2]:.3f}); {args.repeats} x {args.chunk} steps "
          f"each, {args.threads} thread(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
