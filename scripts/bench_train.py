"""Training throughput on the peer protocols (P1, P2, P3 of docs/benchmarks.md).

Peer protocols: tanh MLP [64]*4, float32, Adam lr 1e-3, full batch, points drawn once,
loss = unweighted sum of the terms' mean squares, one CPU thread.

- P1 Poisson 2-D: 4096 interior + 1024 boundary points (plain JAX `vmap(jax.hessian)`
  baseline in the same run, same weights and points);
- P2 Kovasznay Re = 20: 4096 interior (momentum and continuity) + 1024 boundary points,
  outputs u, v, p;
- P3 Burgers: 4096 interior + 512 initial + 512 boundary points.

A *floor* row per problem is Adam on a plain forward + backward of the same network over
as many input vectors as the Taylor jets carry rows (`FLOOR_ROWS`): what any exact
one-pass (forward-Laplacian-type) method must at least compute. pinnkit's momentum and
continuity are separate terms with their own points (4096 each for P2), where the peers
evaluate both residuals on the same 4096 points.

Two rates per row: **wall** steps/s, and **CPU** steps/s = steps per second of CPU time
used by this process (`time.process_time`). With one XLA thread the CPU rate is what a
quiet core would give, so it stays meaningful on a shared, loaded machine (cache sharing
aside); the targets of issue 3 (P1 >= 45, P2 >= 19, P3 >= 60 steps/s on one quiet core)
are compared with it. Compilation is excluded: the compiled chunk of ``--chunk`` steps is
run once, then timed ``--repeats`` times, and the median is reported.

    python scripts/bench_train.py [--problems P1,P2,P3] [--methods taylor,fwd_rev,autodiff]
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from pinnkit.diffops import METHODS  # noqa: E402
from pinnkit.parallel.mesh import make_mesh, replicate  # noqa: E402
from pinnkit.run.build import build_run  # noqa: E402
from pinnkit.run.config import from_dict  # noqa: E402
from pinnkit.train.loss import make_loss  # noqa: E402
from pinnkit.train.step import TrainState, make_chunk, point_arrays, split_model  # noqa: E402

PROTOCOLS = {
    "P1": ({"name": "poisson2d"}, {"pde": 4096, "boundary": 1024}),
    "P2": ({"name": "kovasznay", "params": {"Re": 20}},
           {"momentum": 4096, "continuity": 4096, "boundary": 1024}),
    "P3": ({"name": "burgers"}, {"pde": 4096, "initial": 512, "boundary": 512}),
}
# The (rows x points) a one-pass method must push through the network per step: a Taylor
# jet has d + 2 rows for a Laplacian (value, d first-order rows, one Laplacian row), 3 for
# continuity's first derivatives, 1 for a boundary value.
FLOOR_ROWS = {"P1": ((4, 4096), (1, 1024)), "P2": ((4, 4096), (3, 4096), (1, 1024)),
              "P3": ((4, 4096), (1, 1024))}
TARGETS = {"P1": 45.0, "P2": 19.0, "P3": 60.0}  # issue 3, steps/s on one quiet core
PEERS = {"P1": 14.7, "P2": 6.3, "P3": 19.7}  # fastest peer (DeepXDE-PyTorch), quiet core: docs/benchmarks.md


def pinnkit_config(problem: str, method: str, chunk: int):
    spec, batch = PROTOCOLS[problem]
    return from_dict({
        "problem": spec,
        "network": {"width": 64, "depth": 4, "normalize_inputs": False},
        "sampler": {"method": "uniform", "batch": batch},
        "diffops": {"method": method},
        "optim": {"phases": [{"kind": "adam", "lr": 1e-3}]},
        "train": {"steps": chunk, "chunk": chunk, "log_every": chunk},
        "checkpoint": {"every": 0},
    })


def timed(fn, n_steps: int, repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) steps/s of ``fn()`` (one call = ``n_steps`` steps; compiled)."""
    jax.block_until_ready(fn())
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn())
        walls.append(n_steps / (time.perf_counter() - w0))
        cpus.append(n_steps / (time.process_time() - c0))
    return statistics.median(walls), statistics.median(cpus)


def pinnkit_rates(problem: str, method: str, chunk: int, repeats: int) -> tuple[float, float]:
    """The training loop's own compiled chunk (`pinnkit.train.step.make_chunk`)."""
    run = build_run(pinnkit_config(problem, method, chunk), mesh=make_mesh(1))
    params, static = split_model(run)
    params = replicate(params, run.mesh)
    phase = run.phases[0]
    state = replicate(TrainState(params, phase.init(params), jnp.asarray(0, jnp.int32)), run.mesh)
    chunk_fn = make_chunk(make_loss(run, static), phase, chunk, jax.random.key(2))
    arrays = point_arrays(run)
    return timed(lambda: chunk_fn(arrays, state)[1]["loss"], chunk, repeats)


