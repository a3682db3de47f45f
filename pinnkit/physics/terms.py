"""Loss terms: one component of the PINN loss, evaluated at one point.

A term lives on a piece of the domain (``where``: ``"interior"``, a boundary name,
``"initial"``) or on its own data (``"data"``), and returns a residual vector $r(x)$ of
shape ``(r,)`` whose mean square over the term's points is the term's loss. Terms are
pointwise; `Problem` batches them.

Terms that carry per-point data (observations) receive it as the trailing columns of
their batch rows: a row is ``[x_1..x_d, data_1..data_k]`` with ``k = data_dim``.
"""


import abc
import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from equinox import AbstractVar
from jaxtyping import Array, Float

from .._types import Point, Residual
from ..diffops import Fields

Target = Callable[[Point], Array] | float | None


def _target_values(target: Target, x: Point, k: int) -> Float[Array, " k"]:
    if target is None:
        return jnp.zeros((k,), x.dtype)
    if callable(target):
        v = jnp.asarray(target(x), x.dtype)
        return jnp.broadcast_to(jnp.atleast_1d(v), (k,))
    return jnp.full((k,), target, x.dtype)


class AbstractTerm(eqx.Module):
    """One loss component. ``residual(f, coeffs, data)`` is pointwise. ``where``: the
    domain piece (or ``"data"``); ``fields``: the outputs it constrains by name (empty
    for an equation, which may involve any). A term that is not pointwise
    (`AbstractRowTerm`) has its own rows and evaluates the network itself."""

    where: AbstractVar[str]
    fields: AbstractVar[tuple[str, ...]]
    pointwise: ClassVar[bool] = True

    @property
    def data_dim(self) -> int:
        return 0

    @abc.abstractmethod
    def residual(self, f: Fields, coeffs: dict[str, Array], data: Array | None) -> Residual:
        """The residual vector at ``f.point`` (``data``: the row's trailing columns or None)."""


class Equation(AbstractTerm):
    """A PDE residual ``fn(f, coeffs) -> scalar or (r,)``, e.g. ``-f.laplacian("u") - s(x)``.

    **Arguments:**
    - `fn`: the pointwise residual, written with `Fields` (``f["u"]``, ``f.partial``,
      ``f.laplacian``, ``f.coord``...) and the problem's coefficients by name.
    - `where`: the domain piece it is imposed on; default ``"interior"``.
    - `fields`: the outputs it constrains by name; default none (an equation may use any).
    """

    fn: Callable = eqx.field(static=True)
    where: str = eqx.field(static=True, default="interior")
    fields: tuple[str, ...] = eqx.field(static=True, default=())

    def residual(self, f, coeffs, data):
        return jnp.atleast_1d(self.fn(f, coeffs))


class PointEquation(AbstractTerm):
    """A PDE residual ``fn(f, coeffs)`` (as `Equation`) on its own fixed points rather than
    on a sampled piece: a refined set where the flow is hard (a boundary layer), used in
    full every step like an `Observation`'s rows (``where = "data"``, sharded; ``n`` must
    be divisible by the number of devices). Its loss is the mean over these points only,
    so it adds to, and does not dilute, the uniformly sampled `Equation` terms.

    **Arguments:**
    - `fn`: the pointwise residual, as for `Equation`.
    - `points`: ``(n, d)`` coordinates inside the domain, in its coordinate order.
    """

    fn: Callable = eqx.field(static=True)
    points: np.ndarray = eqx.field(converter=np.asarray)
    where: str = eqx.field(static=True, default="data")
    fields: tuple[str, ...] = eqx.field(static=True, default=())

    def __check_init__(self):
        if self.points.ndim != 2 or self.points.shape[0] == 0 or not np.all(np.isfinite(self.points)):
            raise ValueError(f"PointEquation points must be a finite, non-empty (n, d) array: "
                             f"actual shape={self.points.shape}")

    def rows(self) -> np.ndarray:
        """The term's batch: the points, ``(n, d)`` (no data columns)."""
        return self.points

    def residual(self, f, coeffs, data):
        return jnp.atleast_1d(self.fn(f, coeffs))


class Dirichlet(AbstractTerm):
    """$y_i(x) = g_i(x)$ on ``where`` for each field in ``fields``.

    **Arguments:**
    - `where`: a boundary name (``"boundary"``, ``"left"``...).
    - `fields`: constrained outputs; default ``("u",)``.
    - `target`: ``g(x) -> (len(fields),)`` (or scalar), a constant, or None for zero.
    """

    where: str = eqx.field(static=True)
    fields: tuple[str, ...] = eqx.field(static=True, default=("u",))
    target: Target = eqx.field(static=True, default=None)

    def residual(self, f, coeffs, data):
        y = jnp.stack([f[n] for n in self.fields])
        return y - _target_values(self.target, f.point, len(self.fields))


