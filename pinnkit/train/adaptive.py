r"""Residual-based adaptive collocation points (training state, checkpointed).

For each adaptive term (default: the ``interior`` terms) the point set
$X \in \mathbb R^{N\times d}$ is part of `TrainState.extra["points"]`. Every ``every``
steps (not at step 0, and only before ``until_step`` when set) a pool of
$M = \text{pool}\cdot N$ candidates is drawn uniformly from the term's domain piece
with the step key, and scored by $|r(x)|$ (the Euclidean norm of the residual vector),
evaluated in shards on every device and gathered, so the
new set is the same on every device and for any device count.

- ``rad`` (Wu et al. 2023, residual-based adaptive distribution): draw $N$ distinct
  candidates with probability $p(x) \propto |r(x)|^k / \overline{|r|^k} + c$
  ($k = 1$, $c = 1$ by default; $c \to \infty$ is uniform sampling, $k\to\infty$ greedy).
- ``rar`` (residual-based adaptive refinement, Lu et al. 2021, in a fixed-size form):
  the oldest ``rar_fraction``·N points of the set are dropped and the
  ``rar_fraction``·N candidates of largest $|r|$ appended, so the shapes never change.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..physics.problem import Problem


class Adaptive(eqx.Module):
    """Static description of the adaptive point sets.

    **Arguments:**
    - `kind`: ``"rad"`` or ``"rar"``.
    - `batch`: global number of points $N$ of each adaptive term.
    - `every`: steps between updates; `pool`: candidates per point.
    - `k`, `c`: RAD density exponent and floor; `rar_fraction`: RAR share replaced.
    - `until_step`: no updates at steps ``>= until_step`` (None: no limit), e.g. the end
      of an Adam phase, so that a following L-BFGS phase sees one fixed objective.
    """

    kind: str = eqx.field(static=True)
    batch: dict[str, int] = eqx.field(static=True)
    every: int = eqx.field(static=True, default=1000)
    pool: int = eqx.field(static=True, default=8)
    k: float = eqx.field(static=True, default=1.0)
    c: float = eqx.field(static=True, default=1.0)
    rar_fraction: float = eqx.field(static=True, default=0.1)
    until_step: int | None = eqx.field(static=True, default=None)

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(sorted(self.batch))

    def due(self, step: jax.Array) -> jax.Array:
        """Whether the sets are redrawn at ``step``: ``0 < step < until_step`` and
        ``step ≡ 0 mod every``."""
        due = (step > 0) & (step % self.every == 0)
        return due if self.until_step is None else due & (step < self.until_step)

    def init(self, key, problem: Problem, dtype) -> dict[str, Float[Array, "n d"]]:
        """Uniform initial sets ``{term: (N, d)}``."""
        d = problem.domain.dim
        out = {}
        for i, name in enumerate(self.terms):
            n, piece = self.batch[name], problem.terms[name].where
            rows = problem.domain.unit_rows(n, piece)
            unit = jax.random.uniform(jax.random.fold_in(key, i), (rows, d), dtype)
            out[name] = problem.domain.points(unit, piece, n)
        return out

    def candidates(self, key, problem: Problem, name: str, dtype) -> Float[Array, "m d"]:
        """$M = \\text{pool}\\cdot N$ uniform candidates on the term's piece."""
        i = self.terms.index(name)
        m, piece = self.pool * self.batch[name], problem.terms[name].where
        rows = problem.domain.unit_rows(m, piece)
        unit = jax.random.uniform(jax.random.fold_in(key, i), (rows, problem.domain.dim), dtype)
        return problem.domain.points(unit, piece, m)

    def select(self, key, points: Float[Array, "n d"], cands: Float[Array, "m d"],
               score: Float[Array, " m"]) -> Float[Array, "n d"]:
        """The new set from the candidates and their scores $|r|$ (see module docstring)."""
        n = points.shape[0]
        if self.kind == "rar":
            m = max(1, round(self.rar_fraction * n))
            _, top = jax.lax.top_k(score, m)
            return jnp.concatenate([points[m:], cands[top]], axis=0)
        rk = score**self.k
        dens = rk / jnp.maximum(jnp.mean(rk), jnp.finfo(rk.dtype).tiny) + self.c
        # A zero residual everywhere with c = 0 would give no distribution: fall back to uniform.
        dens = jnp.where(jnp.sum(dens) > 0, dens, jnp.ones_like(dens))
        idx = jax.random.choice(key, cands.shape[0], (n,), replace=False, p=dens / jnp.sum(dens))
        return cands[idx]
