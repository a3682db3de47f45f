"""P1 time to accuracy with jinns (the harness's jinns_run.py problem set-up: PINN_MLP,
CubicMeshPDEStatio on the shared points, laplacian_rev, Dirichlet), recipe of its examples:
``jinns.solve`` with ``optax.adam(1e-3)``, one fused ``lax.while_loop``.

The error is evaluated inside that loop by a jinns validation module (its documented hook
for early stopping) every ``--every`` steps; a host callback records the clock and stops
the loop at the threshold or the cap. The evaluation cannot be taken off the clock here;
its cost is measured apart (``eval_each_s``) and subtracted from the recorded times.
Run inside the harness's ``jinns`` venv by scripts/bench_time_to_accuracy.py."""
import time

# ruff: noqa: I001  (tta_common first: it puts the peer harness on sys.path)
import tta_common as T

import jinns_run as J  # noqa: E402  (the harness: sets the one-thread XLA flags)
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jinns  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from importlib.metadata import version  # noqa: E402
from jax.experimental import io_callback  # noqa: E402
from jinns.validation._validation import AbstractValidationModule  # noqa: E402


class RelL2Stop(AbstractValidationModule):
    """Rel. L2 on the harness grid; early stop when the host says so (threshold or cap)."""

    u: eqx.Module
    x: jax.Array
    exact: jax.Array
    host_stop: object = eqx.field(static=True)
    call_every: int = eqx.field(kw_only=True)

    def __call__(self, params):
        pred = jax.vmap(lambda x: self.u(x, params))(self.x)[:, 0]
        err = jnp.linalg.norm(pred - self.exact) / jnp.linalg.norm(self.exact)
        stop = io_callback(self.host_stop, jax.ShapeDtypeStruct((), jnp.bool_), err, ordered=True)
        return self, stop, err, False


def main():
    args = T.parse_args([("--max-steps", int, 200_000, "n_iter of jinns.solve (the cap usually ends it)")])
    data, u, params, loss, _ = J.setup(T.PROBLEM)
    x = jnp.asarray(T.X_EVAL, jnp.float32)
    exact = jnp.asarray(T.U_EXACT[:, 0], jnp.float32)
    # The cost of one evaluation, measured apart (compiled, median of 5).
    ev = jax.jit(lambda p: jnp.linalg.norm(jax.vmap(lambda z: u(z, p))(x)[:, 0] - exact))
    jax.block_until_ready(ev(params))
    costs = []
    for _ in range(5):
        w, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(ev(params))
        costs.append((time.perf_counter() - w, time.process_time() - c))
    each_w, each_c = (float(np.median([c[k] for c in costs])) for k in (0, 1))

    tr = T.Trace("jinns", f"jinns.solve, optax.adam({T.C.LR:g}), full batch", args)

    def host_stop(err):
        n = len(tr.records)  # evaluations so far; jinns validates after step 1, K+1, 2K+1, ...
        wall, cpu = tr.now()
        return np.bool_(tr.log(n * args.every + 1, float(err), wall - (n + 1) * each_w,
                               cpu - (n + 1) * each_c, "adam"))

    val = RelL2Stop(u, x, exact, host_stop, call_every=args.every)
    tr.start()
    out = jinns.solve(init_params=params, data=data, optimizer=optax.adam(T.C.LR), loss=loss,
                      n_iter=args.max_steps, validation=val, verbose=False, ahead_of_time=True)
    jax.block_until_ready(out[0])
    tr.write({"jinns": version("jinns"), "jax": jax.__version__, "equinox": eqx.__version__,
              "optax": optax.__version__}, eval_each_s=each_w, eval_each_cpu_s=each_c)


if __name__ == "__main__":
    main()
