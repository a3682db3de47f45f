r"""Stochastic Taylor estimators: unbiased estimates of the Laplacian, of a general
second-order operator $\sum_{ij} a_{ij} \partial_{ij}$ and of the bi-Laplacian, at a cost
that does not grow with the dimension.

The exact engine (`Taylor`) carries one first-order row per coordinate, $d + 2$ rows for a
Laplacian in $d$ dimensions. An estimator instead pushes a few random *directions*
$v_1..v_K \in \mathbb{R}^d$ through the same jet algebra: the input's first-order rows are
the $v_j$ (not unit vectors), so the jet's rows are directional derivatives
$D^k u[v, \dots, v]$ (Taylor mode along $v$; the rows of the other requests, values,
gradients, $u_t$, stay exact in the same pass). Per operator, over the axes $S$,
$k = |S|$:

- $\Delta_S u$. `STDE` (Shi et al. 2024; dense random jets, Hutchinson's estimator):
  $\frac1K \sum_j D^2u[v_j, v_j]$ with $v_j$ Rademacher on $S$. `SDGD` (Hu et al. 2024;
  sampled dimensions, STDE's sparse jets): $\frac{k}{B} \sum_{i \in I} \partial_{ii} u$
  over $I \subset S$, $|I| = B$, drawn without replacement.
- $\sum_{ab} A_{ab} \partial_{ab} u$ (`Fields.second_order`). STDE:
  $\frac1K \sum_j D^2u[v_j, A^\top v_j]$, $v_j$ Rademacher; SDGD:
  $\frac{k}{B} \sum_{i \in I} D^2u[e_i, A^\top e_i]$ ($A^\top e_i$: row $i$ of $A$).
- $\Delta_S^2 u$. STDE: $\frac1{3K} \sum_j D^4u[v_j, v_j, v_j, v_j]$, $v_j \sim N(0, I_S)$;
  SDGD: $\frac{k}{B} \sum_{i \in I} \partial_i^4 u + \frac{k(k-1)}{B(B-1)}
  \sum_{i \ne j \in I} \partial_i^2 \partial_j^2 u$ (the collapsed bi-Laplacian row over
  $I$ minus its diagonal).

Unbiasedness: $E[v v^\top] = I_S$ gives $E[v^\top H v] = \operatorname{tr} H_S$ and
$E[v^\top H A^\top v] = \sum_{ij} a_{ij} H_{ij}$; for Gaussian $v$, Isserlis' theorem
$E[v_a v_b v_c v_e] = \delta_{ab}\delta_{ce} + \delta_{ac}\delta_{be} + \delta_{ae}\delta_{bc}$
gives $E[D^4u[v^4]] = 3 \sum_{a, b} \partial_a^2 \partial_b^2 u$; a subset of size $B$
drawn without replacement holds each index with probability $B/k$ and each pair with
probability $B(B-1)/(k(k-1))$. $K$ (``samples``) is the number of directions (STDE) or
of dimensions $B$ (SDGD, capped at $k$, where it is exact) per point and step.

Randomness: the method is drawn at a key (`at_key`, from the training step's key). With
``draw="point"`` (default) every point gets its own directions, from
``fold_in(key, h(x))`` with $h$ a hash of the point's bits, so a point's estimate does not
depend on which device holds it or where it sits in the batch; with ``draw="step"`` all
points of a step share one set (cheaper: the input rows are then not batched, as in the
exact engine, at the price of correlated errors across points). Each residual is then an
unbiased estimate; training multiplies two independent estimates (two keys) for an
unbiased squared residual (`AbstractDiffMethod.stochastic`).
"""

import abc
import dataclasses
from collections.abc import Callable, Sequence
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from equinox import AbstractVar
from jaxtyping import Array, Float, PRNGKeyArray

from .._types import Point, Scalar
from ._algebra import make_plan
from ._base import AbstractDiffMethod, Request
from ._rows import Row, RowKind, partial_row
from ._taylor import network_jet, read_request

ESTIMATED = ("laplacian", "biharmonic")  # request kinds an estimator replaces
DRAWS = ("point", "step")


class Probe(NamedTuple):
    """What one estimated operator needs: ``directions`` ``(p, d)`` pushed through the
    network as first-order rows on the local virtual axes ``0..p-1``, the ``rows`` on those
    axes to carry, and ``combine(row) -> estimate`` (``row(Row)`` reads the jet, all
    outputs at once)."""

    directions: Float[Array, "p d"]
    rows: tuple[Row, ...]
    combine: Callable[[Callable[[Row], Array]], Array]


def _embed(values: Array, axes: tuple[int, ...], d: int) -> Array:
    """``(p, k)`` values on the coordinates ``axes`` as ``(p, d)`` directions."""
    out = jnp.zeros((values.shape[0], d), values.dtype)
    return out.at[:, np.asarray(axes)].set(values)


def _lap_rows(p: int) -> tuple[Row, ...]:
    return (Row(RowKind.LAPLACIAN, tuple(range(p))),)


