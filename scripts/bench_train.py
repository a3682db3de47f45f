"""Training throughput on the peer protocols (P1, P2, P3 of docs/benchmarks.md).

Peer protocols: tanh MLP [64]*4, float32, Adam lr 1e-3, full batch, points drawn once,
loss = unweighted sum of the terms' mean squares, one CPU thread.

- P1 Poisson 2-D: 4096 interior + 1024 boundary points (plain JAX `vmap(jax.hessian)`
  baseline in the same run, same weights and points);
- P2 Kovasznay Re = 20: 4096 interior (momentum and continuity) + 1024 boundary points,
  outputs u, v, p;
- P3 Burgers: 4096 interior + 512 initial + 512 boundary points.

The *floor* row per problem (issue 32) is the same network, points and loss with the
derivative rows pushed through the MLP by hand (`scripts/train_floor.py`: value,
first-order and Laplacian rows as plain arrays, one `jax.value_and_grad`); its loss is
checked against pinnkit's on the same weights first. pinnkit's momentum and continuity
are separate terms with their own points (4096 each for P2), where the peers evaluate
both residuals on the same 4096 points; the floor does as pinnkit does.

Two rates per row: **wall** steps/s, and **CPU** steps/s = steps per second of CPU time
used by this process (`time.process_time`). With one XLA thread the CPU rate is what a
quiet core would give, so it stays meaningful on a shared, loaded machine (cache sharing
aside). Compilation is excluded: the compiled chunk of ``--chunk`` steps is run once,
then timed ``--repeats`` times, and the median is reported. Beside the rates, XLA's
figures of one compiled step (a chunk of 1): FLOPs by its cost analysis, the number of
fusions in the ENTRY computation (kernels per step) and the temporaries' bytes.

With ``PEER_VENVS`` set (the venvs of the peer harness, made by its own setup script outside this repository;
``PEERS_DIR``: the harness' folder, default ``shared/peers`` beside the checkout or one above), each
problem's DeepXDE-PyTorch run (`deepxde_run.py`, ``--peer-steps`` Adam steps, one torch
thread) is started as a child process on the same core, and its CPU steps/s (steps after
the first over the training call's CPU seconds, as the harness records them) replace the
recorded figure in the ``× fastest peer`` column. The *roofline* row is a plain
float32 matmul (``--roofline-n`` cubed, a chain of them in one compiled scan) on the same
core: its GFLOP/s, divided by a step's FLOPs, is the steps/s a step made only of such
matmuls would reach; ``× roofline`` is each row's CPU rate over it.

    taskset -c 1 python scripts/bench_train.py [--problems P1,P2,P3] [--methods taylor,...]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_floor  # noqa: E402

PROTOCOLS = {
    "P1": ({"name": "poisson2d"}, {"pde": 4096, "boundary": 1024}),
    "P2": ({"name": "kovasznay", "params": {"Re": 20}},
           {"momentum": 4096, "continuity": 4096, "boundary": 1024}),
    "P3": ({"name": "burgers"}, {"pde": 4096, "initial": 512, "boundary": 512}),
}
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


def timed(fn, args, n_steps: int, repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) steps/s of ``fn(*args)`` (one call = ``n_steps`` steps; compiled)."""
    jax.block_until_ready(fn(*args))
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(*args))
        walls.append(n_steps / (time.perf_counter() - w0))
        cpus.append(n_steps / (time.process_time() - c0))
    return statistics.median(walls), statistics.median(cpus)


def program_figures(fn, args) -> dict:
    """XLA's view of one compiled step ``fn(*args)``: FLOPs (cost analysis), the fusion
    instructions of the ENTRY computation, and the temporaries' peak bytes."""
    compiled = fn.lower(*args).compile()
    compiled = getattr(compiled, "compiled", compiled)  # an Equinox filter_jit's wrapper
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    text = compiled.as_text()
    entry = text[text.index("\nENTRY"):]
    entry = entry[: entry.index("\n}")]
    fusions = sum(1 for line in entry.splitlines() if " fusion(" in line)
    mem = compiled.memory_analysis()
    return {"flops": cost.get("flops", float("nan")), "fusions": fusions,
            "temp_mib": mem.temp_size_in_bytes / 2**20 if mem is not None else float("nan")}


