"""Benchmark of the derivative engine (issue 3), all methods in one run.

tanh MLP 4×128 (pinnkit `MLP`, Glorot normal), batch 1024, float32, one thread:

- (A) the Laplacian alone, for d in {2, 3, 8, 32, 128};
- (B) `value_and_grad` over the parameters of mean((Δu − f)²), what training needs;
- (C) at d = 2: the biharmonic Δ²u = u_xxxx + 2 u_xxyy + u_yyyy (`f.biharmonic`, and for
  comparison Taylor on the same sum asked for as three partials), and u_xxx.

Columns: pinnkit `Taylor`, `vmap(jax.hessian)`, `jacfwd(jacrev)` and folx's forward
Laplacian (if importable). For second order `jax.hessian` *is* `jacfwd(jacrev)`, so those
two columns time the same construction (their spread shows the timing noise). For (C),
"hessian" nests `jax.hessian` (Δ of Δ; the Hessian of u_x) and "jacfwd(jacrev)" builds the
full derivative tensor with `jacfwd` over `jacrev`. Each cell: median wall time of the
compiled call, compile time, and compiled temporary memory
(``.lower().compile().memory_analysis().temp_size_in_bytes``). Calls are interleaved
(one of each method per round) so that a shared machine slows all columns alike; median
CPU time of the process is printed too, the better figure when other jobs compete.

    python scripts/bench_diffops.py            # full run
    python scripts/bench_diffops.py --quick    # d in {2, 8}, fewer repetitions
"""

from __future__ import annotations

import os

# One thread, set before JAX is imported (the protocol).
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from pinnkit.diffops import Layout, Taylor  # noqa: E402
from pinnkit.nn.layers import MLP, Network  # noqa: E402

try:
    import folx  # noqa: E402

    FOLX = getattr(folx, "__version__", "?")
except Exception as e:  # noqa: BLE001 - any failure means "not available"
    folx, FOLX = None, f"n/a ({type(e).__name__})"

BATCH, WIDTH, DEPTH = 1024, 128, 4


def make_net(d: int) -> tuple[Network, Layout]:
    names = tuple(f"x{i}" for i in range(d))
    core = MLP(d, 1, WIDTH, DEPTH, "tanh", key=jax.random.key(0), dtype=jnp.float32)
    return Network(core, ("u",), names), Layout(names, names, ("u",))


# ---- per-point operators, one family per column ---------------------------------------


def lap_taylor(net, layout, x):
    return Taylor().evaluate(lambda f: f.laplacian("u"), net, layout, x)


def lap_hessian(net, layout, x):
    return jnp.trace(jax.hessian(lambda z: net(z)[0])(x))


def lap_jacfwd_jacrev(net, layout, x):
    return jnp.trace(jax.jacfwd(jax.jacrev(lambda z: net(z)[0]))(x))


def lap_folx(net, layout, x):
    return folx.forward_laplacian(lambda z: net(z)[0])(x).laplacian


def bih_taylor(net, layout, x):
    return Taylor().evaluate(lambda f: f.biharmonic("u"), net, layout, x)


def bih_taylor_partials(net, layout, x):
    def res(f):
        xx, yy = layout.coords
        return (
            f.partial("u", xx, xx, xx, xx)
            + 2 * f.partial("u", xx, xx, yy, yy)
            + f.partial("u", yy, yy, yy, yy)
        )

    return Taylor().evaluate(res, net, layout, x)


def bih_hessian(net, layout, x):
    lap = lambda z: jnp.trace(jax.hessian(lambda w: net(w)[0])(z))
    return jnp.trace(jax.hessian(lap)(x))


def bih_jacfwd_jacrev(net, layout, x):
    f = jax.jacrev(lambda z: net(z)[0])
    t = jax.jacfwd(jax.jacfwd(jax.jacfwd(f)))(x)
    return t[0, 0, 0, 0] + 2 * t[0, 0, 1, 1] + t[1, 1, 1, 1]


