r"""Loss balancing: adaptive per-term weights and causal (temporal) residual weights.

The total loss is $\mathcal L = \sum_i \lambda_i L_i$ over the problem's terms.

- ``fixed``: $\lambda_i$ from ``weighting.weights`` (missing terms weigh 1).
- ``grad_norm`` (Wang et al. 2023, "An expert's guide to training PINNs"): every
  ``update_every`` steps $\hat\lambda_i = \sum_j \|\nabla_\theta L_j\| / \|\nabla_\theta
  L_i\|$, then $\lambda_i \leftarrow m\,\lambda_i + (1 - m)\,\hat\lambda_i$ (``momentum``
  $m$). After an update with $m = 0$ every weighted gradient norm
  $\lambda_i\|\nabla L_i\|$ equals $\sum_j \|\nabla L_j\|$.
- ``ntk`` (Wang, Yu & Perdikaris 2022): $\hat\lambda_i = \sum_j \operatorname{tr} K_j /
  \operatorname{tr} K_i$ with $\operatorname{tr} K_i = \frac1{N_i}\sum_{x}
  \|\partial_\theta r_i(x)\|^2$ the (mean) trace of term $i$'s neural-tangent-kernel
  block, on the first ``ntk_points`` points of its batch; same moving average.

The weights $\lambda$ are training state (`TrainState.extra["weights"]`, checkpointed);
they are frozen during L-BFGS phases (a changing objective breaks its curvature pairs).
Everything is computed from ``pmean``/``psum``-reduced quantities, so the weights are
the same on every device and for any device count.

Causal training (Wang, Sankaran & Perdikaris 2022): for the ``interior`` terms of a
problem on a `SpaceTime` domain, the points are binned into ``chunks`` time slices
$[t_{k}, t_{k+1})$ with per-slice mean squares $L^{(k)}$, and the term's loss is
$\frac1{M}\sum_k w_k L^{(k)}$, $w_k = \exp(-\varepsilon\sum_{l<k} L^{(l)})$ with
`jax.lax.stop_gradient`: a late slice only counts once the earlier ones are solved.
$\varepsilon$ (``tol``) may grow geometrically to ``final_tol`` over training.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

KINDS = ("fixed", "grad_norm", "ntk")


class Causal(eqx.Module):
    """Causal weights for the residuals of ``terms`` (static description).

    **Arguments:**
    - `terms`: names of the terms weighted causally (the ``interior`` terms).
    - `t_axis`: column of ``t`` in a point; `t0`, `t1`: the time interval.
    - `chunks`: number $M$ of time slices.
    - `tol`: $\\varepsilon$ at step 0; `final_tol`: at the last step (geometric growth;
      ``None``: constant).
    """

    terms: tuple[str, ...] = eqx.field(static=True)
    t_axis: int = eqx.field(static=True)
    t0: float = eqx.field(static=True)
    t1: float = eqx.field(static=True)
    chunks: int = eqx.field(static=True)
    tol: float = eqx.field(static=True)
    final_tol: float | None = eqx.field(static=True, default=None)

    def tol_at(self, step, total: int) -> Float[Array, ""]:
        """$\\varepsilon(s) = \\varepsilon_0 (\\varepsilon_1/\\varepsilon_0)^{s/S}$ (or $\\varepsilon_0$)."""
        if self.final_tol is None or total <= 1:
            return jnp.asarray(self.tol, jnp.float32)
        frac = jnp.minimum(jnp.asarray(step, jnp.float32) / (total - 1), 1.0)
        return self.tol * (self.final_tol / self.tol) ** frac

    def reduce(self, r2: Float[Array, " n"], t: Float[Array, " n"], tol) -> tuple[Array, Array]:
        """``(loss, w)``: the causally weighted mean square and the slice weights ``(M,)``.

        Call inside `shard_map`: the per-slice sums and counts are ``psum``-ed over
        ``"data"``, so ``loss`` and ``w`` are global (replicated) values.
        """
        m = self.chunks
        pos = (t - self.t0) / (self.t1 - self.t0) * m
        idx = jnp.clip(jnp.floor(pos), 0, m - 1).astype(jnp.int32)
        sums = jax.lax.psum(jax.ops.segment_sum(r2, idx, num_segments=m), "data")
        counts = jax.lax.psum(jax.ops.segment_sum(jnp.ones_like(r2), idx, num_segments=m), "data")
        per_slice = sums / jnp.maximum(counts, 1.0)
        before = jnp.cumsum(per_slice) - per_slice
        w = jax.lax.stop_gradient(jnp.exp(-tol.astype(r2.dtype) * before))
        return jnp.mean(w * per_slice), w


class Weighting(eqx.Module):
    """How the terms' losses are combined (static; the weights themselves are state).

    **Arguments:**
    - `kind`: ``"fixed"``, ``"grad_norm"`` or ``"ntk"``.
    - `initial`: $\\lambda_i$ at step 0 (the fixed weights), one per term.
    - `update_every`: steps between adaptive updates (step 0 included).
    - `momentum`: moving-average factor $m \\in [0, 1)$.
    - `ntk_points`: global points per term used for the NTK traces.
    - `causal`: a `Causal`, or ``None``.
    """

    kind: str = eqx.field(static=True)
    initial: dict[str, float] = eqx.field(static=True)
    update_every: int = eqx.field(static=True, default=1000)
    momentum: float = eqx.field(static=True, default=0.9)
    ntk_points: int = eqx.field(static=True, default=256)
    causal: Causal | None = None

    @property
    def adaptive(self) -> bool:
        return self.kind != "fixed"

    def init(self, dtype) -> dict[str, Array]:
        """The weights' state at step 0: ``{term: λ}``."""
        return {k: jnp.asarray(v, dtype) for k, v in sorted(self.initial.items())}

    def target(self, stats: dict[str, Array]) -> dict[str, Array]:
        """$\\hat\\lambda_i = \\sum_j s_j / s_i$ for per-term statistics $s$ (gradient
        norms or NTK traces); a term with $s_i = 0$ keeps weight 1."""
        total = sum(stats[k] for k in sorted(stats))
        return {k: jnp.where(s > 0, total / jnp.where(s > 0, s, 1.0), 1.0) for k, s in stats.items()}

    def smooth(self, old: dict[str, Array], new: dict[str, Array]) -> dict[str, Array]:
        m = self.momentum
        return {k: (m * old[k] + (1.0 - m) * new[k]).astype(old[k].dtype) for k in old}