def pinnkit_step(problem: str, method: str, chunk: int):
    """``(fn, args)``: the training loop's own compiled chunk (`pinnkit.train.step.make_chunk`)."""
    run = build_run(pinnkit_config(problem, method, chunk), mesh=make_mesh(1))
    params, static = split_model(run)
    params = replicate(params, run.mesh)
    phase = run.phases[0]
    state = replicate(TrainState(params, phase.init(params), jnp.asarray(0, jnp.int32)), run.mesh)
    chunk_fn = make_chunk(make_loss(run, static), phase, chunk, jax.random.key(2))
    return (lambda arrays, state: chunk_fn(arrays, state)[1]["loss"]), chunk_fn, (point_arrays(run), state)


def floor_step(problem: str, chunk: int):
    """``(steps, args)``: ``chunk`` Adam steps on the hand-written floor's loss
    (`scripts/train_floor.py`) from the run's initial weights and points."""
    run = build_run(pinnkit_config(problem, "taylor", chunk), mesh=make_mesh(1))
    layers = train_floor.weights(run.network)
    loss = train_floor.loss_fn(problem, point_arrays(run), dict(run.problem.coeffs))
    opt = optax.adam(1e-3)

    @jax.jit
    def steps(layers, state):
        def body(carry, _):
            p, s = carry
            val, g = jax.value_and_grad(loss)(p)
            upd, s = opt.update(g, s)
            return (optax.apply_updates(p, upd), s), val

        return jax.lax.scan(body, (layers, state), None, length=chunk)  # all of it live

    return steps, (layers, opt.init(layers))


def check_floor(problem: str) -> float:
    """|floor loss - pinnkit loss| / pinnkit loss on the initial weights (float32)."""
    run = build_run(pinnkit_config(problem, "taylor", 1), mesh=make_mesh(1))
    params, static = split_model(run)
    arrays = point_arrays(run)
    ours = make_loss(run, static)(params, jax.random.key(0), arrays)[0]
    floor = train_floor.loss_fn(problem, arrays, dict(run.problem.coeffs))(train_floor.weights(run.network))
    return float(abs(floor - ours) / abs(ours))


def baseline_step(chunk: int):
    """``(loop, step, args)``: P1 in plain JAX, vmap(jax.hessian) Laplacian, jitted step, a
    Python loop of ``chunk`` steps (peer style)."""
    run = build_run(pinnkit_config("P1", "autodiff", chunk), mesh=make_mesh(1))
    arrays = point_arrays(run)
    xi, xb = arrays["pde"], arrays["boundary"]
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

    def loop(net, state):
        v = None
        for _ in range(chunk):
            net, state, v = step(net, state)
        return v

    return loop, step, (net, opt.init(eqx.filter(net, eqx.is_array)))


def measure(name: str, fn, one_step, args, chunk: int, repeats: int, figures: bool) -> dict:
    wall, cpu = timed(fn, args, chunk, repeats)
    row = {"name": name, "wall": wall, "cpu": cpu}
    if figures:
        row.update(program_figures(one_step, args))
    return row