def bih_folx(net, layout, x):
    lap = lambda z: folx.forward_laplacian(lambda w: net(w)[0])(z).laplacian
    return folx.forward_laplacian(lap)(x).laplacian


def uxxx_taylor(net, layout, x):
    xx = layout.coords[0]
    return Taylor().evaluate(lambda f: f.partial("u", xx, xx, xx), net, layout, x)


def uxxx_hessian(net, layout, x):
    return jax.hessian(lambda z: jax.grad(lambda w: net(w)[0])(z)[0])(x)[0, 0]


def uxxx_jacfwd_jacrev(net, layout, x):
    return jax.jacfwd(jax.jacfwd(jax.jacrev(lambda z: net(z)[0])))(x)[0, 0, 0]


METHODS = ("taylor", "hessian", "jacfwd(jacrev)", "folx")
OPS = {
    "lap": (lap_taylor, lap_hessian, lap_jacfwd_jacrev, lap_folx),
    "biharmonic": (bih_taylor, bih_hessian, bih_jacfwd_jacrev, bih_folx),
    "u_xxx": (uxxx_taylor, uxxx_hessian, uxxx_jacfwd_jacrev, None),
}
# Timed in the same rounds as the operator's columns, shown as a row of its own.
VARIANTS = {"biharmonic": ("biharmonic as partials", bih_taylor_partials)}


# ---- the jitted functions --------------------------------------------------------------


def forward_fn(op, static, layout):
    def f(params, X):
        net = eqx.combine(params, static)
        return jax.vmap(lambda x: op(net, layout, x))(X)

    return f


def train_fn(op, static, layout):
    def loss(params, X, F):
        net = eqx.combine(params, static)
        lap = jax.vmap(lambda x: op(net, layout, x))(X)
        return jnp.mean((lap - F) ** 2)

    return jax.value_and_grad(loss)


def plain_fn(static):
    """Forward + backward of the network itself: the unit of the (d + 2) bound."""

    def loss(params, X, F):
        net = eqx.combine(params, static)
        return jnp.mean((jax.vmap(lambda x: net(x)[0])(X) - F) ** 2)

    return jax.value_and_grad(loss)


class Cell:
    def __init__(self, fn, args):
        t0 = time.perf_counter()
        self.compiled = jax.jit(fn).lower(*args).compile()
        self.compile_s = time.perf_counter() - t0
        self.mem_mib = self.compiled.memory_analysis().temp_size_in_bytes / 2**20
        self.args = args
        jax.block_until_ready(self.compiled(*args))  # warm-up
        self.wall, self.cpu = [], []

    def run(self):
        w0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(self.compiled(*self.args))
        self.wall.append(1e3 * (time.perf_counter() - w0))
        self.cpu.append(1e3 * (time.process_time() - c0))

    @property
    def ms(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpu)


def measure(case: str, opname: str, d: int, reps: int, skip=()) -> dict[str, Cell | None]:
    net, layout = make_net(d)
    params, static = eqx.partition(net, eqx.is_array)
    X = jax.random.uniform(jax.random.key(1), (BATCH, d), jnp.float32)
    F = jnp.ones((BATCH,), jnp.float32)
    cells: dict[str, Cell | None] = {}
    for name, op in zip(METHODS, OPS[opname], strict=True):
        if op is None or name in skip or (name == "folx" and folx is None):
            cells[name] = None
            continue
        if case == "B":
            cells[name] = Cell(train_fn(op, static, layout), (params, X, F))
        else:
            cells[name] = Cell(forward_fn(op, static, layout), (params, X))
    if case == "B":
        cells["plain"] = Cell(plain_fn(static), (params, X, F))
    if opname in VARIANTS:
        fn = train_fn if case == "B" else forward_fn
        args = (params, X, F) if case == "B" else (params, X)
        cells["variant"] = Cell(fn(VARIANTS[opname][1], static, layout), args)
    for _ in range(reps):
        for c in cells.values():
            if c is not None:
                c.run()
    return cells


