"""Natural-gradient direction: parameter-space (Gramian) against point-space (Woodbury)
solve, float64, one XLA thread, CPU seconds.

For a weighted residual Jacobian J (rows x params) and residual r, both solvers of
`pinnkit.optim.natural_gradient_direction` give d = -(J^T J + lam I)^-1 J^T r:
``gramian`` forms the params x params matrix (O(rows params^2 + params^3)), ``woodbury``
the rows x rows one (O(rows^2 params + rows^3)). The Jacobian itself (one reverse pass per
point, the same for both) is not timed: J is random (the cost of a dense solve does not
depend on the values). Cases: the C2 climate window (6144 points x 2305 parameters, a 32x3
network), the same sizes swapped, and a small batch on the papers' 3021-parameter
Burgers network. Each case: compiled once, then the median of ``--repeats`` timed calls.

    taskset -c 1 .venv/bin/python scripts/bench_natgrad.py [--repeats 3] [--cases 6144x2305,...]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # a script, not the library: float64 as in the C2 runs

from pinnkit.optim.woodbury import natural_gradient_direction  # noqa: E402

CASES = "6144x2305,2305x6144,1024x3021"


def cpu_seconds(fn, jac, res, repeats: int) -> tuple[float, float]:
    """(median CPU s, median wall s) of ``fn(jac, res)`` after one compile-and-run call."""
    jax.block_until_ready(fn(jac, res))
    cpus, walls = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(jac, res))
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return statistics.median(cpus), statistics.median(walls)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=CASES, help="rows x params, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--damping", type=float, default=1e-10)
    args = ap.parse_args(argv)
    print(f"float64, 1 XLA thread, median of {args.repeats}, damping {args.damping:g}\n")
    print("| rows x params | gramian CPU s | woodbury CPU s | woodbury / gramian | auto picks |")
    print("|---|---|---|---|---|")
    for case in args.cases.split(","):
        rows, params = (int(v) for v in case.split("x"))
        k = jax.random.split(jax.random.key(0), 2)
        jac = jax.random.normal(k[0], (rows, params)) / rows**0.5
        res = jax.random.normal(k[1], (rows,))
        times = {}
        for solver in ("gramian", "woodbury"):
            fn = jax.jit(lambda j, r, s=solver: natural_gradient_direction(
                j, r, damping=args.damping, solver=s)[0])
            times[solver] = cpu_seconds(fn, jac, res, args.repeats)[0]
        auto = "woodbury" if rows < params else "gramian"
        print(f"| {rows} x {params} | {times['gramian']:.2f} | {times['woodbury']:.2f} | "
              f"{times['woodbury'] / times['gramian']:.2f} | {auto} |", flush=True)


if __name__ == "__main__":
    main()
