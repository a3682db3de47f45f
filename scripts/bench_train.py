"""P1 training throughput: pinnkit vs a plain `vmap(jax.hessian)` JAX baseline, same run.

Peer protocol (shared/BENCHMARKS.md, P1): tanh MLP 2→[64]*4→1, 4096 interior + 1024
boundary points drawn once, Adam lr 1e-3, full batch, loss = mean(res²) + mean(bc²),
float32, one CPU thread. Both sides start from the same weights and points. Prints a
Markdown table of steps/s (compilation excluded) and the ratio to the baseline.

    python scripts/bench_train.py [--steps 300] [--methods fwd_rev,autodiff,taylor]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from pinnkit.build import build_run  # noqa: E402
from pinnkit.config import from_dict  # noqa: E402
from pinnkit.diffops import METHODS  # noqa: E402
from pinnkit.parallel import make_mesh  # noqa: E402
from pinnkit.train import fit  # noqa: E402


def pinnkit_config(method: str, steps: int, chunk: int):
    return from_dict({
        "problem": {"name": "poisson2d"},
        "network": {"width": 64, "depth": 4, "normalize_inputs": False},
        "sampler": {"method": "uniform", "batch": {"pde": 4096, "boundary": 1024}},
        "diffops": {"method": method},
        "optim": {"phases": [{"kind": "adam", "lr": 1e-3}]},
        "train": {"steps": steps, "chunk": chunk, "log_every": steps},
        "checkpoint": {"every": 0},
    })


def baseline_steps_per_s(run, steps: int) -> float:
    """Plain JAX: vmap(jax.hessian) Laplacian, jitted step, Python loop (peer style)."""
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
    state = opt.init(eqx.filter(net, eqx.is_array))

    @eqx.filter_jit
    def step(net, state):
        val, g = eqx.filter_value_and_grad(loss)(net)
        upd, state = opt.update(g, state)
        return eqx.apply_updates(net, upd), state, val

    net, state, v = step(net, state)
    jax.block_until_ready(v)
    t0 = time.perf_counter()
    for _ in range(steps):
        net, state, v = step(net, state)
    jax.block_until_ready(v)
    return steps / (time.perf_counter() - t0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--chunk", type=int, default=50)
    default = ",".join(m for m in ("taylor", "fwd_rev", "autodiff") if m in METHODS)
    ap.add_argument("--methods", default=default)
    args = ap.parse_args(argv)
    rows = []
    base_run = build_run(pinnkit_config("autodiff", args.steps, args.chunk), mesh=make_mesh(1))
    base = baseline_steps_per_s(base_run, args.steps)
    rows.append(("plain JAX vmap(jax.hessian) (baseline)", base, None))
    for m in args.methods.split(","):
        run = build_run(pinnkit_config(m, args.steps, args.chunk), mesh=make_mesh(1))
        t0 = time.perf_counter()
        res = fit(run, progress=False)
        rows.append((f"pinnkit diffops.method={m}", res.steps_per_s, time.perf_counter() - t0))
    print(f"P1 peer protocol, {args.steps} steps, chunk {args.chunk}, 1 thread, jax {jax.__version__}\n")
    print("| implementation | steps/s | × baseline |")
    print("|---|---|---|")
    for name, sps, _ in rows:
        print(f"| {name} | {sps:.1f} | {sps / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