# ---- output -------------------------------------------------------------------------


def fmt(c: Cell | None) -> str:
    if c is None:
        return "n/a"
    return f"{c.ms:.1f} ({c.cpu_ms:.1f}) ms / {c.compile_s:.1f} s / {c.mem_mib:.1f} MiB"


def ratio(a: Cell | None, b: Cell | None, attr: str) -> str:
    if a is None or b is None:
        return "n/a"
    return f"{getattr(a, attr) / getattr(b, attr):.2f}"


def table(title: str, rows: list[tuple[str, dict]], bound: bool = False, label="d") -> str:
    others = [m for m in METHODS if m != "taylor"]
    head = [label, *METHODS]
    head += [f"T/{m} time" for m in others] + [f"T/{m} mem" for m in others]
    if bound:
        head += ["(d+2)·(fwd+bwd)", "T/bound"]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, cells in rows:
        t = cells["taylor"]
        row = [name, *(fmt(cells[m]) for m in METHODS)]
        row += [ratio(t, cells[m], "cpu_ms") for m in others]
        row += [ratio(t, cells[m], "mem_mib") for m in others]
        if bound:
            b = (int(name) + 2) * cells["plain"].cpu_ms
            row += [f"{b:.1f} ms", f"{t.cpu_ms / b:.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "Cells: median wall (median CPU) time / compile time / compiled temp memory. T/x:",
        "Taylor's median CPU time, or its memory, over x's.",
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d in {2, 8}, 3 repetitions")
    parser.add_argument("--reps", type=int, default=None, help="timed calls per method")
    parser.add_argument("--dims", type=int, nargs="*", default=None)
    parser.add_argument("--only-c", action="store_true", help="only the (C) operators")
    parser.add_argument(
        "--train-c",
        action="store_true",
        help="also value_and_grad of mean((Δ²u − 1)²) (taylor, as partials, jacfwd(jacrev) only)",
    )
    parser.add_argument(
        "--hessian-max-d", type=int, default=128, help="skip the nested-autodiff columns above"
    )
    args = parser.parse_args()
    dims = args.dims or ([2, 8] if args.quick else [2, 3, 8, 32, 128])
    reps = args.reps or (3 if args.quick else 11)

    print(f"jax {jax.__version__}, folx {FOLX}, {platform.processor() or platform.machine()}")
    print(f"XLA_FLAGS={os.environ['XLA_FLAGS']}; batch {BATCH}, MLP {DEPTH}x{WIDTH} tanh, f32\n")
    out = []
    cases = (("A", "(A) Laplacian alone"), ("B", "(B) value_and_grad of mean((Δu − f)²)"))
    for case, title in cases if not args.only_c else ():
        rows = []
        for d in dims:
            # a few rounds at large d: one nested-autodiff call there takes seconds
            r = reps if d <= 32 else max(3, reps // 3)
            skip = ("hessian", "jacfwd(jacrev)") if d > args.hessian_max_d else ()
            rows.append((str(d), measure(case, "lap", d, r, skip)))
            print(f"  done {case} d={d}", flush=True)
        out.append(table(title, rows, bound=case == "B"))
    rows = []
    for op in ("biharmonic", "u_xxx"):
        cells = measure("C", op, 2, reps)
        rows.append((op, cells))
        if op in VARIANTS:
            rows.append((VARIANTS[op][0], {**cells, "taylor": cells["variant"]}))
    out.append(table("(C) fourth- and third-order operators, d = 2", rows, label="operator"))
    if args.train_c:  # nested hessian and folx training take minutes to compile: left out
        cells = measure("B", "biharmonic", 2, reps, skip=("hessian", "folx"))
        rows = [("biharmonic", cells), (VARIANTS["biharmonic"][0], {**cells, "taylor": cells["variant"]})]
        out.append(table("(C, training) value_and_grad of mean((Δ²u − 1)²), d = 2", rows, label="operator"))
    print("\n\n".join(out))


if __name__ == "__main__":
    main()
