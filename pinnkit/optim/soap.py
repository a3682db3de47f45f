"""SOAP: Adam in the eigenbasis of Shampoo's preconditioner (Vyas et al. 2024), as an optax
`GradientTransformation`.

For a matrix parameter $W \\in \\mathbb{R}^{m \\times n}$ with gradient $G$, SOAP keeps Shampoo's
Kronecker factors $L \\leftarrow \\beta_s L + (1-\\beta_s) G G^\\top$,
$R \\leftarrow \\beta_s R + (1-\\beta_s) G^\\top G$ and their eigenbases $Q_L, Q_R$, and runs
Adam on the rotated gradient $G' = Q_L^\\top G Q_R$:

- $m \\leftarrow \\beta_1 m + (1-\\beta_1) G$ (kept in the original basis, rotated when used),
  $v \\leftarrow \\beta_2 v + (1-\\beta_2) G'^{\\odot 2}$ (kept in the rotated basis);
- update $= Q_L \\big(\\hat m' / (\\sqrt{\\hat v} + \\epsilon)\\big) Q_R^\\top$ with
  $\\hat m' = Q_L^\\top m Q_R / (1-\\beta_1^t)$, $\\hat v = v / (1-\\beta_2^t)$ (optax's
  `scale_by_adam` bias correction).

The eigenbases are computed by `jnp.linalg.eigh` at the first step and refreshed every
``precondition_frequency`` steps by one step of power iteration and a QR decomposition,
$Q \\leftarrow \\operatorname{qr}(P Q)$, after sorting $Q$'s columns by the estimated
eigenvalues $\\operatorname{diag}(Q^\\top P Q)$ and permuting $v$ the same way (the paper's
Algorithm 4). Sides longer than ``max_precond_dim`` keep the identity, and so do 0-D and
1-D parameters (biases, gates, coefficients): for those SOAP *is* Adam, which is also
what it reduces to whenever $Q_L, Q_R$ are identities. Parameters of more than two
dimensions are not preconditioned either (pinnkit's layers are matrices).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array


class ScaleBySoapState(NamedTuple):
    """``count``: steps taken; per parameter leaf (flattened order): Adam moments ``mu``
    (original basis) and ``nu`` (rotated basis), Shampoo factors ``left``/``right`` and
    their eigenbases ``q_left``/``q_right`` (empty ``(0, 0)`` arrays for an unrotated side)."""

    count: Array
    mu: list
    nu: list
    left: list
    right: list
    q_left: list
    q_right: list


def _sides(p: Array, max_dim: int) -> tuple[bool, bool]:
    if p.ndim != 2:
        return False, False
    return p.shape[0] <= max_dim, p.shape[1] <= max_dim


def _empty(dtype) -> Array:
    return jnp.zeros((0, 0), dtype)


def _eigvecs(a: Array) -> Array:
    """Eigenvectors of a symmetric matrix, by decreasing eigenvalue."""
    _, q = jnp.linalg.eigh(a)
    return q[:, ::-1]


def _refresh(a: Array, q: Array, v: Array, axis: int) -> tuple[Array, Array]:
    """One power-iteration + QR step towards the eigenbasis of ``a`` (Algorithm 4), with
    ``v``'s ``axis`` permuted like ``q``'s columns."""
    est = jnp.einsum("ij,ik,kj->j", q, a, q)  # diag(Q^T A Q)
    order = jnp.argsort(-est)
    q, v = q[:, order], jnp.take(v, order, axis=axis)
    q, _ = jnp.linalg.qr(a @ q)
    return q, v


def scale_by_soap(
    b1: float = 0.9,
    b2: float = 0.999,
    eps: float = 1e-8,
    precondition_frequency: int = 10,
    shampoo_beta: float | None = None,
    max_precond_dim: int = 4096,
) -> optax.GradientTransformation:
    """SOAP's update direction (module docstring), to be scaled by $-\\text{lr}$.

    **Arguments:**
    - `b1`, `b2`, `eps`: Adam's (defaults as `optax.adam`).
    - `precondition_frequency`: steps between eigenbasis refreshes (paper: 10).
    - `shampoo_beta`: decay of the Shampoo factors; ``None``: ``b2``.
    - `max_precond_dim`: sides longer than this are not rotated.
    """
    if precondition_frequency < 1:
        raise ValueError(f"precondition_frequency must be >= 1: actual={precondition_frequency}")
    bs = b2 if shampoo_beta is None else shampoo_beta

    def init(params):
        leaves = jax.tree_util.tree_leaves(params)
        sides = [_sides(p, max_precond_dim) for p in leaves]
        sq = lambda p, n, on: jnp.zeros((n, n), p.dtype) if on else _empty(p.dtype)  # noqa: E731
        left = [sq(p, p.shape[0] if p.ndim == 2 else 0, s[0]) for p, s in zip(leaves, sides, strict=True)]
        right = [sq(p, p.shape[1] if p.ndim == 2 else 0, s[1]) for p, s in zip(leaves, sides, strict=True)]
        return ScaleBySoapState(
            count=jnp.zeros((), jnp.int32),
            mu=[jnp.zeros_like(p) for p in leaves],
            nu=[jnp.zeros_like(p) for p in leaves],
            left=left, right=right, q_left=list(left), q_right=list(right),
        )  # fmt: skip

    def update_leaf(g, mu, nu, left, right, ql, qr, count):
        on_l, on_r = left.shape[0] > 0, right.shape[0] > 0
        if on_l:
            left = bs * left + (1 - bs) * (g @ g.T)
        if on_r:
            right = bs * right + (1 - bs) * (g.T @ g)
        first = count == 1
        refresh = (count % precondition_frequency) == 0
        if on_l:
            ql, nu = jax.lax.cond(
                first, lambda: (_eigvecs(left), nu),
                lambda: jax.lax.cond(refresh, lambda: _refresh(left, ql, nu, 0), lambda: (ql, nu)),
            )  # fmt: skip
        if on_r:
            qr, nu = jax.lax.cond(
                first, lambda: (_eigvecs(right), nu),
                lambda: jax.lax.cond(refresh, lambda: _refresh(right, qr, nu, 1), lambda: (qr, nu)),
            )  # fmt: skip

        def rot(x):  # Q_L^T x Q_R
            x = ql.T @ x if on_l else x
            return x @ qr if on_r else x

        def back(x):  # Q_L x Q_R^T
            x = ql @ x if on_l else x
            return x @ qr.T if on_r else x

        mu = b1 * mu + (1 - b1) * g
        nu = b2 * nu + (1 - b2) * jnp.square(rot(g))
        mu_hat = rot(mu) / (1 - b1**count).astype(g.dtype)
        nu_hat = nu / (1 - b2**count).astype(g.dtype)
        upd = back(mu_hat / (jnp.sqrt(nu_hat) + eps))
        return upd, mu, nu, left, right, ql, qr

    def update(updates, state, params=None):
        del params
        leaves, treedef = jax.tree_util.tree_flatten(updates)
        count = optax.safe_int32_increment(state.count)
        out = [
            update_leaf(g, *args, count)
            for g, *args in zip(leaves, state.mu, state.nu, state.left, state.right, state.q_left,
                                state.q_right, strict=True)
        ]
        cols = list(zip(*out, strict=True)) if out else [[]] * 7
        new = ScaleBySoapState(count, *[list(c) for c in cols[1:]])
        return jax.tree_util.tree_unflatten(treedef, list(cols[0])), new

    return optax.GradientTransformation(init, update)


def soap(learning_rate: optax.ScalarOrSchedule, **kwargs) -> optax.GradientTransformation:
    """`scale_by_soap` followed by $-\\text{lr}$ (a number or an optax schedule)."""
    return optax.chain(scale_by_soap(**kwargs), optax.scale_by_learning_rate(learning_rate))