class Initial(AbstractTerm):
    """$y_i(t_0, x) = g_i(x)$: Dirichlet on the ``"initial"`` slice of a `SpaceTime`."""

    fields: tuple[str, ...] = eqx.field(static=True, default=("u",))
    target: Target = eqx.field(static=True, default=None)
    where: str = eqx.field(static=True, default="initial")

    def residual(self, f, coeffs, data):
        y = jnp.stack([f[n] for n in self.fields])
        return y - _target_values(self.target, f.point, len(self.fields))


class Neumann(AbstractTerm):
    """$\\partial y_i / \\partial n = g_i(x)$ on ``where``, $n$ the domain's outward normal.

    The normal is supplied by the problem (``normal=domain.normal``) when it builds the
    term; `Problem` binds it automatically if left as None.
    """

    where: str = eqx.field(static=True)
    fields: tuple[str, ...] = eqx.field(static=True, default=("u",))
    target: Target = eqx.field(static=True, default=None)
    normal: Callable | None = eqx.field(static=True, default=None)

    def _dn(self, f: Fields, name: str) -> Array:
        n = self.normal(f.point, self.where)
        g = f.grad(name, coords=f.layout.coords)
        return jnp.dot(n, g)

    def residual(self, f, coeffs, data):
        dn = jnp.stack([self._dn(f, n) for n in self.fields])
        return dn - _target_values(self.target, f.point, len(self.fields))


class Robin(AbstractTerm):
    """$\\alpha\\, y_i + \\beta\\, \\partial y_i/\\partial n = g_i(x)$ on ``where``."""

    where: str = eqx.field(static=True)
    alpha: float = eqx.field(static=True, default=1.0)
    beta: float = eqx.field(static=True, default=1.0)
    fields: tuple[str, ...] = eqx.field(static=True, default=("u",))
    target: Target = eqx.field(static=True, default=None)
    normal: Callable | None = eqx.field(static=True, default=None)

    def residual(self, f, coeffs, data):
        neu = Neumann(self.where, self.fields, None, self.normal)
        y = jnp.stack([f[n] for n in self.fields])
        dn = jnp.stack([neu._dn(f, n) for n in self.fields])
        g = _target_values(self.target, f.point, len(self.fields))
        return self.alpha * y + self.beta * dn - g


class Observation(AbstractTerm):
    """Measured values of ``fields`` at given points: $r_j = \\sqrt{w_j}\\,(y(x_j) - y_j^{obs})$.

    **Arguments:**
    - `points`: ``(n, d)`` coordinates, in the domain's coordinate order.
    - `values`: ``(n, len(fields))`` observed values.
    - `fields`: which outputs are observed.
    - `weights`: optional ``(n,)`` per-point weights $w_j \\ge 0$ (e.g. $1/\\sigma_j^2$ of a
      Gaussian noise model, normalised to mean 1); None: all 1.
    The data are used in full every step (sharded over devices); ``n`` must be
    divisible by the number of devices. `pinnkit.physics.observations.load_observations` builds
    one from a CSV, NPZ or NetCDF file.
    """

    points: np.ndarray = eqx.field(converter=np.asarray)
    values: np.ndarray = eqx.field(converter=np.asarray)
    fields: tuple[str, ...] = eqx.field(static=True, default=("u",))
    where: str = eqx.field(static=True, default="data")
    weights: np.ndarray | None = None

    def __check_init__(self):
        n = self.points.shape[0] if self.points.ndim == 2 else -1
        if self.points.ndim != 2:
            raise ValueError(f"Observation points must be (n, d): actual shape={self.points.shape}")
        if self.values.shape != (n, len(self.fields)):
            raise ValueError(
                f"Observation values must be (n, len(fields)) = {(n, len(self.fields))}: "
                f"actual={self.values.shape}"
            )
        if not (np.all(np.isfinite(self.points)) and np.all(np.isfinite(self.values))):
            raise ValueError("Observation points/values contain NaN or inf")
        if self.weights is not None:
            w = np.asarray(self.weights)
            if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(f"Observation weights must be (n,) = ({n},), finite and >= 0: "
                                 f"actual shape={w.shape}")

    @property
    def data_dim(self) -> int:
        return len(self.fields) + (self.weights is not None)

    def rows(self) -> np.ndarray:
        """The term's batch: ``[points | values (| sqrt(weights))]``, ``(n, d + data_dim)``."""
        cols = [self.points, self.values]
        if self.weights is not None:
            cols.append(np.sqrt(np.asarray(self.weights, np.float64))[:, None])
        return np.concatenate(cols, axis=1)

    def residual(self, f, coeffs, data):
        k = len(self.fields)
        r = jnp.stack([f[n] for n in self.fields]) - data[:k]
        return r * data[k] if self.weights is not None else r


