"""The derivative interface that residuals are written against.

A pointwise residual receives a `Fields` view and asks it for values and derivatives of
the network's named outputs by coordinate *name*::

    def residual(f, c):
        return -f.laplacian("u") - c["k"] * f.coord("x")

The view answers from a table of precomputed derivatives. Which derivatives go into
the table is found by running the residual once, at trace time and under
`jax.eval_shape`, on a *recording* view (no arithmetic is executed); the configured
`AbstractDiffMethod` then computes exactly that set, in whatever way it does best (for
example all of them in one forward Taylor pass), and the residual runs again on the
real table. The residual therefore never knows which method runs, and each method is a
single function `derivatives(net, x, requests) -> table`.

Requests are canonical: a partial derivative is identified by the output index and the
*sorted* tuple of coordinate axes, so `partial("u", "x", "y")` and `partial("u", "y", "x")`
are one entry; a Laplacian (and a bi-Laplacian) is its own request because the best
methods compute the sum of pure derivatives without the individual terms.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._types import Point, Scalar


class Request(NamedTuple):
    """One derivative of one output at the current point.

    - ``kind="partial"``:
      $\\partial^{|\\alpha|} y_{\\text{out}} / \\partial x_{a_1} \\cdots \\partial x_{a_k}$
      with ``axes = (a_1, ..., a_k)`` sorted; ``axes=()`` is the value itself.
    - ``kind="laplacian"``: $\\sum_{a \\in \\text{axes}} \\partial^2 y_{\\text{out}} / \\partial x_a^2$.
    - ``kind="biharmonic"``: $\\Delta^2 y_{\\text{out}} = \\sum_{a, b \\in \\text{axes}}
      \\partial^4 y_{\\text{out}} / \\partial x_a^2 \\partial x_b^2$.
    - ``kind="second_order"``: $\\sum_{a, b \\in \\text{axes}} A_{ab}\\, \\partial^2
      y_{\\text{out}} / \\partial x_a \\partial x_b$ for a coefficient matrix $A$ that the
      residual supplies when it runs (`Fields.second_order`), so it is not part of the
      request; methods apply it with `AbstractDiffMethod.second_order`.
    """

    kind: str
    out: int
    axes: tuple[int, ...]

    @property
    def order(self) -> int:
        return _ORDERS.get(self.kind, len(self.axes))


_ORDERS = {"laplacian": 2, "biharmonic": 4, "second_order": 2}  # kinds whose order is not len(axes)


def value_request(out: int) -> Request:
    return Request("partial", out, ())


class Layout(NamedTuple):
    """Static naming of a problem: coordinate names, spatial coordinates, output names."""

    coords: tuple[str, ...]
    spatial: tuple[str, ...]
    outputs: tuple[str, ...]

    def axis(self, name: str) -> int:
        if name not in self.coords:
            raise ValueError(
                f"unknown coordinate {name!r} in a residual: the domain's coordinates are "
                f"{self.coords}"
            )
        return self.coords.index(name)

    def out(self, name: str) -> int:
        if name not in self.outputs:
            raise ValueError(
                f"unknown field {name!r} in a residual: the network's outputs are {self.outputs}"
            )
        return self.outputs.index(name)


class Fields:
    """What a pointwise residual sees: named values and derivatives at one point.

    All methods return scalars (shape ``()``) or small vectors; they are cheap lookups
    into the table computed by the configured derivative method.
    """

    def __init__(
        self,
        layout: Layout,
        x: Point,
        lookup: Callable[[Request], Array],
        apply: Callable[[Request, Array], Array] | None = None,
    ):
        self.layout = layout
        self.point = x
        self._lookup = lookup
        self._apply = apply

    # values -----------------------------------------------------------------------
    def __getitem__(self, field: str) -> Scalar:
        """Value of output ``field`` (e.g. ``f["u"]``)."""
        return self._lookup(value_request(self.layout.out(field)))

    def coord(self, name: str) -> Scalar:
        """Value of coordinate ``name`` at this point (e.g. ``f.coord("x")``)."""
        return self.point[self.layout.axis(name)]

    def coords(self, *names: str) -> tuple[Scalar, ...]:
        return tuple(self.coord(n) for n in names)

    # derivatives --------------------------------------------------------------------
    def partial(self, field: str, *coords: str) -> Scalar:
        """Mixed partial derivative: ``partial("u", "x", "x")`` is $u_{xx}$. Any order."""
        axes = tuple(sorted(self.layout.axis(c) for c in coords))
        return self._lookup(Request("partial", self.layout.out(field), axes))

    def _coords(self, coords: Sequence[str] | None) -> tuple[str, ...]:
        return self.layout.spatial if coords is None else tuple(coords)

    def grad(self, field: str, coords: Sequence[str] | None = None) -> Float[Array, " k"]:
        """$(\\partial_{c} u)_{c \\in \\text{coords}}$; default coords: the spatial ones."""
        return jnp.stack([self.partial(field, c) for c in self._coords(coords)])

    def laplacian(self, field: str, coords: Sequence[str] | None = None) -> Scalar:
        """$\\sum_c \\partial_c^2 u$ over ``coords`` (default: spatial coordinates, not ``t``)."""
        axes = tuple(sorted(self.layout.axis(c) for c in self._coords(coords)))
        return self._lookup(Request("laplacian", self.layout.out(field), axes))

    def biharmonic(self, field: str, coords: Sequence[str] | None = None) -> Scalar:
        """$\\Delta^2 u = \\sum_{a, b} \\partial_a^2 \\partial_b^2 u$ over ``coords`` (default:
        spatial coordinates), e.g. $u_{xxxx} + 2u_{xxyy} + u_{yyyy}$ at $d = 2$ (plate
        bending, Stokes stream function). Ask for it this way rather than as the sum of
        partials: `Taylor` then carries one collapsed row for it ($O(d^2)$ rows in all,
        against $O(d^4)$ for the separate fourth partials)."""
        axes = tuple(sorted(self.layout.axis(c) for c in self._coords(coords)))
        return self._lookup(Request("biharmonic", self.layout.out(field), axes))

    def second_order(
        self, field: str, coeffs: Float[Array, "k k"], coords: Sequence[str] | None = None
    ) -> Scalar:
        """$\\sum_{a, b} A_{ab}\\, \\partial_a \\partial_b u$ over ``coords`` (default: the
        spatial coordinates, in that order) for a coefficient matrix ``coeffs`` $A$ of shape
        ``(k, k)``, constant or computed at this point (e.g. from ``f.point`` and the
        coefficients): a diffusion operator $\\nabla \\cdot (A \\nabla u)$'s second-order
        part. The same as ``jnp.sum(A * f.hessian(field, coords))``, but a stochastic method
        estimates it without the $k^2$ Hessian entries."""
        cs = self._coords(coords)
        axes = tuple(self.layout.axis(c) for c in cs)
        if tuple(sorted(axes)) != axes:
            raise ValueError(
                f"second_order needs coords in the domain's order {self.layout.coords}: {cs}"
            )
        req = Request("second_order", self.layout.out(field), axes)
        if self._apply is None:  # recording: the request is all that is needed
            self._lookup(req)
            return jnp.zeros((), self.point.dtype)
        return self._apply(req, jnp.asarray(coeffs, self.point.dtype))

    def divergence(self, fields: Sequence[str], coords: Sequence[str] | None = None) -> Scalar:
        """$\\sum_i \\partial_{c_i} F_i$ for vector field ``fields`` (e.g. ``("u", "v")``)."""
        cs = self._coords(coords)
        if len(fields) != len(cs):
            raise ValueError(
                f"divergence needs one field per coordinate: fields={tuple(fields)}, coords={cs}"
            )
        return sum(self.partial(fn, c) for fn, c in zip(fields, cs, strict=True))

    def hessian(self, field: str, coords: Sequence[str] | None = None) -> Float[Array, "k k"]:
        cs = self._coords(coords)
        return jnp.stack([jnp.stack([self.partial(field, a, b) for b in cs]) for a in cs])


def collect_requests(
    fn: Callable, layout: Layout, x: Point, *args
) -> tuple[Request, ...]:
    """Runs ``fn(fields, *args)`` abstractly and returns the derivatives it asked for.

    Trace-time only: under `jax.eval_shape`, nothing is computed.
    """
    seen: dict[Request, None] = {}

    def lookup(req: Request):
        seen.setdefault(req, None)
        return jnp.zeros((), x.dtype)

    jax.eval_shape(lambda x_, a: fn(Fields(layout, x_, lookup), *a), x, args)
    return tuple(seen)


class AbstractDiffMethod(eqx.Module):
    """How derivatives of the network are computed. Subclasses implement `derivatives`.

    A *stochastic* method (``stochastic = True``: a randomised estimator of some
    derivatives, unbiased over its random draws) is drawn with `at_key`; the training
    loss then evaluates each residual under two independent draws and uses their product
    as the squared residual (`pinnkit.train.loss.Loss`). Deterministic methods (the
    default) ignore keys: ``at_key`` returns the method itself.
    """

    stochastic: ClassVar[bool] = False

    def at_key(self, key: PRNGKeyArray) -> AbstractDiffMethod:
        """This method with its random draw fixed by ``key`` (deterministic: itself)."""
        del key
        return self

    @abc.abstractmethod
    def derivatives(
        self, net: Callable[[Point], Array], x: Point, requests: Sequence[Request]
    ) -> dict[Request, Scalar]:
        """Computes every requested derivative of ``net`` (``(d,) -> (m,)``) at ``x``."""

    def direct_requests(self, requests: Sequence[Request]) -> tuple[Request, ...]:
        """The requests `derivatives` computes: a ``second_order`` one becomes the Hessian
        entries over its axes (exact methods; a stochastic method overrides this)."""
        out: dict[Request, None] = {}
        for r in requests:
            if r.kind == "second_order":
                pairs = [(a, b) for a in r.axes for b in r.axes if a <= b]
                out.update({Request("partial", r.out, ab): None for ab in pairs})
            else:
                out[r] = None
        return tuple(out)

    def second_order(self, net, x: Point, request: Request, coeffs: Array, table: dict) -> Scalar:
        """$\\sum_{ab} A_{ab} \\partial_{ab} u$ of a ``second_order`` request with ``coeffs``
        $A$, from the Hessian entries in ``table`` (what `direct_requests` asked for)."""
        terms = [
            coeffs[i, j] * table[Request("partial", request.out, (min(a, b), max(a, b)))]
            for i, a in enumerate(request.axes) for j, b in enumerate(request.axes)
        ]
        return sum(terms[1:], terms[0]) if terms else jnp.zeros((), x.dtype)

    def evaluate(self, fn: Callable, net: Callable, layout: Layout, x: Point, *args) -> Array:
        """Evaluates the pointwise ``fn(fields, *args)`` at ``x`` with this method."""
        requests = collect_requests(fn, layout, x, *args)
        direct = self.direct_requests(requests)
        table = self.derivatives(net, x, direct) if direct else {}

        def apply(req: Request, coeffs: Array) -> Array:
            return self.second_order(net, x, req, coeffs, table)

        return fn(Fields(layout, x, table.__getitem__, apply), *args)