def _fourth_rows(p: int) -> tuple[Row, ...]:
    return tuple(partial_row(j, j, j, j) for j in range(p))


def _mixed_rows(p: int) -> tuple[Row, ...]:
    return tuple(partial_row(j, p + j) for j in range(p))


class AbstractEstimator(AbstractDiffMethod):
    """A randomised Taylor method: the `ESTIMATED` requests (Laplacian, bi-Laplacian) and
    `Fields.second_order` by unbiased estimates, every other request exactly, in one
    forward Taylor pass (`second_order`: its own pass, as its coefficients are known only
    when the residual runs). Subclasses choose the directions (`probe`)."""

    samples: AbstractVar[int]
    draw: AbstractVar[str]
    key: AbstractVar[PRNGKeyArray | None]
    stochastic: ClassVar[bool] = True

    def __check_init__(self):
        if int(self.samples) != self.samples or self.samples < self.min_samples:
            raise ValueError(
                f"{type(self).__name__} needs samples >= {self.min_samples} (random "
                f"{self.unit} per point and step): actual={self.samples!r}"
            )
        if self.draw not in DRAWS:
            raise ValueError(f"{type(self).__name__}: draw must be one of {DRAWS}: actual={self.draw!r}")

    min_samples: ClassVar[int] = 1
    unit: ClassVar[str] = "directions"

    def at_key(self, key: PRNGKeyArray) -> "AbstractEstimator":
        """This estimator with its random draw fixed by ``key``."""
        return dataclasses.replace(self, key=key)

    @abc.abstractmethod
    def probe(self, kind: str, key: PRNGKeyArray, axes: tuple[int, ...], d: int, dtype,
              coeffs: Array | None = None) -> Probe:
        """The directions and rows estimating the operator ``kind`` (``"laplacian"``,
        ``"biharmonic"``, ``"second_order"`` with ``coeffs`` $A$ ``(k, k)``) over
        ``axes`` in ``d`` dimensions, drawn from ``key``."""

    # ------------------------------------------------------------------------------------

    def _point_key(self, x: Point) -> PRNGKeyArray:
        if self.key is None:
            raise ValueError(
                f"{type(self).__name__} is a stochastic method: draw it at a key first "
                f"(method.at_key(key)); training does this at every step"
            )
        return self.key if self.draw == "step" else jax.random.fold_in(self.key, point_hash(x))

    def direct_requests(self, requests: Sequence[Request]) -> tuple[Request, ...]:
        return tuple(r for r in requests if r.kind != "second_order")

    def derivatives(
        self, net: Callable[[Point], Array], x: Point, requests: Sequence[Request]
    ) -> dict[Request, Scalar]:
        d = x.shape[0]
        exact = [r for r in requests if r.kind not in ESTIMATED]
        groups = sorted({(r.kind, r.axes) for r in requests if r.kind in ESTIMATED and r.axes})
        key = self._point_key(x)
        probes = [self.probe(kind, jax.random.fold_in(key, g), axes, d, x.dtype)
                  for g, (kind, axes) in enumerate(groups)]
        estimates = self._estimate(net, x, exact, probes)
        out = estimates.pop("exact")
        for (kind, axes), est in zip(groups, estimates["probes"], strict=True):
            for r in requests:
                if (r.kind, r.axes) == (kind, axes):
                    out[r] = est[r.out]
        for r in requests:
            if r.kind in ESTIMATED and not r.axes:
                out[r] = jnp.zeros((), x.dtype)
        return out

    def second_order(self, net, x: Point, request: Request, coeffs: Array, table: dict) -> Scalar:
        if not request.axes:
            return jnp.zeros((), x.dtype)
        key = jax.random.fold_in(self._point_key(x), 0x5EC0)  # its own stream
        probe = self.probe("second_order", key, request.axes, x.shape[0], x.dtype, coeffs)
        return self._estimate(net, x, [], [probe])["probes"][0][request.out]

    def _estimate(self, net, x: Point, exact: Sequence[Request], probes: Sequence[Probe]) -> dict:
        """One Taylor pass: exact rows along the coordinate axes of ``exact``, the probes'
        rows along their directions (virtual axes ``d, d+1, ...``)."""
        d = x.shape[0]
        shifted, offset = [], d
        for p in probes:
            n = p.directions.shape[0]
            shift = {j: offset + j for j in range(n)}
            shifted.append(shift)
            offset += n
        virtual = [
            _row_request(Row(row.kind, tuple(s[a] for a in row.axes)))
            for p, s in zip(probes, shifted, strict=True) for row in p.rows
        ]
        plan = make_plan([*exact, *virtual])._replace(free=True)
        coords = [a for a in plan.dirs if a < d]
        blocks = [jnp.asarray(np.eye(d)[coords], x.dtype)] if coords else []
        first = jnp.concatenate(blocks + [p.directions.astype(x.dtype) for p in probes])
        jet = network_jet(net, x, plan, first=first)
        table = {r: read_request(jet, plan, r) for r in exact}
        ests = []
        for p, s in zip(probes, shifted, strict=True):
            def row(r: Row, s=s) -> Array:
                return read_request(jet, plan, _row_request(Row(r.kind, tuple(s[a] for a in r.axes))),
                                    all_outputs=True)
            ests.append(p.combine(row))
        return {"exact": table, "probes": ests}