class AbstractRowTerm(AbstractTerm):
    """A term that is not pointwise: its batch is its own rows (``rows()``, used in full
    every step, sharded; ``where = "data"``), each evaluated by ``network_residual(net,
    layout, row, coeffs)`` from the network's values at nodes of its own (`CircleFlux`,
    `pinnkit.physics.sections.SectionFlux`, `pinnkit.physics.limit_cycle.OscillationFloor`)."""

    pointwise: ClassVar[bool] = False

    @abc.abstractmethod
    def rows(self) -> np.ndarray:
        """The term's batch, ``(n, k)``."""

    @abc.abstractmethod
    def network_residual(self, net: Callable, layout, row: Array, coeffs) -> Residual:
        """The residual vector of one row."""

    def residual(self, f, coeffs, data):
        raise TypeError(f"{type(self).__name__} is not pointwise: Problem evaluates it with network_residual")


class CircleFlux(AbstractRowTerm):
    r"""The continuity equation averaged over disks inside the domain: for each circle
    $(\mathbf c, r)$ of `circles`,

    $$r = \frac{1}{\pi r^2}\oint_{|\mathbf x - \mathbf c| = r} \mathbf u\cdot\mathbf n\,ds
    = \frac{1}{\pi r^2}\int_{|\mathbf x - \mathbf c| < r} \nabla\cdot\mathbf u\,dA$$

    (Gauss), with $\mathbf u$ the two `fields`, from the network's *values* at `nodes`
    equally spaced points of the circle (the trapezoidal rule: spectrally accurate for a
    smooth periodic integrand). Its scale is the pointwise continuity residual's (the mean
    of $\nabla\cdot\mathbf u$ over the disk), but it sees what collocation points miss: a
    sink or source concentrated on a thin line between the points changes the flux through
    every circle around part of it, wherever the circle's nodes lie.

    **Arguments:**
    - `circles`: ``(n, 4)`` rows ``[c_x, c_y, r, theta_0]`` (centre, radius, angle of the
      first node), each disk inside the domain (`pinnkit.physics.flow.inscribed_circles`).
    - `fields`: the velocity's two components, in coordinate order; default ``("u", "v")``.
    - `nodes`: quadrature points per circle.
    The rows are used in full every step (``where = "data"``, sharded; ``n`` must be
    divisible by the number of devices), like an `Observation`'s.
    """

    circles: np.ndarray = eqx.field(converter=np.asarray)
    fields: tuple[str, ...] = eqx.field(static=True, default=("u", "v"))
    nodes: int = eqx.field(static=True, default=16)
    where: str = eqx.field(static=True, default="data")

    def __check_init__(self):
        c = self.circles
        if c.ndim != 2 or c.shape[0] == 0 or c.shape[1] != 4 or not np.all(np.isfinite(c)) \
                or np.any(c[:, 2] <= 0):
            raise ValueError("CircleFlux circles must be a finite, non-empty (n, 4) array of "
                             f"[c_x, c_y, r > 0, theta_0]: actual shape={c.shape}")
        if len(self.fields) != 2 or self.nodes < 3:
            raise ValueError(f"CircleFlux needs two velocity fields and nodes >= 3: actual "
                             f"fields={self.fields}, nodes={self.nodes}")

    def rows(self) -> np.ndarray:
        """The term's batch: the circles, ``(n, 4)``."""
        return self.circles

    def network_residual(self, net: Callable, layout, row: Array, coeffs) -> Float[Array, "1"]:
        """The mean divergence over the disk of ``row`` (class docstring), shape ``(1,)``."""
        theta = row[3] + (2 * math.pi / self.nodes) * jnp.arange(self.nodes, dtype=row.dtype)
        n = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)
        y = jax.vmap(net)(row[None, :2] + row[2] * n)
        iu = [layout.out(k) for k in self.fields]
        flux = jnp.mean(y[:, iu[0]] * n[:, 0] + y[:, iu[1]] * n[:, 1]) * (2 * math.pi * row[2])
        return jnp.atleast_1d(flux / (math.pi * row[2] ** 2))


def field_names(terms: Sequence[AbstractTerm]) -> set[str]:
    return {n for t in terms for n in t.fields}