def grad_norms(grads_per_term: dict[str, object]) -> dict[str, Array]:
    """Global L2 norm $\\|\\nabla_\\theta L_i\\|$ of each term's gradient pytree."""
    return {k: optax.tree.norm(g) for k, g in grads_per_term.items()}


def per_term_grads(terms_fn, params) -> dict[str, object]:
    """``{term: ∇_θ L_term}`` for ``terms_fn(params) -> {term: scalar}``: one forward
    pass, one reverse pass per term (`jax.vjp`)."""
    terms, vjp = jax.vjp(terms_fn, params)
    out = {}
    for k in sorted(terms):
        cot = {j: jnp.zeros_like(v) if j != k else jnp.ones_like(v) for j, v in terms.items()}
        (out[k],) = vjp(cot)
    return out


def ntk_traces(residual_fn, params, n_global: dict[str, int]) -> dict[str, Float[Array, ""]]:
    """Mean NTK diagonal $\\operatorname{tr} K_i = \\frac1{N_i}\\sum_x \\|\\partial_\\theta r_i(x)\\|^2$
    of each term, inside `shard_map`: ``residual_fn(params) -> {term: (n_local, r)}`` on
    this device's points; the squared Jacobian norms are ``psum``-ed over devices and
    divided by the global point counts ``n_global`` ($N_i$)."""
    # Varying copies of the replicated parameters: otherwise the transpose of the
    # implicit broadcast would psum the Jacobian rows over devices before squaring.
    params = jax.tree_util.tree_map(lambda x: jax.lax.pcast(x, "data", to="varying"), params)
    jac = jax.jacrev(residual_fn)(params)
    sq = {k: sum(jnp.sum(j**2) for j in jax.tree_util.tree_leaves(jac[k])) for k in jac}
    return {k: jax.lax.psum(v, "data") / n_global[k] for k, v in sq.items()}
