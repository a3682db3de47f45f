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
then timed ``--repeats`` times, and the median is reported; a problem's rows are timed in
turns (one chunk of each per round), so that on a shared core they see the same load.
``--accumulate K,...`` adds rows with each step's points in K blocks, one after another
(pinnkit's ``train.accumulate``; the floor's gradient summed over the blocks likewise):
the same loss, with a working set of one block; ``auto`` among them adds the K that
``train.accumulate: auto`` chooses (`pinnkit.train.accumulate`). Beside the rates, XLA's
figures of one compiled step (a chunk of 1): FLOPs by its cost analysis, the number of
fusions in the ENTRY computation (kernels per step) and the temporaries' bytes.

With ``PEER_VENVS`` set (the venvs of the peer harness, made by its own setup script outside this repository;
``PEERS_DIR``: the harness' folder, default ``shared/peers`` beside the checkout or one above), each
problem's DeepXDE-PyTorch run (`deepxde_run.py`, ``--peer-steps`` Adam steps, one torch
thread) is started as a child process on the same core before the problem's rounds and
again after them, and the mean of its two CPU steps/s (steps after the first over the
training call's CPU seconds, as the harness records them; both printed) replaces the
recorded figure in the ``× fastest peer`` column. The *roofline* row is a plain
float32 matmul (``--roofline-n`` cubed, a chain of them in one compiled scan) on the same
core: its GFLOP/s, divided by a step's FLOPs, is the steps/s a step made only of such
matmuls would reach; ``× roofline`` is each row's CPU rate over it
(on an accelerator every ratio is of wall rates: the host's CPU only waits).

    taskset -c 1 python scripts/bench_train.py [--problems P1,P2,P3] [--methods taylor,...]
    taskset -c 1 python scripts/bench_train.py --accumulate 16 --configs CONFIG ...   # a config's step

With ``--configs`` the configs' ``numerics`` (float64, matmul precision) are switched on once,
as the command does; configs of one invocation that disagree are refused.
"""

import argparse
import json
import math
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

from pinnkit.cli.jaxsetup import apply_numerics  # noqa: E402
from pinnkit.diffops import METHODS  # noqa: E402
from pinnkit.errors import ConfigError  # noqa: E402
from pinnkit.parallel.mesh import make_mesh, replicate  # noqa: E402
from pinnkit.run.build import build_run  # noqa: E402
from pinnkit.run.config import from_dict, load_config  # noqa: E402
from pinnkit.train.accumulate import cache_bytes, resolve_accumulate, step_temp_bytes  # noqa: E402
from pinnkit.train.loss import make_loss  # noqa: E402
from pinnkit.train.step import (  # noqa: E402
    chunk_args,
    init_extra,
    initial_state,
    make_chunk,
    point_arrays,
    split_model,
    train_key,
)

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
    return timed_in_turns([(fn, args)], n_steps, repeats)[0]


def timed_in_turns(calls, n_steps: int, repeats: int) -> list[tuple[float, float]]:
    """Median (wall, CPU) steps/s of each ``(fn, args)`` of ``calls``, timed in turns: one
    call of each per round, ``repeats`` rounds, so that on a shared core every row sees the
    same load (and the same cache pollution) as the others."""
    for fn, args in calls:
        jax.block_until_ready(fn(*args))
    walls, cpus = [[] for _ in calls], [[] for _ in calls]
    for _ in range(repeats):
        for i, (fn, args) in enumerate(calls):
            w0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn(*args))
            walls[i].append(n_steps / (time.perf_counter() - w0))
            cpu = time.process_time() - c0  # 0 on an accelerator whose host only waited
            cpus[i].append(n_steps / cpu if cpu > 0 else math.inf)
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(walls, cpus, strict=True)]


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


def auto_accumulate(run) -> tuple[int, float, float]:
    """``(K, step temporaries in MiB, CPU seconds of the choice)``: ``train.accumulate:
    auto``'s choice for ``run`` (`pinnkit.train.accumulate`), as `fit` makes it."""
    params, static = split_model(run)
    c0 = time.process_time()
    loss = make_loss(run, static)
    args = (replicate(params, run.mesh), point_arrays(run), init_extra(run))
    k = resolve_accumulate(run, "auto", loss, *args)
    took = time.process_time() - c0
    cache = cache_bytes()
    temp = step_temp_bytes(loss, *args) if cache else 0
    return k, temp / 2**20, took


def pinnkit_step(problem: str, method: str, chunk: int, accumulate: int = 1):
    """``(fn, args)``: the training loop's own compiled chunk (`pinnkit.train.step.make_chunk`),
    each step's batch in ``accumulate`` micro-batches (``train.accumulate``)."""
    run = build_run(pinnkit_config(problem, method, chunk), mesh=make_mesh(1))
    params, static = split_model(run)
    phase = run.phases[0]
    state = initial_state(run, phase, params)
    chunk_fn = make_chunk(make_loss(run, static, accumulate=accumulate), phase, chunk, jax.random.key(2))
    args = chunk_args(phase, run.dtype, chunk)
    return (lambda *a: chunk_fn(*a)[1]["loss"]), chunk_fn, (point_arrays(run), state, *args)


def floor_step(problem: str, chunk: int, blocks: int = 1):
    """``(steps, args)``: ``chunk`` Adam steps on the hand-written floor's loss
    (`scripts/train_floor.py`) from the run's initial weights and points; with ``blocks``
    > 1, each step's value and gradient are the mean over that many equal blocks of every
    point set, one block after another (the same loss: a mean of equal blocks' means)."""
    run = build_run(pinnkit_config(problem, "taylor", chunk), mesh=make_mesh(1))
    layers = train_floor.weights(run.network)
    arrays, coeffs = point_arrays(run), dict(run.problem.coeffs)
    opt = optax.adam(1e-3)

    def value_and_grad(p):
        if blocks == 1:
            return jax.value_and_grad(train_floor.loss_fn(problem, arrays, coeffs))(p)
        split = {k: a.reshape(blocks, a.shape[0] // blocks, *a.shape[1:]) for k, a in arrays.items()}

        def body(acc, block):
            vg = jax.value_and_grad(train_floor.loss_fn(problem, block, coeffs))(p)
            return jax.tree_util.tree_map(jnp.add, acc, vg), None

        zero = jax.tree_util.tree_map(jnp.zeros_like, (jnp.zeros(()), p))
        total, _ = jax.lax.scan(body, zero, split)
        return jax.tree_util.tree_map(lambda x: x / blocks, total)

    @jax.jit
    def steps(layers, state):
        def body(carry, _):
            p, s = carry
            val, g = value_and_grad(p)
            upd, s = opt.update(g, s)
            return (optax.apply_updates(p, upd), s), val

        return jax.lax.scan(body, (layers, state), None, length=chunk)  # all of it live

    return steps, (layers, opt.init(layers))


def load_configs(paths: list[str]) -> dict:
    """Each config file's `RunConfig`, with the command's own numerics switched on from them
    (`pinnkit.cli.jaxsetup.apply_numerics`: float64, matmul precision, compilation cache;
    once, before anything is built); `ConfigError` if they disagree."""
    cfgs = {path: load_config(path) for path in paths}
    kinds = {path: (bool(c.numerics.x64), c.numerics.matmul_precision) for path, c in cfgs.items()}
    if len(set(kinds.values())) > 1:
        seen = "; ".join(f"{p}: x64 {x}, matmul_precision {m}" for p, (x, m) in kinds.items())
        raise ConfigError(f"--configs: the configs' numerics differ ({seen}), and JAX's precision is set "
                          "once per process; time them in separate invocations")
    apply_numerics(next(iter(cfgs.values())), None)
    return cfgs


def config_step(cfg, chunk: int, accumulate: int):
    """``(fn, args)``: a config's phase-0 chunk of ``chunk`` steps as the training loop
    builds it (`pinnkit.train.step.make_chunk`), in ``accumulate`` micro-batches."""
    run = build_run(cfg)
    params, static = split_model(run)
    phase = run.phases[0]
    state = initial_state(run, phase, params)
    fn = make_chunk(make_loss(run, static, accumulate=accumulate), phase, chunk, train_key(run), run=run)
    args = chunk_args(phase, run.dtype, chunk)
    return (lambda arrays, state: fn(arrays, state, *args)[1]["loss"]), (point_arrays(run), state)


def config_rates(cfgs: dict, ks: list[int], chunk: int, repeats: int, auto: bool = False) -> None:
    """Prints each config's (``{path: RunConfig}``, `load_configs`) CPU steps/s with each
    micro-batch count of ``ks``, timed in turns, and how far the chunk's losses are from one
    batch's; with ``auto``, also the K that ``train.accumulate: auto`` chooses for the
    config (its row, if not in ``ks``)."""
    for path, cfg in cfgs.items():
        if auto:
            k, temp, took = auto_accumulate(build_run(cfg))
            print(f"{path}: accumulate auto chose {k} (step temporaries {temp:.1f} MiB, cache "
                  f"{(cache_bytes() or 0) / 2**20:.1f} MiB; choosing took {took:.1f} CPU s)", flush=True)
            ks = sorted({*ks, k})
        calls = [config_step(cfg, chunk, k) for k in ks]
        losses = [fn(*a) for fn, a in calls]
        rates = timed_in_turns(calls, chunk, repeats)
        diff = [float(jnp.max(jnp.abs(x / losses[0] - 1))) for x in losses]
        cells = [f"accumulate {k} {r[1]:.1f} CPU steps/s ({r[1] / rates[0][1]:.2f}x, losses within {d:.0e})"
                 for k, r, d in zip(ks, rates, diff, strict=True)]
        print(f"{path}: " + ", ".join(cells), flush=True)


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


def figures_of(one_step, args, blocks: int = 1) -> dict:
    """XLA's figures of one step. A step in ``blocks`` > 1 is a loop over the blocks, whose
    body XLA's cost analysis counts once (FLOPs × ``blocks``) and whose fusions are not in
    the ENTRY computation (no count: None)."""
    row = program_figures(one_step, args)
    if blocks > 1:
        row.update(flops=row["flops"] * blocks, fusions=None)
    return row


def roofline(n: int, repeats: int, clock: str) -> float:
    """GFLOP/s of a chain of 8 float32 ``(n, n) @ (n, n)`` matmuls in one compiled scan, by
    ``clock`` (``"cpu"``: CPU seconds, on a CPU; ``"wall"``: on an accelerator, whose host's
    CPU time is not the chip's)."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32) / n**0.5

    @jax.jit
    def chain(a):
        return jax.lax.scan(lambda c, _: (jnp.tanh(c @ a), None), a, None, length=8)[0]

    wall, cpu = timed(chain, (a,), 8, repeats)  # "steps" = matmuls
    return (cpu if clock == "cpu" else wall) * 2 * n**3 / 1e9


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
    ap.add_argument("--accumulate", default="1", metavar="K[,K...]",
                    help="also time pinnkit and the floor with each step's points in K blocks "
                         "(pinnkit's train.accumulate: the same loss, the working set of one block); "
                         "'auto' adds the K that train.accumulate: auto chooses")
    ap.add_argument("--configs", nargs="+", metavar="CONFIG",
                    help="instead of the protocols: each config's phase-0 chunk, CPU steps/s with "
                         "each --accumulate K (1 included), timed in turns")
    ap.add_argument("--no-figures", action="store_true",
                    help="skip the FLOPs / fusions / memory of one compiled step")
    args = ap.parse_args(argv)
    given = args.accumulate.split(",")
    auto = "auto" in given
    if args.configs:
        ks = sorted({1, *(int(k) for k in given if k != "auto")})
        try:
            cfgs = load_configs(args.configs)
        except ConfigError as e:
            print(f"bench_train: {e}", file=sys.stderr)
            return 2
        config_rates(cfgs, ks, args.chunk, args.repeats, auto)
        return 0
    figures = not args.no_figures
    rows, peers = [], {}
    clock = "cpu" if jax.default_backend() == "cpu" else "wall"  # an accelerator's host waits
    label = "CPU" if clock == "cpu" else "wall"
    gflops = roofline(args.roofline_n, args.repeats, clock)
    print(f"roofline: float32 {args.roofline_n}^3 matmul, {gflops:.1f} GFLOP/s ({label} time)", flush=True)
    for prob in args.problems.split(","):
        peer = deepxde_torch(prob, args.peer_steps)  # run again after the rows' rounds
        print(f"{prob}: floor loss vs pinnkit loss, relative difference {check_floor(prob):.1e}",
              flush=True)
        ks = [int(k) for k in given if k != "auto" and int(k) > 1]
        if auto:
            k, temp, took = auto_accumulate(build_run(pinnkit_config(prob, "taylor", 1), mesh=make_mesh(1)))
            print(f"{prob}: accumulate auto chose {k} (step temporaries {temp:.1f} MiB, cache "
                  f"{(cache_bytes() or 0) / 2**20:.1f} MiB; choosing took {took:.1f} CPU s)", flush=True)
            ks = sorted({*ks, k} - {1})
        cands = []  # (name, chunk fn, one-step fn, args, blocks); the first is the floor
        for k in [1, *ks]:
            steps, fargs = floor_step(prob, args.chunk, k)
            cands.append(("hand-written floor" + (f", {k} blocks" if k > 1 else ""), steps,
                          lambda k=k, p=prob: floor_step(p, 1, k)[0], fargs, k))
        if prob == "P1" and not args.no_baseline:
            loop, step, bargs = baseline_step(args.chunk)
            cands.append(("plain JAX vmap(jax.hessian)", loop, lambda step=step: step, bargs, 1))
        for m in args.methods.split(","):
            fn, _, pargs = pinnkit_step(prob, m, args.chunk)
            for k in [1, *ks]:
                fk, _, kargs = (fn, None, pargs) if k == 1 else pinnkit_step(prob, m, args.chunk, k)
                if k > 1:
                    diff = float(jnp.max(jnp.abs(fk(*kargs) / fn(*pargs) - 1)))
                    print(f"{prob}: pinnkit {m}, {k} micro-batches: the chunk's losses differ from "
                          f"one batch's by at most {diff:.1e} (relative)", flush=True)
                cands.append((f"pinnkit {m}" + (f", accumulate {k}" if k > 1 else ""), fk,
                              lambda m=m, k=k, p=prob: pinnkit_step(p, m, 1, k)[1], kargs, k))
        rates = timed_in_turns([(c[1], c[3]) for c in cands], args.chunk, args.repeats)
        after = deepxde_torch(prob, args.peer_steps) if peer is not None else None
        if peer is not None and after is not None:  # the load before and after pinnkit's rounds
            peer = {"name": f"DeepXDE-PyTorch (peer harness; before / after: {peer['cpu']:.1f} / "
                            f"{after['cpu']:.1f})",
                    **{k: (peer[k] + after[k]) / 2 for k in ("wall", "cpu")}}
        if peer is not None:
            peers[prob] = peer["cpu"]
            rows.append((prob, peer, None))
        floor = None
        for (name, _, one, cargs, k), (wall, cpu) in zip(cands, rates, strict=True):
            row = {"name": name, "wall": wall, "cpu": cpu}
            if figures:
                row.update(figures_of(one(), cargs, k))
            floor = floor or row
            rows.append((prob, row, floor))
    print(f"\npeer protocols, chunk {args.chunk}, median of {args.repeats} rounds (each row's chunk "
          f"once per round, in turns), 1 XLA thread, "
          f"jax {jax.__version__}, load average {os.getloadavg()[0]:.1f}; figures of one "
          "compiled step\n")
    peer_note = ("DeepXDE-PyTorch measured in this run" if peers
                 else "the fastest peer's recorded CPU rate (PEER_VENVS unset)")
    print(f"× fastest peer: against {peer_note}; × roofline: {label} steps/s over {gflops:.1f} GFLOP/s "
          "divided by the step's FLOPs\n")
    print(f"| problem | implementation | wall steps/s | CPU steps/s | × floor ({label}) "
          f"| × fastest peer ({label}) | × roofline | GFLOP | top-level fusions | temp MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for prob, r, floor in rows:
        has = figures and "flops" in r
        fus = "—" if not has or r["fusions"] is None else r["fusions"]
        fig = f"{r['flops'] / 1e9:.3f} | {fus} | {r['temp_mib']:.1f}" if has else "— | — | —"
        roof = f"{r[clock] * r['flops'] / 1e9 / gflops:.2f}" if has else "—"
        to_floor = f"{r[clock] / floor[clock]:.2f}" if floor is not None else "—"
        print(f"| {prob} | {r['name']} | {r['wall']:.1f} | {r['cpu']:.1f} | {to_floor} "
              f"| {r[clock] / peers.get(prob, PEERS[prob]):.2f} | {roof} | {fig} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
