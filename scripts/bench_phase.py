"""One phase of a config's training, CPU steps/s, for several checkouts in one run (issue 32).

Each checkout (``--checkouts DIR ...``: a repository root, put first on ``PYTHONPATH`` of
its own child process, so that main's code and a branch's run side by side) builds the
config with ``--set`` overrides, compiles the chunk of ``--chunk`` steps of phase
``--phase`` as the training loop does (`pinnkit.train.step.make_chunk`, the phase started
from the initial weights), runs ``--warm`` chunks, then the children run one chunk each
in turns, ``--repeats`` rounds (so that on a shared core they see the same load), and the
median CPU seconds per step (``time.process_time`` of the child, one XLA thread) is
printed per checkout with the ratio to the first. Also printed: CPU seconds of the first
chunk (compilation included), the losses of the last timed chunk's first and last step
(the checkouts must agree to rounding), and for a phase with a line search the
iterations of the last step's search (SSBroyden: the loss is evaluated once more than
that per step). ``--parts``: each checkout first prints the parts of a step (`parts`).

    taskset -c 0 python scripts/bench_phase.py configs/ns_cylinder_dfg1.yaml --phase 1 \\
        --checkouts /work/main . --set problem.params.near=2048 --set problem.params.near_outer=0.15
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def worker(args) -> None:
    """The child: builds and warms the chunk, then runs one chunk per line on stdin and
    answers with one JSON line."""
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import numpy as np

    from pinnkit.run.build import build_run
    from pinnkit.run.config import load_config
    from pinnkit.train.loss import make_loss
    from pinnkit.train.step import chunk_args, make_chunk, point_arrays, split_model, train_key

    try:
        from pinnkit.train.step import initial_state
    except ImportError:  # a checkout before it (main before issue 32's leftover): built as there
        from pinnkit.train.step import TrainState, init_extra

        def initial_state(run, phase, params):
            step = jnp.asarray(phase.start, jnp.int32)
            return TrainState(params, phase.init(params), step, init_extra(run))

    cfg = load_config(args.config, args.set)
    jax.config.update("jax_enable_x64", bool(cfg.numerics.x64))  # a script: as the command sets it
    run = build_run(cfg)
    params, static = split_model(run)
    phase = run.phases[args.phase]
    state = initial_state(run, phase, params)
    fn = make_chunk(make_loss(run, static), phase, args.chunk, train_key(run), run=run)
    rest = chunk_args(phase, run.dtype, args.chunk)
    arrays = point_arrays(run)

    def chunk(state):
        c0 = time.process_time()
        state, m = fn(arrays, state, *rest)
        jax.block_until_ready(m)
        return state, m, time.process_time() - c0

    state, m, first = chunk(state)
    for _ in range(args.warm):
        state, m, _ = chunk(state)
    if args.parts:
        parts(run, make_loss(run, static), state, arrays)
    print(json.dumps({"ready": True, "first_chunk_cpu_s": first}), flush=True)
    for _ in sys.stdin:
        state, m, took = chunk(state)
        loss = np.asarray(m["loss"])
        ls = getattr(state.opt_state, "linesearch", None)
        print(json.dumps({"cpu_s": took, "loss": [float(loss[0]), float(loss[-1])],
                          "ls": None if ls is None else int(ls.info.num_linesearch_steps)}), flush=True)


def parts(run, loss, state, arrays) -> None:
    """Prints the step's parts at ``state`` (median CPU s of 3 calls, each compiled alone):
    one loss value and value-and-gradient, 8 loss values in one `jax.lax.map` (what a
    grid search runs: the functions of the point alone, loop-invariant, are computed
    once if XLA hoists them), the Gauss-Newton pass of a natural-gradient phase, and
    XLA's FLOPs of one loss value."""
    import jax
    import jax.numpy as jnp

    from pinnkit.train.step import step_key, train_key

    key, ctx = step_key(loss, train_key(run), state.step), loss.context(state.extra, state.step)
    p = state.params

    def cpu(f):
        jax.block_until_ready(f(p))
        ts = []
        for _ in range(3):
            c0 = time.process_time()
            jax.block_until_ready(f(p))
            ts.append(time.process_time() - c0)
        return statistics.median(ts)

    value = jax.jit(lambda p: loss.value(p, key, arrays, ctx))
    scales = jnp.linspace(0.9, 1.0, 8, dtype=run.dtype)
    rows = {"loss value": value,
            "value_and_grad": jax.jit(lambda p: loss.value_and_grad(p, key, arrays, ctx)),
            "8 values in a lax.map": jax.jit(lambda p: jax.lax.map(
                lambda c: loss.value(jax.tree.map(lambda a: a * c, p), key, arrays, ctx), scales))}
    if any(ph.gauss_newton for ph in run.phases):
        rows["gauss_newton"] = jax.jit(lambda p: loss.gauss_newton(p, key, arrays))
    cost = value.lower(p).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    out = {"parts_cpu_s": {k: cpu(f) for k, f in rows.items()},
           "loss_value_gflop": cost.get("flops", float("nan")) / 1e9}
    print(json.dumps(out), file=sys.stderr, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--phase", type=int, default=0, help="index of the phase in optim.phases")
    ap.add_argument("--checkouts", nargs="+", default=["."], help="repository roots (PYTHONPATH)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")
    ap.add_argument("--chunk", type=int, default=10, help="steps per compiled chunk")
    ap.add_argument("--warm", type=int, default=1, help="chunks run before the timed ones")
    ap.add_argument("--repeats", type=int, default=5, help="timed chunks per checkout (median reported)")
    ap.add_argument("--parts", action="store_true",
                    help="each checkout also prints the step's parts after the warm chunks (`parts`)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    here = os.path.abspath(__file__)
    cmd = [sys.executable, here, args.config, "--worker", "--phase", str(args.phase),
           "--chunk", str(args.chunk), "--warm", str(args.warm), *[a for s in args.set for a in ("--set", s)],
           *(["--parts"] if args.parts else [])]
    kids, info = [], []
    for root in args.checkouts:  # one at a time while compiling: each its own CPU seconds
        env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
        kid = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        info.append(json.loads(kid.stdout.readline()))
        kids.append(kid)
    times, last = [[] for _ in kids], [None] * len(kids)
    for _ in range(args.repeats):
        for i, kid in enumerate(kids):
            kid.stdin.write("go\n")
            kid.stdin.flush()
            last[i] = json.loads(kid.stdout.readline())
            times[i].append(last[i]["cpu_s"] / args.chunk)
    for kid in kids:
        kid.stdin.close()
        kid.wait()
    base = statistics.median(times[0])
    for root, t, first, res in zip(args.checkouts, times, info, last, strict=True):
        med = statistics.median(t)
        ls = "" if res["ls"] is None else f", last step's line search {res['ls']} iterations"
        print(f"{root}: {med:.4f} CPU s/step = {1 / med:.2f} CPU steps/s ({base / med:.2f}x the first; "
              f"{', '.join(f'{x:.3f}' for x in t)}), first chunk {first['first_chunk_cpu_s']:.1f} CPU s, "
              f"losses {res['loss'][0]:.12e} .. {res['loss'][1]:.12e}{ls}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
