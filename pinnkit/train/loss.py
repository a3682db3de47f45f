r"""The training objective, `Loss`: one module owns the per-device batch, the residuals,
the weighted sum, the causal weights, the NTK traces and the Gauss-Newton Jacobian.

$$\mathcal L(\theta) = \sum_k \lambda_k L_k, \qquad
L_k = \frac1{N_k}\sum_{i=1}^{N_k} \|r_k(x_i; \theta)\|^2$$

over the problem's terms $k$ with weights $\lambda_k$ (fixed, or the adaptive ones in
the training state) and $N_k$ global points. Every quantity is computed per device on
its own rows inside `jax.shard_map` over the mesh's ``"data"`` axis and reduced there
(``pmean``/``psum``), so values are global and replicated, and the gradient, taken
outside, gets its all-reduce from autodiff (data parallelism). All four
per-device computations go through the one site `Loss._on_devices`.

With a *stochastic* derivative method (``method.stochastic``, e.g. a randomised
Laplacian estimator), the squared residual $\|r\|^2$ is replaced by $r_a\cdot r_b$ with
$r_a, r_b$ the residuals under two independent estimates (``method.at_key`` with keys
folded from the step key): for a residual affine in the estimated operator,
$E[r_a\cdot r_b] = E[r_a]\cdot E[r_b] = \|r\|^2$, where $E\|r_a\|^2$ would add the
estimator's variance. Deterministic methods take the plain path.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float, PRNGKeyArray

from ..diffops import AbstractDiffMethod
from ..optim.woodbury import gramian, weighted_rows
from ..physics.problem import Problem
from .collocation import Sampler
from .weighting import Causal, ntk_traces, per_term_grads

REMAT = ("none", "dots", "full")

# fold_in tags of the two independent estimates of a stochastic method
_ESTIMATE_A, _ESTIMATE_B = 0x45535441, 0x45535442


def _remat_policy(remat: str):
    if remat == "dots":  # keep matmul outputs, recompute the elementwise work
        return jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return None  # "full": keep only the inputs


class Loss(eqx.Module):
    """The run's objective (module docstring); `make_loss` builds it from a `Run`.

    **Arguments:**
    - `problem`, `sampler`, `method`: what is solved, where, and how derivatives are taken.
    - `mesh`: the device mesh (axis ``"data"``); `dtype`: float32 or float64.
    - `static`: the non-trainable half of ``(network, coeffs)`` (`eqx.partition`).
    - `weights`: the fixed term weights $\\lambda_k$ (adaptive runs: their initial values).
    - `causal`: causal time-slice weights of some terms (`Causal`), or None.
    - `ntk_points`: global points per term for the NTK traces.
    - `total_steps`: the run's length (the causal tolerance's schedule).
    - `accumulate`: micro-batches per step (gradient accumulation; 1: none).
    - `remat`: ``"none"``, ``"dots"`` or ``"full"``: `jax.checkpoint` the residuals.
    - `points_held`: the adaptive point sets are not redrawn while this loss is used (a
      phase after their ``until_step``; set by `pinnkit.train.step.make_chunk`).
    """

    problem: Problem
    sampler: Sampler
    method: AbstractDiffMethod
    mesh: Mesh = eqx.field(static=True)
    dtype: Any = eqx.field(static=True)
    static: Any
    weights: dict[str, float] = eqx.field(static=True)
    causal: Causal | None = None
    ntk_points: int = eqx.field(static=True, default=256)
    total_steps: int = eqx.field(static=True, default=1)
    accumulate: int = eqx.field(static=True, default=1)
    remat: str = eqx.field(static=True, default="none")
    points_held: bool = eqx.field(static=True, default=False)

    @property
    def n_devices(self) -> int:
        return self.mesh.size

    # ------------------------------------------------------------------ building blocks

    def _on_devices(self, fn, in_specs, out_specs):
        """``fn`` run per device on the mesh: the one `jax.shard_map` of training."""
        return jax.shard_map(fn, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs)

    def _estimate(self, key, tag: int = _ESTIMATE_A) -> AbstractDiffMethod:
        """The derivative method of this step: a stochastic one drawn at
        ``fold_in(key, tag)``, a deterministic one as it is."""
        return self.method.at_key(jax.random.fold_in(key, tag)) if self.method.stochastic else self.method

    def model(self, params):
        """``(network, coeffs)`` from the trainable ``params``."""
        return eqx.combine(params, self.static)

    def residuals(self, params, batch: dict, method: AbstractDiffMethod | None = None) -> dict:
        """``{term: (n, r)}`` residuals on ``batch`` (``method``: default the run's),
        rematerialised in the backward pass when ``remat`` is set."""
        method = self.method if method is None else method

        def fn(p, b):
            net, coeffs = self.model(p)
            return self.problem.residuals(net, coeffs, b, method)

        if self.remat != "none":
            fn = jax.checkpoint(fn, policy=_remat_policy(self.remat))
        return fn(params, batch)

    def local_batch(self, key, arrays: dict, points: dict, micro) -> dict:
        """This device's batch (inside `shard_map`): the sampler's points for the step
        ``key`` (adaptive sets ``points`` replace the sampler's), rows
        ``[micro·m, (micro+1)·m)`` of each local array when accumulating (``m = n_local
        / accumulate``). The mean over equal micro-batches of their means is the mean."""
        k, sampler = self.accumulate, self.sampler
        arrays = dict(arrays, **points)
        if k > 1:
            arrays = {
                name: jax.lax.dynamic_slice_in_dim(a, micro * (a.shape[0] // k), a.shape[0] // k)
                for name, a in arrays.items()
            }
        # Fresh uniform draws need a different key per micro-batch; fixed points and the
        # Sobol shift (one per step) must not change with k.
        if k > 1 and sampler.resample and sampler.method == "uniform":
            key = jax.random.fold_in(key, micro)
        batch = sampler.local_batch(key, self.problem, arrays, self.n_devices * k, self.dtype)
        return dict(batch, **{name: arrays[name] for name in points})

    def context(self, extra: dict, step) -> dict:
        """What the loss needs from the training state at ``step``: the loss weights (the
        adaptive ones in ``extra["weights"]``, else the fixed `weights`), the causal
        tolerance, and the adaptive point sets (``extra["points"]``)."""
        tol = self.causal.tol_at(step, self.total_steps) if self.causal is not None else jnp.zeros(())
        return {"weights": extra.get("weights", self.weights), "tol": tol,
                "points": extra.get("points", {})}

    # -------------------------------------------------------------------- the loss

    def _terms_per_device(self, params, key, arrays, points, micro, tol):
        batch = self.local_batch(key, arrays, points, micro)
        res = self.residuals(params, batch, self._estimate(key))
        res_b = None  # a stochastic method's second, independent estimate
        if self.method.stochastic:
            res_b = self.residuals(params, batch, self._estimate(key, _ESTIMATE_B))
        terms, weights = {}, {}
        for name, r in res.items():
            r2 = jnp.sum(r**2, axis=-1) if res_b is None else jnp.sum(r * res_b[name], axis=-1)
            if self.causal is not None and name in self.causal.terms:
                t = batch[name][:, self.causal.t_axis]
                terms[name], weights[name] = self.causal.reduce(r2, t, tol)
            else:
                terms[name] = jax.lax.pmean(jnp.mean(r2), "data")
        return terms, weights

    def __call__(self, params, key: PRNGKeyArray, arrays: dict, micro=0, ctx: dict | None = None
                 ) -> tuple[Float[Array, ""], dict]:
        """``(total, aux)``: the global weighted loss of micro-batch ``micro`` (``0 <= micro
        < accumulate``; the whole batch when ``accumulate == 1``); ``aux["terms"]`` holds
        the per-term losses, ``aux["causal"]`` the slice weights of each causal term (if
        any). ``arrays``: the sampler's arrays sharded ``P("data")``; ``ctx``: `context`
        (default: step 0 without training state)."""
        ctx = ctx if ctx is not None else self.context({}, 0)
        sharded = self._on_devices(lambda *a: self._terms_per_device(*a),
                                   (P(), P(), P("data"), P("data"), P(), P()), P())
        terms, weights = sharded(params, key, arrays, ctx["points"], jnp.asarray(micro, jnp.int32),
                                 ctx["tol"])
        lam = ctx["weights"]
        total = sum(lam[k] * terms[k] for k in sorted(terms))
        aux = {"terms": terms, "causal": weights} if weights else {"terms": terms}
        return total, aux

    def _mean_over_micro(self, f, params, key, arrays, ctx):
        # Micro-batches one after another in a scan: one micro-batch's activations alive
        # at a time, so memory follows the micro-batch, not the batch.
        shapes = jax.eval_shape(f, params, key, arrays, 0, ctx)
        zero = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

        def body(acc, j):
            return jax.tree_util.tree_map(jnp.add, acc, f(params, key, arrays, j, ctx)), None

        acc, _ = jax.lax.scan(body, zero, jnp.arange(self.accumulate))
        return jax.tree_util.tree_map(lambda x: x / self.accumulate, acc)

    def value_and_grad(self, params, key, arrays, ctx):
        """``((total, aux), grads)`` of the loss averaged over the micro-batches."""
        vg = jax.value_and_grad(lambda *a: self(*a), has_aux=True)
        if self.accumulate == 1:
            return vg(params, key, arrays, 0, ctx)
        return self._mean_over_micro(vg, params, key, arrays, ctx)

    def term_grads(self, params, key, arrays, ctx) -> dict[str, Any]:
        """``{term: ∇_θ L_term}`` of the whole batch (`pinnkit.train.weighting.per_term_grads`;
        the gradient-norm weights): with micro-batches, the mean of theirs, one
        micro-batch alive at a time, so the weights do not depend on ``accumulate``."""
        def f(p, key, arrays, micro, ctx):
            return per_term_grads(lambda q: self(q, key, arrays, micro, ctx)[1]["terms"], p)

        if self.accumulate == 1:
            return f(params, key, arrays, 0, ctx)
        return self._mean_over_micro(f, params, key, arrays, ctx)

    def value(self, params, key, arrays, ctx) -> Float[Array, ""]:
        """The total loss alone (line searches)."""
        if self.accumulate == 1:
            return self(params, key, arrays, 0, ctx)[0]
        return self._mean_over_micro(lambda *a: self(*a)[0], params, key, arrays, ctx)

    def fixed(self, ctx) -> bool:
        """Whether the loss is one function of the parameters at every step while ``ctx``'s
        weights are: fixed points (no redraws; adaptive sets only if `points_held`), a
        deterministic derivative method, no causal schedule. Static (decided when tracing)."""
        return (not self.sampler.resample and not self.method.stochastic and self.causal is None
                and (self.points_held or not ctx["points"]))

    # --------------------------------------------------------- second-order quantities

    def gauss_newton(self, params, key, arrays, points: dict | None = None
                     ) -> tuple[Array, dict, Float[Array, "P P"], Any]:
        """``(total, terms, gramian, grads)`` on the step's batch (the adaptive point sets
        ``points``, ``ctx["points"]``, in place of the sampler's) with the fixed weights:
        the loss and its terms as `__call__` gives them, the Gauss-Newton matrix
        $G = 2\\sum_k \\frac{\\lambda_k}{N_k} J_k^\\top J_k$ over the flattened parameters
        (`jax.flatten_util.ravel_pytree` order, ``(P, P)``) and $\\nabla L = 2\\sum_k
        \\frac{\\lambda_k}{N_k} J_k^\\top r_k$ as a tree of ``params``. Per device: the
        Jacobians of its own points' residuals (`Problem.residual_jacobians`), reduced
        to $J^\\top J$, $J^\\top r$ and `psum`-ed. Needs ``accumulate == 1``."""
        n_dev = self.n_devices

        def per_device(params, key, arrays, points):
            flat, unravel = ravel_pytree(params)
            # Differentiate w.r.t. a per-device copy: the transpose of replicated -> per-device
            # is a psum, which would sum the devices' per-point Jacobians into each other.
            flat = jax.lax.pcast(flat, "data", to="varying")
            batch = self.local_batch(key, arrays, points, 0)
            res = self.problem.residual_jacobians(lambda th: self.model(unravel(th)), flat, batch,
                                                  self._estimate(key))
            gram = jnp.zeros((flat.shape[0],) * 2, flat.dtype)
            grad = jnp.zeros_like(flat)
            sums = {}
            for name in sorted(res):
                r, jac = res[name]  # (n, r), (n, r, P)
                c = 2.0 * self.weights[name] / (r.shape[0] * n_dev)  # w_k / N_k, N_k global
                jac = jac.reshape(-1, flat.shape[0])
                gram = gram + c * gramian(jac)  # by blocks, exactly symmetric
                grad = grad + c * (jac.T @ r.reshape(-1))
                sums[name] = jnp.sum(jnp.square(r)) / (r.shape[0] * n_dev)
            return jax.lax.psum((gram, grad, sums), "data")

        gram, grad, terms = self._on_devices(per_device, (P(), P(), P("data"), P("data")), P())(
            params, key, arrays, points or {})
        total = sum(self.weights[k] * terms[k] for k in sorted(terms))
        return total, terms, gram, ravel_pytree(params)[1](grad)

    def residual_rows(self, params, key, arrays, points: dict | None = None
                      ) -> tuple[Array, dict, Float[Array, "N P"], Float[Array, " N"]]:
        """``(total, terms, J, r)`` on the step's batch (``points`` as in `gauss_newton`)
        with the fixed weights: the loss
        and its terms as `gauss_newton` gives them, and the weighted residual rows
        $\\hat J = [\\sqrt{2\\lambda_k/N_k}\\,J_k]_k$ ``(N, P)``, $\\hat r$ ``(N,)``
        (`pinnkit.optim.weighted_rows`), so that $\\hat J^\\top \\hat J$ is the
        Gramian and $\\hat J^\\top \\hat r = \\nabla L$: what the point-space
        (Woodbury) natural gradient solves with. The rows stay sharded over ``"data"``
        (each device's own points, terms in sorted order within each device's block).
        Needs ``accumulate == 1``."""
        n_dev = self.n_devices

        def per_device(params, key, arrays, points):
            flat, unravel = ravel_pytree(params)
            flat = jax.lax.pcast(flat, "data", to="varying")  # as in gauss_newton
            batch = self.local_batch(key, arrays, points, 0)
            res = self.problem.residual_jacobians(lambda th: self.model(unravel(th)), flat, batch,
                                                  self._estimate(key))
            jac, r = weighted_rows(res, self.weights, n_dev)
            sums = {k: jnp.sum(jnp.square(v[0])) / (v[0].shape[0] * n_dev) for k, v in res.items()}
            return jac, r, jax.lax.psum(sums, "data")

        jac, r, terms = self._on_devices(per_device, (P(), P(), P("data"), P("data")),
                                         (P("data"), P("data"), P()))(params, key, arrays, points or {})
        total = sum(self.weights[k] * terms[k] for k in sorted(terms))
        return total, terms, jac, r

    def ntk_traces(self, params, key, arrays, points, tol) -> dict[str, Float[Array, ""]]:
        """Mean NTK trace of each term (`pinnkit.train.weighting.ntk_traces`) on every
        s-th point of the step's batch, s = N // ntk_points: the same global subset for
        any device count whenever s divides the per-device batch, and for any number of
        micro-batches (the subset is taken from all of them, in order)."""
        n_dev = self.n_devices

        def per_device(params, key, arrays, points, tol):
            micro = [self.local_batch(key, arrays, points, jnp.asarray(j, jnp.int32))
                     for j in range(self.accumulate)]
            batch = micro[0] if len(micro) == 1 else {
                k: jnp.concatenate([b[k] for b in micro]) for k in micro[0]}
            sub = {k: v[:: max(1, v.shape[0] * n_dev // self.ntk_points)] for k, v in batch.items()}
            counts = {k: v.shape[0] * n_dev for k, v in sub.items()}
            return ntk_traces(lambda p: self.residuals(p, sub, self._estimate(key)), params, counts)

        specs = (P(), P(), P("data"), P("data"), P())
        return self._on_devices(per_device, specs, P())(params, key, arrays, points, tol)

    def residual_norms(self, params, name: str, points: Float[Array, "n d"], key) -> Float[Array, " n"]:
        """$|r(x)|$ (Euclidean norm of the residual vector) of term ``name`` at
        ``points``, sharded over the devices (adaptive sampling's scores)."""

        def per_device(params, pts):
            sub = self.problem.without([k for k in self.problem.terms if k != name])
            net, coeffs = self.model(params)
            r = sub.residuals(net, coeffs, {name: pts}, self._estimate(key))[name]
            return jnp.sqrt(jnp.sum(r**2, axis=-1))

        return self._on_devices(per_device, (P(), P("data")), P("data"))(params, points)


def make_loss(run, static, *, accumulate: int = 1, remat: str = "none") -> Loss:
    """The `Loss` of a `pinnkit.train.spec.Run` whose trainable half is split off as
    ``static`` (`pinnkit.train.step.split_model`)."""
    if remat not in REMAT:
        from ..errors import ConfigError

        raise ConfigError(f"remat={remat!r}: expected one of {', '.join(REMAT)}")
    w = run.weighting
    return Loss(run.problem, run.sampler, run.method, run.mesh, run.dtype, static, run.weights,
                causal=w.causal if w is not None else None,
                ntk_points=w.ntk_points if w is not None else 256,
                total_steps=run.total_steps, accumulate=accumulate, remat=remat)
