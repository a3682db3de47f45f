"""High-dimensional Poisson (issue 19): one training step of the exact Taylor engine against
the stochastic estimators, for d in {10, 100, 1000, 10000}.

Problem `poisson_ball` (Δu = Δu* in the unit ball of R^d, u* = (1-|x|²) Σ c_i sin θ_i,
hard boundary constraint); tanh MLP ``--width`` x ``--depth``; ``--batch`` fresh uniform
points per step; float32; one XLA thread. A step is the value and gradient of the loss
plus an Adam update, as training runs it: the exact engine's mean r², an estimator's mean
r_a·r_b over two independent draws (unbiased for the squared residual).

Columns per (d, method):

- **CPU ms / step**: median over ``--repeats`` timed calls of a compiled chunk of
  ``--steps`` steps (`time.process_time`, so a shared machine's load does not inflate it),
  divided by the steps; ``wall`` the same in wall time;
- **vs exact**: the ratio of CPU times to the exact engine's at the same d;
- **memory**: the compiled step's temporary buffers
  (``.lower().compile().memory_analysis().temp_size_in_bytes``);
- **rel. std**: the estimator's standard deviation of the Laplacian (of the residual) at
  the initial network, over ``--draws`` keys, as a fraction of the exact Laplacian's RMS
  (0 for exact): the noise of one estimate.

The exact engine at d = 10000 carries 10002 rows per point; unless ``--exact-max-d`` allows
it, only its compiled memory is reported (it does not fit next to the other jobs).

    python scripts/bench_highdim.py                      # d in 10, 100, 1000, 10000
    python scripts/bench_highdim.py --dims 10,100 --methods exact,stde
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from pinnkit.diffops import SDGD, STDE, Taylor  # noqa: E402
from pinnkit.nn.nets import build_network  # noqa: E402
from pinnkit.problems import PROBLEMS  # noqa: E402

_A, _B = 0x45535441, 0x45535442  # the two estimates' fold_in tags (as training uses)


def make_method(name: str, samples: int, draw: str):
    if name == "exact":
        return Taylor()
    return {"stde": STDE, "sdgd": SDGD}[name](samples=samples, draw=draw)


def setup(d: int, width: int, depth: int, activation: str = "tanh"):
    problem = PROBLEMS["poisson_ball"](dim=d)
    problem = problem.without(problem.enforced)  # u = 0 on the sphere by the transform
    lo, hi = problem.domain.bounds()
    net = build_network("mlp", problem.domain.coords, ("u",), width=width, depth=depth,
                        activation=activation, init="glorot_normal", bounds=(lo, hi),
                        transform=problem.hard_constraint, key=jax.random.key(0))
    return problem, net


def residuals(problem, net, pts, method):
    return problem.residuals(net, problem.coeffs, {"pde": pts}, method)["pde"]


def make_chunk(problem, static, method, batch: int, steps: int, opt):
    def loss(params, key):
        net = eqx.combine(params, static)
        pts = problem.domain.sample(jax.random.fold_in(key, 1), batch)
        if method.stochastic:
            ra = residuals(problem, net, pts, method.at_key(jax.random.fold_in(key, _A)))
            rb = residuals(problem, net, pts, method.at_key(jax.random.fold_in(key, _B)))
            return jnp.mean(jnp.sum(ra * rb, -1))
        return jnp.mean(jnp.sum(residuals(problem, net, pts, method) ** 2, -1))

    def step(carry, i):
        params, state, key = carry
        value, grads = jax.value_and_grad(loss)(params, jax.random.fold_in(key, i))
        updates, state = opt.update(grads, state, params)
        return (optax.apply_updates(params, updates), state, key), value

    def chunk(params, state, key):
        (params, state, _), values = jax.lax.scan(step, (params, state, key), jnp.arange(steps))
        return params, state, values

    return jax.jit(chunk)


def rel_std(problem, net, method, draws: int, n: int = 32) -> float:
    """Standard deviation of the estimated Laplacian (= of the residual) over ``draws``
    keys, as a fraction of the exact Laplacian's RMS over ``n`` points."""
    if not method.stochastic:
        return 0.0
    pts = problem.domain.sample(jax.random.key(7), n)
    lap = jax.vmap(lambda x: Taylor().evaluate(lambda f: f.laplacian("u"), net, problem.layout, x))(pts)
    keys = jax.random.split(jax.random.key(8), draws)
    est = jax.lax.map(lambda k: residuals(problem, net, pts, method.at_key(k)), keys)
    return float(jnp.sqrt(jnp.mean(jnp.var(est, axis=0))) / jnp.sqrt(jnp.mean(lap**2)))


def bench(d, name, args):
    problem, net = setup(d, args.width, args.depth)
    method = make_method(name, args.samples, args.draw)
    params, static = eqx.partition(net, eqx.is_inexact_array)
    opt = optax.adam(1e-3)
    state = opt.init(params)
    chunk = make_chunk(problem, static, method, args.batch, args.steps, opt)
    key = jax.random.key(1)
    t0 = time.perf_counter()
    compiled = chunk.lower(params, state, key).compile()
    compile_s = time.perf_counter() - t0
    mem = compiled.memory_analysis().temp_size_in_bytes / 2**20
    row = {"d": d, "method": name, "compile_s": compile_s, "mem_mib": mem}
    if name == "exact" and d > args.exact_max_d:
        return row
    jax.block_until_ready(compiled(params, state, key))
    cpu, wall = [], []
    for r in range(args.repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        jax.block_until_ready(compiled(params, state, jax.random.fold_in(key, r + 1)))
        cpu.append((time.process_time() - c0) / args.steps * 1e3)
        wall.append((time.perf_counter() - w0) / args.steps * 1e3)
    row.update(cpu_ms=statistics.median(cpu), wall_ms=statistics.median(wall))
    if args.draws:  # the exact Laplacian it is scaled by costs d + 2 rows per point
        row.update(rel_std=rel_std(problem, net, method, args.draws))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", default="10,100,1000,10000")
    ap.add_argument("--methods", default="exact,stde,sdgd")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--draw", default="point", choices=("point", "step"))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--draws", type=int, default=64, help="keys for rel. std (0: skip it)")
    ap.add_argument("--exact-max-d", type=int, default=1000)
    args = ap.parse_args()
    print(f"poisson_ball, tanh {args.width}x{args.depth}, batch {args.batch}, samples {args.samples}, "
          f"draw {args.draw}, float32, jax {jax.__version__}")
    head = f"{'d':>6} {'method':>6} {'CPU ms/step':>12} {'wall ms':>9} {'vs exact':>9} " \
           f"{'memory MiB':>11} {'compile s':>10} {'rel. std':>9}"
    print(head)
    for d in (int(v) for v in args.dims.split(",")):
        exact_cpu = None
        for name in args.methods.split(","):
            r = bench(d, name, args)
            if name == "exact":
                exact_cpu = r.get("cpu_ms")
            ratio = f"{r['cpu_ms'] / exact_cpu:9.3f}" if exact_cpu and "cpu_ms" in r else f"{'-':>9}"
            cpu = (f"{r['cpu_ms']:12.1f} {r['wall_ms']:9.1f}" if "cpu_ms" in r
                   else f"{'(not run)':>12} {'-':>9}")
            std = f"{r['rel_std']:9.3f}" if "rel_std" in r else f"{'-':>9}"
            print(f"{d:>6} {name:>6} {cpu} {ratio} {r['mem_mib']:11.1f} {r['compile_s']:10.1f} {std}",
                  flush=True)


if __name__ == "__main__":
    main()
