"""The energy natural gradient from the residual Jacobian, solved in point space
(Woodbury) or parameter space, with optional SPRING momentum (Guzmán-Cordero, Dangel,
Goldshlager & Zeinhofer, NeurIPS 2025; Goldshlager, Abrahamsen & Lin 2024).

Stack every term's residual rows with the weight of its mean square,
$$\\hat J = \\Big[\\sqrt{2 w_k / N_k}\\, J_k\\Big]_k \\in \\mathbb{R}^{N \\times P}, \\qquad
\\hat r = \\Big[\\sqrt{2 w_k / N_k}\\, r_k\\Big]_k \\in \\mathbb{R}^{N}$$
(`weighted_rows`), so that $G = \\hat J^\\top \\hat J$ is the Gramian of
`pinnkit.optim.natgrad` and $\\nabla L = \\hat J^\\top \\hat r$. The damped direction has
two equal forms (the push-through identity $(\\hat J^\\top \\hat J + \\lambda I)^{-1}
\\hat J^\\top = \\hat J^\\top (\\hat J \\hat J^\\top + \\lambda I)^{-1}$):
$$d = -(G + \\lambda I_P)^{-1} \\hat J^\\top \\hat r \\;(\\text{gramian: } O(NP^2 + P^3))
\\;=\\; -\\hat J^\\top (\\hat J \\hat J^\\top + \\lambda I_N)^{-1} \\hat r
\\;(\\text{woodbury: } O(N^2 P + N^3)),$$
``solver="auto"`` takes the point-space (woodbury) one when $N < P$; its kernel
$\\hat J\\hat J^\\top$ comes from `gram_rows` (row blocks, exactly symmetric). The damping is the
natural-gradient one, $\\lambda = \\text{damping}\\cdot\\operatorname{tr}(G)/P$, and
$\\operatorname{tr}(G) = \\operatorname{tr}(\\hat J \\hat J^\\top) = \\|\\hat J\\|_F^2$, so both
forms (and `natural_gradient`) use the same $\\lambda$ for the same ``damping``.

SPRING momentum $\\mu$ (``momentum``): the direction is $d_k = -\\phi_k$ with
$\\phi_k = \\arg\\min_\\phi \\|\\hat J\\phi - \\hat r\\|^2 + \\lambda\\|\\phi - \\mu\\phi_{k-1}\\|^2$, i.e.
$$\\phi_k = \\mu\\phi_{k-1} + \\hat J^\\top(\\hat J\\hat J^\\top + \\lambda I)^{-1}
(\\hat r - \\mu \\hat J \\phi_{k-1})
= (G + \\lambda I)^{-1}(\\hat J^\\top \\hat r + \\lambda\\mu\\phi_{k-1});$$
$\\mu = 0$ is the plain damped step. $\\phi_k$ (before the step size) is kept in the state.

Sharding (`natural_gradient_direction` with ``axis_name``, inside `jax.shard_map`): each
device holds its own rows $\\hat J_d$, $\\hat r_d$. The parameter-space solve needs only
$\\sum_d \\hat J_d^\\top \\hat J_d$ and $\\sum_d \\hat J_d^\\top \\hat r_d$ (`psum`). The
point-space matrix $\\hat J \\hat J^\\top$ is *not* a sum of per-device blocks (it has
the cross-device blocks $\\hat J_a \\hat J_b^\\top$), so each device all-gathers the rows
of $\\hat J$ ($N \\times P$, tens of MB for the few-thousand-parameter networks this is
for), forms its own block row $\\hat J_d \\hat J^\\top$, and the block rows are all-gathered
into $K$ ($N \\times N$); every device then solves the same $N \\times N$ Cholesky system,
and $d = -\\mu\\phi_{k-1} - \\sum_d \\hat J_d^\\top z_d$ from its own rows $z_d$ of the
solution (`psum`). 1 or 4 devices give the same direction to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float

SOLVERS = ("auto", "gramian", "woodbury")


def weighted_rows(residuals: Mapping[str, tuple[Array, Array]], weights: Mapping[str, float],
                  n_devices: int = 1) -> tuple[Float[Array, "N P"], Float[Array, " N"]]:
    """$(\\hat J, \\hat r)$ from `Problem.residual_jacobians` output ``{term: (r, dr/dθ)}``
    (shapes ``(n, c)`` and ``(n, c, P)``): rows scaled by $\\sqrt{2 w_k / N_k}$, terms in
    sorted order. $N_k$ = ``n * n_devices`` (inside `shard_map` each device passes its
    own ``n`` points of a term)."""
    jacs, ress = [], []
    for name in sorted(residuals):
        r, jac = residuals[name]
        scale = jnp.sqrt(2.0 * weights[name] / (r.shape[0] * n_devices)).astype(r.dtype)
        jacs.append(scale * jac.reshape(-1, jac.shape[-1]))
        ress.append(scale * r.reshape(-1))
    return jnp.concatenate(jacs), jnp.concatenate(ress)


def gram_rows(jacobian: Float[Array, "N P"], blocks: int = 4) -> Float[Array, "N N"]:
    """$\\hat J \\hat J^\\top$ from ``blocks`` row blocks $J_a$: the blocks $J_a J_b^\\top$,
    $a \\le b$, and their mirror images (a diagonal block's upper triangle mirrored), so
    the result is exactly symmetric and costs $(b + 1)/(2b)$ of the full product. On
    XLA:CPU it is also faster per flop: 1024 x 42k float32 in 0.85 CPU s against 1.97 s
    for ``J @ J.T`` on one core with the ``pinnkit`` command's XLA option, 0.84 against
    1.08 on two (docs/benchmarks.md, "Square features"). Rows that do not split evenly
    make blocks one row apart in size; the plain product when they are fewer than 64 per
    block."""
    n = jacobian.shape[0]
    if n // blocks < 64:
        return jacobian @ jacobian.T
    parts = jnp.array_split(jacobian, blocks)
    grid = [[None] * blocks for _ in range(blocks)]
    for a in range(blocks):
        diag = parts[a] @ parts[a].T
        grid[a][a] = jnp.triu(diag) + jnp.triu(diag, 1).T
        for b in range(a + 1, blocks):
            grid[a][b] = parts[a] @ parts[b].T
            grid[b][a] = grid[a][b].T
    return jnp.block(grid)


def gramian(jacobian: Float[Array, "N P"], blocks: int = 4) -> Float[Array, "P P"]:
    """$J^\\top J$: `gram_rows` of $J^\\top$, copied once into its own ``(P, N)`` array.

    Why: XLA:CPU runs ``J.T @ J`` (a dot contracting the leading axis of both operands)
    at half the rate of ``A @ A.T`` on the transposed copy (the trailing axes), and the
    upper blocks with their mirror images take $(b + 1)/(2b)$ of the products: 4096 x
    2307 float64 rows (the momentum term of ``configs/flows/step.yaml``) in 0.63 CPU s
    against 2.1 s on one core (docs/benchmarks.md, issue 32, session 26). The
    optimisation barrier keeps XLA from folding the transpose back into the dot."""
    return gram_rows(jax.lax.optimization_barrier(jacobian.T), blocks)


def _cho_solve(mat: Array, lam: Array, rhs: Array) -> Array:
    eye = jnp.eye(mat.shape[0], dtype=mat.dtype)
    return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(mat + lam * eye), rhs)


def natural_gradient_direction(
    jacobian: Float[Array, "n P"],
    residual: Float[Array, " n"],
    *,
    damping: float,
    solver: str = "auto",
    momentum: float = 0.0,
    previous: Float[Array, " P"] | None = None,
    axis_name: str | None = None,
) -> tuple[Float[Array, " P"], Float[Array, ""]]:
    """``(d, λ)``: the damped natural-gradient direction (with SPRING momentum when
    ``momentum`` > 0 and ``previous`` $= \\phi_{k-1}$ given) and its damping
    (module docstring). With ``axis_name`` this runs inside `jax.shard_map`, each device
    passing its own rows; without, ``jacobian`` and ``residual`` are all rows."""
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}: actual={solver!r}")
    n_dev = 1 if axis_name is None else jax.lax.axis_size(axis_name)
    total = (lambda x: x) if axis_name is None else partial(jax.lax.psum, axis_name=axis_name)
    n_rows, n_params = jacobian.shape[0] * n_dev, jacobian.shape[1]
    if solver == "auto":
        solver = "woodbury" if n_rows < n_params else "gramian"
    lam = damping * total(jnp.sum(jnp.square(jacobian))) / n_params  # tr(G) = ||J||_F^2
    spring = momentum != 0.0 and previous is not None

    if solver == "gramian":
        rhs = total(jacobian.T @ residual)
        if spring:
            rhs = rhs + (lam * momentum) * previous
        return -_cho_solve(total(gramian(jacobian)), lam, rhs), lam

    rhs = residual - momentum * (jacobian @ previous) if spring else residual
    if axis_name is None:
        z = _cho_solve(gram_rows(jacobian), lam, rhs)
        phi = jacobian.T @ z
    else:  # K has cross-device blocks: gather J's rows, then the block rows of K
        rows = jax.lax.all_gather(jacobian, axis_name, tiled=True)  # (N, P)
        kernel = jax.lax.all_gather(jacobian @ rows.T, axis_name, tiled=True)  # (N, N)
        z = _cho_solve(kernel, lam, jax.lax.all_gather(rhs, axis_name, tiled=True))
        n = jacobian.shape[0]
        mine = jax.lax.dynamic_slice_in_dim(z, jax.lax.axis_index(axis_name) * n, n)
        phi = total(jacobian.T @ mine)
    if spring:
        phi = momentum * previous + phi
    return -phi, lam


class WoodburyState(NamedTuple):
    """``count``: steps; ``step_size``: the last $\\eta$; ``damping``: the last
    $\\lambda$; ``velocity``: $\\phi_k$ of the last step (zeros without momentum)."""

    count: Array
    step_size: Array
    damping: Array
    velocity: Array


def woodbury_natural_gradient(
    damping: float | Array = 1e-10,
    grid: int = 20,
    solver: str = "auto",
    momentum: float = 0.0,
    learning_rate: float | Array | optax.Schedule | None = None,
    mesh: Mesh | None = None,
    axis_name: str = "data",
) -> optax.GradientTransformationExtraArgs:
    """The natural-gradient step $\\theta \\leftarrow \\theta + \\eta d$ from the weighted
    residual Jacobian (module docstring), $\\eta$ the best of the grid
    $\\{1, 2^{-1}, \\dots, 2^{-(\\text{grid}-1)}\\}$ (one loss evaluation each, as
    `natural_gradient`) or the fixed ``learning_rate`` (a number, or an optax schedule
    $\\eta_k$ of the step count $k = 0, 1, \\dots$).

    ``update(grads, state, params, *, jacobian, residual, value_fn, value=None)``:
    ``jacobian`` $\\hat J$ ``(N, P)`` and ``residual`` $\\hat r$ ``(N,)`` (`weighted_rows`;
    columns in `ravel_pytree` order of ``params``), ``value_fn(params) -> L``; ``grads``
    gives only the tree structure ($\\nabla L = \\hat J^\\top \\hat r$). With ``mesh``, the
    direction is computed by `jax.shard_map` over its ``axis_name`` with the rows of
    $\\hat J$, $\\hat r$ sharded (N must divide by the mesh size).

    **Arguments:**
    - `damping`: $\\lambda = \\text{damping}\\cdot\\operatorname{tr}(G)/P$ (default 1e-10).
    - `grid`: line-search grid size, unused with `learning_rate`.
    - `solver`: ``"auto"`` (point space when $N < P$), ``"gramian"`` or ``"woodbury"``.
    - `momentum`: SPRING's $\\mu \\in [0, 1)$ (0: none).
    - `learning_rate`: the fixed step $\\eta$ or a schedule $k \\mapsto \\eta_k$ (None:
      the line search).
    """
    # numbers are checked here; arrays (a training phase's traced inputs) by the phase's config
    if grid < 1 or (isinstance(damping, int | float) and damping < 0):
        raise ValueError(f"need damping >= 0 and grid >= 1: actual=({damping}, {grid})")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}: actual={solver!r}")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"need 0 <= momentum < 1: actual={momentum}")
    if isinstance(learning_rate, int | float) and not learning_rate > 0:
        raise ValueError(f"need learning_rate > 0: actual={learning_rate}")
    def solve(jac, res, previous, axis_name=None):
        return natural_gradient_direction(jac, res, damping=damping, solver=solver,
                                          momentum=momentum, previous=previous, axis_name=axis_name)

    if mesh is not None:
        solve = jax.shard_map(
            partial(solve, axis_name=axis_name), mesh=mesh,
            in_specs=(P(axis_name), P(axis_name), P()), out_specs=(P(), P()),
        )  # fmt: skip

    def init(params) -> WoodburyState:
        flat, _ = ravel_pytree(params)
        zero = jnp.zeros((), flat.dtype)
        return WoodburyState(jnp.zeros((), jnp.int32), zero, zero, jnp.zeros_like(flat))

    def update(grads, state: WoodburyState, params, *, jacobian, residual,
               value_fn: Callable, value=None):
        del grads, value  # the direction comes from (J, r); the grid compares losses only
        flat, unravel = ravel_pytree(params)
        d, lam = solve(jacobian, residual, state.velocity)
        if learning_rate is None:
            etas = 2.0 ** -jnp.arange(grid, dtype=flat.dtype)
            losses = jax.lax.map(lambda eta: value_fn(unravel(flat + eta * d)), etas)
            eta = etas[jnp.argmin(jnp.where(jnp.isfinite(losses), losses, jnp.inf))]
        elif callable(learning_rate):  # a schedule of the steps taken before this one
            eta = jnp.asarray(learning_rate(state.count), flat.dtype)
        else:
            eta = jnp.asarray(learning_rate, flat.dtype)
        velocity = -d if momentum else state.velocity
        new = WoodburyState(optax.safe_int32_increment(state.count), eta, lam.astype(flat.dtype),
                            velocity)
        return unravel(eta * d), new

    return optax.GradientTransformationExtraArgs(init, update)
