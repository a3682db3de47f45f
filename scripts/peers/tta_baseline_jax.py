"""P1 time to accuracy, plain JAX + Equinox + optax (the harness's baseline_jax.py model and
loss: ``vmap(jax.hessian)`` Laplacian, jitted step, Python loop), recipe Adam lr 1e-3.
Run inside the harness's ``base`` venv by scripts/bench_time_to_accuracy.py."""
# ruff: noqa: I001  (tta_common first: it puts the peer harness on sys.path)
import tta_common as T

import baseline_jax as B  # noqa: E402  (the harness: sets the one-thread XLA flags)
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402


def main():
    args = T.parse_args([("--max-steps", int, 10**7, "recipe length (the cap usually ends it)")])
    net = B.build_mlp(T.PROBLEM)
    loss = B.make_loss(T.PROBLEM, T.C.points(T.PROBLEM))
    opt = optax.adam(T.C.LR)
    state = opt.init(eqx.filter(net, eqx.is_inexact_array))

    @eqx.filter_jit
    def step(net, state):
        val, g = eqx.filter_value_and_grad(loss)(net)
        upd, state = opt.update(g, state, eqx.filter(net, eqx.is_inexact_array))
        return eqx.apply_updates(net, upd), state, val

    predict = eqx.filter_jit(jax.vmap(lambda n, x: n(x), in_axes=(None, 0)))
    tr = T.Trace("plain JAX (baseline)", f"Adam lr {T.C.LR:g}, full batch", args)
    for i in range(1, args.max_steps + 1):
        net, state, _ = step(net, state)
        if (i % args.every == 0 or i == args.max_steps) and tr.record(
                i, lambda X, net=net: np.asarray(predict(net, jnp.asarray(X, jnp.float32))), "adam"):
            break
    tr.write({"jax": jax.__version__, "equinox": eqx.__version__, "optax": optax.__version__})


if __name__ == "__main__":
    main()
