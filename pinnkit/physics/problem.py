"""A PDE problem as data: domain, named loss terms, coefficients, reference solution.

`Problem.residuals` is the one place where pointwise terms are batched (`jax.vmap`).
Problems never see the network's class, the mesh or the optimiser.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._types import Scalar
from ..diffops import AbstractDiffMethod, Layout
from ..geometry.domains import AbstractDomain
from .coeffs import CoeffField, Constrained, constrained, values
from .constraints import AbstractHardConstraint
from .terms import AbstractTerm, Neumann, Robin

# How a field defined up to a constant is compared with its reference (`Problem.gauge`).
GAUGES = ("mean", "mean_per_time")


class Problem(eqx.Module):
    """A PDE problem.

    **Arguments:**
    - `domain`: the geometry (`Box`, `SpaceTime`...).
    - `out_names`: the solution fields, e.g. ``("u",)`` or ``("u", "v", "p")``.
    - `terms`: named loss terms, e.g. ``{"pde": Equation(...), "walls": Dirichlet(...)}``.
    - `coeffs`: named scalar coefficients ($\\nu$, $k$, ...), passed to every residual
      (floats, arrays, `pinnkit.physics.coeffs.Constrained`, or a `pinnkit.physics.coeffs.CoeffField`:
      a small network $c(x)$ that residuals call at the point).
    - `trainable`: names of coefficients to learn (inverse problems).
    - `coeff_transforms`: ``{name: "positive" | ("bounded", lower, upper)}``: learn those
      coefficients through a transform that keeps them in range (`pinnkit.physics.coeffs`);
      residuals always receive the physical value.
    - `reference`: exact or reference solution ``x -> (len(out_names),)`` (pointwise,
      JAX-traceable), used for errors, plots and tests; None if unknown.
    - `hard_constraint`: optional `pinnkit.physics.AbstractHardConstraint`, an output
      transform ``(x, y) -> y`` enforcing some terms exactly (`HardDirichlet`,
      `InitialValue`, `pinnkit.geometry.DistanceDirichlet` or a subclass of your own;
      used when the config sets ``network.hard_constraint: true``), and
      `enforced`: the names of the terms it makes redundant (dropped from the loss).
    - `mean_free`: fields defined up to a constant (pressure): errors subtract means
      (shorthand for ``gauge={field: "mean"}``).
    - `gauge`: ``{field: kind}`` for fields the equations fix only up to a constant, so
      every reported error compares them in that gauge (`GAUGES`): ``"mean"`` subtracts
      from prediction and reference their means over the evaluation points (steady
      incompressible pressure); ``"mean_per_time"`` subtracts their spatial means at each
      time of the evaluation grid (unsteady pressure, defined up to a function $c(t)$).
    - `name`, `description`: for listings and plots.
    - `units`: ``{coordinate or field: unit}`` for the quantities that have one, as
      UDUNITS strings (``"day"``, ``"degC"``, ``"m s-1"``; ``"1"`` for dimensionless):
      axis and colour-bar labels, NetCDF ``units`` attributes. Names not given are
      labelled without a unit (a non-dimensional problem gives none).
    - `metrics`: optional problem-specific figures for ``summary.json`` (e.g. Williamson's
      normalised errors on the sphere): ``metrics(predict) -> dict`` where
      ``predict(points (n, dim) numpy) -> (n, len(out_names)) numpy`` evaluates the trained
      network (``predict.jacobian(points) -> (n, len(out_names), dim)`` its exact first
      derivatives, ``predict.coeffs`` the scalar coefficients' physical values, trained ones
      included: `pinnkit.run.metrics.Predictor`); the dict (JSON-serialisable) is stored
      as ``summary["metrics"]``.
    - `periodic`: ``{coordinate: period}`` in which the formulation *requires* a periodic
      network (e.g. a phase coordinate over one period); the builder refuses a config whose
      ``network.periodic`` does not say the same. Problems where periodicity is only an
      option (a periodic box) leave it empty and let the config choose.
    - `vectors`: ``{name: (field, ...)}``: fields that are the components of one vector
      (a flow's ``velocity: (u, v)``), whose relative $L^2$ error is also reported as a
      whole, $\\|\\mathbf u - \\mathbf u^*\\|_2 / \\|\\mathbf u^*\\|_2$ over the points, under
      ``rel_l2[name]`` (a component that is small beside the others, a channel's $v$,
      weighs by its size there, where its own relative error is dominated by its scale).
    - `singular`: points where the reference is unbounded (the pressure at a re-entrant
      no-slip corner, $\\sim r^{\\lambda-1}$): an error grid point on one (within $10^{-9}$
      of the box's diagonal) is left out of the errors (`error_mask`), since a
      discretised reference's value there is the mesh's, growing without bound as it is
      refined, and one such point can outweigh the rest of the grid.
    """

    domain: AbstractDomain
    out_names: tuple[str, ...] = eqx.field(static=True)
    terms: dict[str, AbstractTerm]
    coeffs: dict[str, Array]
    trainable: frozenset[str] = eqx.field(static=True, default=frozenset())
    reference: Callable | None = eqx.field(static=True, default=None)
    hard_constraint: AbstractHardConstraint | None = None
    enforced: tuple[str, ...] = eqx.field(static=True, default=())
    mean_free: tuple[str, ...] = eqx.field(static=True, default=())
    name: str = eqx.field(static=True, default="problem")
    description: str = eqx.field(static=True, default="")
    metrics: Callable | None = eqx.field(static=True, default=None)
    # (name, unit) pairs: a static field must be hashable; `units_map` is the dict
    units: tuple[tuple[str, str], ...] = eqx.field(static=True, default=())
    periodic: tuple[tuple[str, float], ...] = eqx.field(static=True, default=())
    # (field, kind) pairs, hashable like `units`; `gauge_map` is the dict
    gauge: tuple[tuple[str, str], ...] = eqx.field(static=True, default=())
    # (name, fields) pairs, hashable like `units`
    vectors: tuple[tuple[str, tuple[str, ...]], ...] = eqx.field(static=True, default=())
    singular: tuple[tuple[float, ...], ...] = eqx.field(static=True, default=())

    def __init__(
        self,
        domain,
        out_names,
        terms: Mapping[str, AbstractTerm],
        coeffs: Mapping[str, float | Array] | None = None,
        trainable=(),
        coeff_transforms: Mapping[str, str | tuple] | None = None,
        reference=None,
        hard_constraint=None,
        enforced=(),
        mean_free=(),
        name="problem",
        description="",
        metrics=None,
        units: Mapping[str, str] | None = None,
        periodic: Mapping[str, float] | None = None,
        gauge: Mapping[str, str] | None = None,
        vectors: Mapping[str, tuple[str, ...]] | None = None,
        singular=(),
    ):
        self.domain = domain
        self.out_names = tuple(out_names)
        bound = {}
        for k, t in terms.items():
            if isinstance(t, Neumann | Robin) and t.normal is None:
                t = dataclasses.replace(t, normal=domain.normal)
            bound[k] = t
        self.terms = bound
        learnt = Constrained | CoeffField
        self.coeffs = {k: v if isinstance(v, learnt) else jnp.asarray(v) for k, v in (coeffs or {}).items()}
        for k, spec in (coeff_transforms or {}).items():
            if k not in self.coeffs:
                raise ValueError(
                    f"coeff_transforms names {k!r}, which is not a coefficient: {sorted(self.coeffs)}"
                )
            kind, *bounds = (spec,) if isinstance(spec, str) else tuple(spec)
            self.coeffs[k] = constrained(float(self.coeffs[k]), kind, *bounds)
        self.trainable = frozenset(trainable)
        self.reference = reference
        self.hard_constraint = hard_constraint
        self.enforced = tuple(enforced)
        declared = {str(k): "mean" for k in mean_free}
        declared.update({str(k): str(v) for k, v in (gauge or {}).items()})
        self.gauge = tuple(declared.items())
        self.mean_free = tuple(declared)  # every gauged field (plots draw them less their means)
        self.name = name
        self.description = description
        self.metrics = metrics
        self.units = tuple((str(k), str(v)) for k, v in (units or {}).items())
        self.periodic = tuple((str(k), float(v)) for k, v in (periodic or {}).items())
        self.vectors = tuple((str(k), tuple(map(str, v))) for k, v in (vectors or {}).items())
        self.singular = tuple(tuple(float(c) for c in x) for x in singular)

    def __check_init__(self):
        pieces = self.domain.pieces()
        for k, t in self.terms.items():
            if t.where != "data" and t.where not in pieces:
                from ..errors import did_you_mean, name_list

                raise ValueError(
                    f"term {k!r} is imposed on {t.where!r}, which this "
                    f"{type(self.domain).__name__} does not have;{did_you_mean(t.where, pieces)} "
                    f"its pieces are {name_list(pieces)}"
                )
            for fname in t.fields:
                if fname not in self.out_names:
                    raise ValueError(
                        f"term {k!r} constrains field {fname!r}, but the problem's fields "
                        f"are {self.out_names}"
                    )
        named = set(self.domain.coords) | set(self.out_names)
        stray = sorted(k for k, _ in self.units if k not in named)
        if stray:
            raise ValueError(
                f"units name {stray}, which are neither coordinates {self.domain.coords} nor "
                f"fields {self.out_names} of this problem"
            )
        for vname, parts in self.vectors:
            if vname in self.out_names or not parts or not set(parts) <= set(self.out_names) \
                    or set(parts) & set(self.mean_free):
                raise ValueError(
                    f"vector {vname!r} of fields {parts}: expected a new name and fields of this "
                    f"problem ({self.out_names}) without a gauge"
                )
        for fname, kind in self.gauge:
            if fname not in self.out_names:
                raise ValueError(
                    f"gauge names field {fname!r}, which is not a field of this problem; its "
                    f"fields are {self.out_names}"
                )
            if kind not in GAUGES:
                raise ValueError(
                    f"gauge of field {fname!r} is {kind!r}, which is not a gauge kind; the kinds "
                    f"are {GAUGES} (mean: one constant over the evaluation points; "
                    "mean_per_time: the spatial mean at each time)"
                )
            if kind == "mean_per_time" and "t" not in self.domain.coords:
                raise ValueError(
                    f"gauge of field {fname!r} is 'mean_per_time', but the domain has no time "
                    f"coordinate (its coordinates are {self.domain.coords}); use 'mean'"
                )
        unknown = set(self.trainable) - set(self.coeffs)
        if unknown:
            raise ValueError(
                f"trainable coefficients {sorted(unknown)} are not coefficients of this "
                f"problem; its coefficients are {sorted(self.coeffs)}"
            )
        if self.hard_constraint is not None and not isinstance(self.hard_constraint, AbstractHardConstraint):
            raise TypeError(
                f"hard_constraint is a {type(self.hard_constraint).__name__}, not a "
                "pinnkit.physics.AbstractHardConstraint: use HardDirichlet, InitialValue or "
                "pinnkit.geometry.DistanceDirichlet, or write the transform as a subclass of "
                "AbstractHardConstraint with a __call__(x, y) -> y"
            )
        missing = set(self.enforced) - set(self.terms)
        if missing:
            raise ValueError(f"enforced terms {sorted(missing)} are not terms of this problem")

    @property
    def units_map(self) -> dict[str, str]:
        """``{name: unit}`` of the coordinates and fields with a declared unit."""
        return dict(self.units)

    @property
    def gauge_map(self) -> dict[str, str]:
        """``{field: gauge kind}`` of the fields defined up to a constant (`GAUGES`)."""
        return dict(self.gauge)

    @property
    def layout(self) -> Layout:
        return Layout(self.domain.coords, self.domain.spatial_coords, self.out_names)

    def replace(self, **changes) -> Problem:
        """A copy with fields replaced (static ones too, e.g. ``trainable``, ``name``)."""
        import copy

        new = copy.copy(self)
        for k, v in changes.items():
            if k not in self.__dataclass_fields__:
                raise TypeError(f"Problem has no field {k!r}")
            object.__setattr__(new, k, frozenset(v) if k == "trainable" else v)
        return new

    def error_mask(self, points: np.ndarray) -> np.ndarray | None:
        """The error grid's points that count (``(n,)`` bools): those in the domain
        (`AbstractDomain.inside`) and on no `singular` point; None: all of them."""
        inside = self.domain.inside(points)
        if not self.singular:
            return inside
        lo, hi = self.domain.bounds()
        tol = 1e-9 * float(np.linalg.norm(np.subtract(hi, lo)))
        pts = np.asarray(points, np.float64)
        on = np.zeros(pts.shape[0], bool)
        for x in self.singular:
            on |= np.linalg.norm(pts - np.asarray(x), axis=1) <= tol
        return ~on if inside is None else np.asarray(inside) & ~on

    def without(self, names) -> Problem:
        """The same problem without the terms ``names`` (e.g. those a hard constraint enforces)."""
        kept = {k: t for k, t in self.terms.items() if k not in set(names)}
        return eqx.tree_at(lambda p: p.terms, self, kept)

    def coeff_values(self, coeffs: Mapping[str, Array] | None = None) -> dict[str, Array]:
        """Physical values of ``coeffs`` (default: the problem's own)."""
        return values(self.coeffs if coeffs is None else coeffs)

    def residuals(
        self,
        net: Callable,
        coeffs: Mapping[str, Array],
        batch: Mapping[str, Float[Array, "n c"]],
        method: AbstractDiffMethod,
    ) -> dict[str, Float[Array, "n r"]]:
        """Residuals of every term on its batch; the only `vmap` in pinnkit's physics."""
        coeffs = values(coeffs)  # transformed (constrained) coefficients -> physical values
        return {
            name: jax.vmap(lambda row, t=term: self._point_residual(t, net, coeffs, row, method))(
                batch[name]
            )
            for name, term in self.terms.items()
        }

    def _point_residual(self, term: AbstractTerm, net, coeff_values, row, method):
        """One term's residual at one batch row ``[x | data]`` (a term that is not
        pointwise: at its own row, e.g. a circle)."""
        if not term.pointwise:
            return term.network_residual(net, self.layout, row, coeff_values)
        d = self.domain.dim
        data = row[d:] if term.data_dim else None
        return method.evaluate(
            lambda f, c: term.residual(f, c, data), net, self.layout, row[:d], coeff_values
        )

    def residual_jacobians(
        self,
        model: Callable[[Float[Array, " P"]], tuple[Callable, Mapping[str, Array]]],
        theta: Float[Array, " P"],
        batch: Mapping[str, Float[Array, "n c"]],
        method: AbstractDiffMethod,
    ) -> dict[str, tuple[Float[Array, "n r"], Float[Array, "n r P"]]]:
        """Residuals and their Jacobians with respect to flat parameters $\\theta$, per
        term: ``(r, dr/dtheta)``. ``model(theta) -> (net, coeffs)``. One reverse pass per
        point (a `jax.jacrev` of the pointwise residual, vmapped over the points), for the
        Gauss-Newton / natural-gradient optimiser."""
        out = {}
        for name, term in self.terms.items():

            def one(th, row, term=term):  # (r, r) : the residual is also the jacrev's aux
                net, coeffs = model(th)
                r = self._point_residual(term, net, values(coeffs), row, method)
                return r, r

            def both(th, row, one=one):
                jac, r = jax.jacrev(one, has_aux=True)(th, row)
                return r, jac

            out[name] = jax.vmap(both, in_axes=(None, 0))(theta, batch[name])
        return out

    def loss_terms(self, net, coeffs, batch, method) -> dict[str, Scalar]:
        """Mean over points of $\\|r(x)\\|^2$, per term (local to the points given)."""
        res = self.residuals(net, coeffs, batch, method)
        return {k: jnp.mean(jnp.sum(r**2, axis=-1)) for k, r in res.items()}