def _row_request(row: Row) -> Request:
    """The request that reads ``row`` (output index 0: readers take all outputs)."""
    kind = {RowKind.LAPLACIAN: "laplacian", RowKind.BILAPLACIAN: "biharmonic"}.get(row.kind, "partial")
    return Request(kind, 0, row.axes)


def point_hash(x: Point) -> Array:
    """A 32-bit hash of the bits of ``x`` (``(d,)``, float32 or float64): a linear form with
    odd random multipliers (distinct for any two points that differ in one coordinate)
    mixed by the murmur3 finaliser. Independent of the batch and the device."""
    words = jax.lax.bitcast_convert_type(x, jnp.uint32).reshape(-1)
    rng = np.random.default_rng(0x57DE)
    mult = jnp.asarray(rng.integers(0, 2**31, words.shape[0], dtype=np.uint64) * 2 + 1, jnp.uint32)
    h = jnp.sum(words * mult, dtype=jnp.uint32)
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


class STDE(AbstractEstimator):
    """Stochastic Taylor derivative estimator with dense random jets (Shi, Hu, Lin &
    Kawaguchi, NeurIPS 2024): ``samples`` directions per point (module docstring);
    Rademacher for second order (the lowest-variance Hutchinson probe), Gaussian for the
    bi-Laplacian (its fourth moments make $D^4u[v^4]/3$ unbiased).

    **Arguments:**
    - `samples`: $K$, random directions per point and step (default 16).
    - `draw`: ``"point"`` (own directions per point, default) or ``"step"``.
    - `key`: the draw (`at_key`); ``None`` until drawn.
    """

    samples: int = eqx.field(static=True, default=16)
    draw: str = eqx.field(static=True, default="point")
    key: PRNGKeyArray | None = None

    def probe(self, kind, key, axes, d, dtype, coeffs=None) -> Probe:
        k, n = len(axes), self.samples
        if kind == "biharmonic":
            v = jax.random.normal(key, (n, k), dtype)
            return Probe(_embed(v, axes, d), _fourth_rows(n),
                         lambda row: sum(row(r) for r in _fourth_rows(n)) / (3.0 * n))
        v = jax.random.rademacher(key, (n, k), dtype)
        if kind == "laplacian":
            return Probe(_embed(v, axes, d), _lap_rows(n), lambda row: row(_lap_rows(n)[0]) / n)
        w = v @ jnp.asarray(coeffs, dtype)  # rows w_j = A^T v_j
        dirs = jnp.concatenate([_embed(v, axes, d), _embed(w, axes, d)])
        return Probe(dirs, _mixed_rows(n), lambda row: sum(row(r) for r in _mixed_rows(n)) / n)


class SDGD(AbstractEstimator):
    """Stochastic dimension sampling (Hu, Shukla, Karniadakis & Kawaguchi 2024; STDE's
    sparse jets): ``samples`` coordinates $I$ of the operator's axes per point, drawn
    without replacement, scaled to an unbiased estimate (module docstring). With
    ``samples`` $\\ge k$ it is the exact operator. The bi-Laplacian needs ``samples >= 2``
    (pairs of distinct dimensions).

    **Arguments:** as `STDE` (``samples``: dimensions per point and step, default 16).
    """

    samples: int = eqx.field(static=True, default=16)
    draw: str = eqx.field(static=True, default="point")
    key: PRNGKeyArray | None = None
    min_samples: ClassVar[int] = 2
    unit: ClassVar[str] = "dimensions"

    def probe(self, kind, key, axes, d, dtype, coeffs=None) -> Probe:
        k = len(axes)
        b = min(self.samples, k)
        idx = jax.random.choice(key, k, (b,), replace=False)
        pick = jax.nn.one_hot(idx, k, dtype=dtype)  # (b, k): e_i on the operator's axes
        scale = k / b
        if kind == "laplacian":
            return Probe(_embed(pick, axes, d), _lap_rows(b), lambda row: scale * row(_lap_rows(b)[0]))
        if kind == "second_order":
            w = pick @ jnp.asarray(coeffs, dtype)  # rows of A: A^T e_i
            dirs = jnp.concatenate([_embed(pick, axes, d), _embed(w, axes, d)])
            return Probe(dirs, _mixed_rows(b), lambda row: scale * sum(row(r) for r in _mixed_rows(b)))
        bilap = Row(RowKind.BILAPLACIAN, tuple(range(b)))
        pair = k * (k - 1) / (b * (b - 1)) if b > 1 else 0.0

        def combine(row):
            diag = sum(row(r) for r in _fourth_rows(b))
            return scale * diag + pair * (row(bilap) - diag)

        return Probe(_embed(pick, axes, d), (bilap, *_fourth_rows(b)), combine)
