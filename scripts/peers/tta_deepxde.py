"""P1 time to accuracy with DeepXDE (the harness's deepxde_run.py problem set-up: Rectangle,
PDE with the shared points as anchors, PointSetBC, FNN with the shared initial weights),
backend from DDE_BACKEND (pytorch | jax). Recipe of DeepXDE's Poisson examples
(examples/pinn_forward/Poisson_Lshape.py): ``model.compile("adam", lr=1e-3)``,
``model.train(iterations=N)``, then ``model.compile("L-BFGS")``, ``model.train()`` with the
default L-BFGS options (``set_LBFGS_options()``: history 100, gtol 1e-8, ftol 0, strong
Wolfe line search). The JAX backend has no L-BFGS, so there it is Adam only, to the cap.

The error is evaluated by a callback every ``--every`` Adam steps; in L-BFGS DeepXDE calls
back once per ``iter_per_step`` iterations (1000 by default), set here to ``--every`` so
that the trace has the same resolution (torch's L-BFGS keeps its history across calls).
Run inside the harness's ``deepxde`` venv by scripts/bench_time_to_accuracy.py."""
# ruff: noqa: I001  (tta_common first: it puts the peer harness on sys.path)
import tta_common as T

import deepxde_run as D  # noqa: E402  (the harness: imports deepxde, one thread)
from importlib.metadata import version  # noqa: E402

dde = D.dde


class EvalEvery(dde.callbacks.Callback):
    """Evaluates every ``every`` steps (every call in L-BFGS) and stops the model."""

    def __init__(self, trace, every, phase):
        super().__init__()
        self.trace, self.every, self.phase = trace, every, phase

    def on_batch_end(self):
        step = self.model.train_state.step
        if self.phase == "lbfgs" or step % self.every == 0:
            if self.trace.record(step, self.model.predict, self.phase):
                self.model.stop_training = True


def main():
    args = T.parse_args([("--adam-steps", int, 2000, "Adam iterations before L-BFGS (pytorch)"),
                         ("--max-steps", int, 10**6, "Adam iterations on the JAX backend")])
    dde.config.set_default_float("float32")
    dde.config.set_random_seed(0)
    torch = D.BK == "pytorch"
    if torch:
        D.torch.set_num_threads(1)
    data, net = D.build(T.PROBLEM)
    ws = T.C.init_weights(T.PROBLEM)
    if torch:
        D.load_weights_torch(net, ws)
    model = dde.Model(data, net)
    model.compile("adam", lr=T.C.LR)
    if not torch:
        D.load_weights_jax(model, ws)
    adam = args.adam_steps if torch else args.max_steps
    recipe = (f"Adam lr {T.C.LR:g} x {adam} -> L-BFGS (DeepXDE defaults)" if torch
              else f"Adam lr {T.C.LR:g} (no L-BFGS on the JAX backend)")
    tr = T.Trace(f"DeepXDE ({D.BK})", recipe, args)
    model.train(iterations=adam, display_every=1000, callbacks=[EvalEvery(tr, args.every, "adam")],
                verbose=0)
    if torch and tr.stopped == "end of recipe":
        dde.optimizers.set_LBFGS_options()  # the defaults, then the callback cadence
        opts = dde.optimizers.config.LBFGS_options
        opts["iter_per_step"] = args.every
        opts["fun_per_step"] = opts["maxfun"] * args.every // opts["maxiter"]
        model.compile("L-BFGS")
        model.train(display_every=1000, callbacks=[EvalEvery(tr, args.every, "lbfgs")], verbose=0)
    versions = {"deepxde": version("deepxde"), "backend": D.BK}
    versions.update({"torch": D.torch.__version__} if torch else
                    {"jax": D.jax.__version__, "flax": version("flax"), "optax": version("optax")})
    tr.write(versions)


if __name__ == "__main__":
    main()