def floor_rates(problem: str, chunk: int, repeats: int) -> tuple[float, float]:
    """The floor of any exact one-pass derivative method: Adam on mean(net(X)^2) with X
    holding ``rows x points`` points (`FLOOR_ROWS`), i.e. one plain forward + backward of
    the same network over as many vectors as the jets carry rows. Only the matmuls and
    activations of those rows, none of the Taylor rules' extra element-wise work."""
    run = build_run(pinnkit_config(problem, "autodiff", chunk), mesh=make_mesh(1))
    net = run.network.core
    n = sum(r * p for r, p in FLOOR_ROWS[problem])
    x = jax.random.uniform(jax.random.key(0), (n, net.layers[0].in_features))
    opt = optax.adam(1e-3)

    def loss(net):
        return jnp.mean(jax.vmap(net)(x) ** 2)

    @eqx.filter_jit
    def steps(net, state):
        params, static = eqx.partition(net, eqx.is_array)

        def body(carry, _):
            p, s = carry
            val, g = jax.value_and_grad(lambda q: loss(eqx.combine(q, static)))(p)
            upd, s = opt.update(g, s)
            return (optax.apply_updates(p, upd), s), val

        return jax.lax.scan(body, (params, state), None, length=chunk)[1]

    state0 = opt.init(eqx.filter(net, eqx.is_array))
    return timed(lambda: steps(net, state0), chunk, repeats)


def baseline_rates(chunk: int, repeats: int) -> tuple[float, float]:
    """P1 in plain JAX: vmap(jax.hessian) Laplacian, jitted step, Python loop (peer style)."""
    run = build_run(pinnkit_config("P1", "autodiff", chunk), mesh=make_mesh(1))
    arrays = run.sampler.host_arrays(jax.random.fold_in(jax.random.key(run.config.train.seed), 1),
                                     run.problem, jnp.float32)
    xi, xb = jnp.asarray(arrays["pde"]), jnp.asarray(arrays["boundary"])
    f = 2 * jnp.pi**2 * jnp.sin(jnp.pi * xi[:, 0]) * jnp.sin(jnp.pi * xi[:, 1])
    net = run.network.core  # the same MLP and initial weights (no input map here)

    def loss(net):
        u = lambda x: net(x)[0]  # noqa: E731
        lap = jax.vmap(lambda x: jnp.trace(jax.hessian(u)(x)))(xi)
        return jnp.mean((-lap - f) ** 2) + jnp.mean(jax.vmap(net)(xb) ** 2)

    opt = optax.adam(1e-3)

    @eqx.filter_jit
    def step(net, state):
        val, g = eqx.filter_value_and_grad(loss)(net)
        upd, state = opt.update(g, state)
        return eqx.apply_updates(net, upd), state, val

    state0 = opt.init(eqx.filter(net, eqx.is_array))

    def loop():
        n, s, v = net, state0, None
        for _ in range(chunk):
            n, s, v = step(n, s)
        return v

    return timed(loop, chunk, repeats)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default="P1,P2,P3")
    ap.add_argument("--methods", default=",".join(m for m in ("taylor", "fwd_rev", "autodiff")
                                                   if m in METHODS))
    ap.add_argument("--chunk", type=int, default=50, help="steps per compiled chunk")
    ap.add_argument("--repeats", type=int, default=5, help="timed chunks (median reported)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the plain-JAX P1 baseline")
    args = ap.parse_args(argv)
    rows = []
    for prob in args.problems.split(","):
        base = None
        if prob == "P1" and not args.no_baseline:
            base = baseline_rates(args.chunk, args.repeats)
            rows.append((prob, "plain JAX vmap(jax.hessian) (baseline)", *base, base))
        floor = floor_rates(prob, args.chunk, args.repeats)
        rows.append((prob, "floor: plain fwd+bwd over the jet rows", *floor, base))
        for m in args.methods.split(","):
            rows.append((prob, f"pinnkit {m}", *pinnkit_rates(prob, m, args.chunk, args.repeats), base))
    print(f"peer protocols, chunk {args.chunk}, median of {args.repeats}, 1 XLA thread, "
          f"jax {jax.__version__}, load average {os.getloadavg()[0]:.1f}\n")
    print("| problem | implementation | wall steps/s | CPU steps/s | × baseline (CPU) "
          "| target | × fastest peer (CPU) |")
    print("|---|---|---|---|---|---|---|")
    for prob, name, wall, cpu, base in rows:
        ratio = f"{cpu / base[1]:.2f}" if base else "—"
        print(f"| {prob} | {name} | {wall:.1f} | {cpu:.1f} | {ratio} | {TARGETS[prob]:g} "
              f"| {cpu / PEERS[prob]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