def roofline(n: int, repeats: int) -> float:
    """CPU GFLOP/s of a chain of 8 float32 ``(n, n) @ (n, n)`` matmuls in one compiled scan."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32) / n**0.5

    @jax.jit
    def chain(a):
        return jax.lax.scan(lambda c, _: (jnp.tanh(c @ a), None), a, None, length=8)[0]

    cpu = timed(chain, (a,), 8, repeats)[1]  # "steps" = matmuls
    return cpu * 2 * n**3 / 1e9


def deepxde_torch(problem: str, steps: int) -> dict | None:
    """DeepXDE-PyTorch's rates on ``problem`` from the peer harness, run here as a child
    (same core, one thread); None when ``PEER_VENVS`` is unset."""
    venvs = os.environ.get("PEER_VENVS")
    if not venvs:
        return None
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    near = [os.path.join(here, *[".."] * k, "shared", "peers") for k in (1, 2)]  # checkout, worktree
    peers = os.environ.get("PEERS_DIR") or next((d for d in near if os.path.isdir(d)), near[0])
    with tempfile.TemporaryDirectory(prefix="pinnkit-peer-") as out:
        env = dict(os.environ, DDE_BACKEND="pytorch", PEERS_RESULTS=out, PEER_STEPS=str(steps),
                   OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        cmd = [os.path.join(venvs, "deepxde", "bin", "python"), "deepxde_run.py",
               "--problem", problem, "--steps", str(steps)]
        done = subprocess.run(cmd, cwd=peers, env=env, capture_output=True, text=True)
        path = os.path.join(out, f"deepxde_torch_{problem}.json")
        if done.returncode != 0 or not os.path.exists(path):
            print(f"{problem}: DeepXDE-PyTorch failed: {done.stderr.strip().splitlines()[-1:]}", flush=True)
            return None
        res = json.load(open(path))
    n = res["steps"] - 1  # the harness leaves the first step out of train_s / train_cpu_s
    return {"name": "DeepXDE-PyTorch (peer harness)", "wall": n / res["train_s"],
            "cpu": n / res["train_cpu_s"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default="P1,P2,P3")
    ap.add_argument("--methods", default="taylor", help=f"pinnkit methods, of {','.join(METHODS)}")
    ap.add_argument("--chunk", type=int, default=50, help="steps per compiled chunk")
    ap.add_argument("--repeats", type=int, default=5, help="timed chunks (median reported)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the plain-JAX P1 baseline")
    ap.add_argument("--peer-steps", type=int, default=300, help="DeepXDE-PyTorch steps (PEER_VENVS)")
    ap.add_argument("--roofline-n", type=int, default=1024, help="matmul size of the roofline row")
    ap.add_argument("--no-figures", action="store_true",
                    help="skip the FLOPs / fusions / memory of one compiled step")
    args = ap.parse_args(argv)
    figures = not args.no_figures
    rows, peers = [], {}
    gflops = roofline(args.roofline_n, args.repeats)
    print(f"roofline: float32 {args.roofline_n}^3 matmul, {gflops:.1f} GFLOP/s (CPU time)", flush=True)
    for prob in args.problems.split(","):
        peer = deepxde_torch(prob, args.peer_steps)
        if peer is not None:
            peers[prob] = peer["cpu"]
            rows.append((prob, peer, None))
        print(f"{prob}: floor loss vs pinnkit loss, relative difference {check_floor(prob):.1e}",
              flush=True)
        steps, fargs = floor_step(prob, args.chunk)
        floor = measure("hand-written floor", steps, floor_step(prob, 1)[0], fargs, args.chunk,
                        args.repeats, figures)
        rows.append((prob, floor, floor))
        if prob == "P1" and not args.no_baseline:
            loop, step, bargs = baseline_step(args.chunk)
            rows.append((prob, measure("plain JAX vmap(jax.hessian)", loop, step, bargs,
                                       args.chunk, args.repeats, figures), floor))
        for m in args.methods.split(","):
            fn, _, pargs = pinnkit_step(prob, m, args.chunk)
            one = pinnkit_step(prob, m, 1)[1]
            rows.append((prob, measure(f"pinnkit {m}", fn, one, pargs, args.chunk, args.repeats,
                                       figures), floor))
    print(f"\npeer protocols, chunk {args.chunk}, median of {args.repeats}, 1 XLA thread, "
          f"jax {jax.__version__}, load average {os.getloadavg()[0]:.1f}; figures of one "
          "compiled step\n")
    peer_note = ("DeepXDE-PyTorch measured in this run" if peers
                 else "the fastest peer's recorded CPU rate (PEER_VENVS unset)")
    print(f"× fastest peer: against {peer_note}; × roofline: CPU steps/s over {gflops:.1f} GFLOP/s "
          "divided by the step's FLOPs\n")
    print("| problem | implementation | wall steps/s | CPU steps/s | × floor (CPU) "
          "| × fastest peer (CPU) | × roofline | GFLOP | top-level fusions | temp MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for prob, r, floor in rows:
        has = figures and "flops" in r
        fig = f"{r['flops'] / 1e9:.3f} | {r['fusions']} | {r['temp_mib']:.1f}" if has else "— | — | —"
        roof = f"{r['cpu'] * r['flops'] / 1e9 / gflops:.2f}" if has else "—"
        to_floor = f"{r['cpu'] / floor['cpu']:.2f}" if floor is not None else "—"
        print(f"| {prob} | {r['name']} | {r['wall']:.1f} | {r['cpu']:.1f} | {to_floor} "
              f"| {r['cpu'] / peers.get(prob, PEERS[prob]):.2f} | {roof} | {fig} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
