"""A whole PDE problem written in the config, as expressions (``docs/expressions.md``).

```yaml
problem:
  name: expression
  params:
    domain: {x: [-1, 1], y: [-1, 1]}           # add t: [t0, t1] for a space-time problem
    fields: [u]
    parameters: {k: 4.0}                        # coefficients; may be listed in problem.trainable
    define: {ue: sin(pi*x)*sin(4*pi*y)}         # helpers (may use each other, no cycles)
    equations: {pde: lap(u) + k**2*u - (lap(ue) + k**2*ue)}
    conditions: {boundary: {where: boundary, dirichlet: 0}}
    exact: {u: ue}
```

Every equation and condition becomes an `Equation` term whose residual is compiled from
the text (`pinnkit.expr`); condition values are subtracted from the constrained fields
(``dirichlet``, ``initial``), their outward normal derivatives (``neumann``) or both
(``robin``). Parameters stay coefficients, so they can be trained.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..diffops import Autodiff, Fields
from ..errors import ConfigError, did_you_mean, name_list
from ..expr import Ex, ExprError, Resolver, Symbols, point_function, residual_function
from ..geometry.config import build_domain, is_geometry
from ..geometry.distance import DistanceDirichlet
from ..geometry.domains import Box, SpaceTime
from ..geometry.mesh import described
from ..physics.constraints import HardDirichlet, InitialValue
from ..physics.problem import GAUGES, Problem
from ..physics.terms import Equation

KEY = "problem.params"
KINDS = ("dirichlet", "neumann", "robin", "initial", "residual")
_NOT_YET = {"sphere", "disk", "ball", "circle", "radius", "center", "centre"}


class ExactMismatchWarning(UserWarning):
    """The exact solution given in the config does not satisfy a condition or equation."""


def read_mapping(value, key: str, required: bool = False) -> dict:
    """``value`` as a dict (None: ``{}`` unless ``required``), else `ExprError` naming ``key``.
    Public, as the readers below: any problem reads its YAML with the same messages."""
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping) or (required and not value):
        raise ExprError(f"{key}: expected a non-empty mapping of names to values, got {value!r}.")
    return dict(value)


def read_constant(raw, key: str) -> float:
    """A number, or a constant expression such as ``2*pi``."""
    comps = Resolver(Symbols((), (), (), key=KEY)).components(raw, key)
    e = comps[0]
    if len(comps) != 1 or not e.is_const:
        raise ExprError(f"{key}: expected a constant (numbers, pi, e), got {raw!r}.")
    return float(e.value)


def read_domain(spec, key: str = f"{KEY}.domain"):
    """The domain of ``problem.params.domain``: a shape tree (`pinnkit.geometry.config`) or
    one ``[lower, upper]`` range per coordinate (a `Box`; with ``t``, a `SpaceTime`)."""
    spec = read_mapping(spec, key, required=True)
    # a shape: {difference: [...], t: [t0, t1]} (pinnkit.geometry.config); a mapping value
    # is no range, so a misspelt shape kind gets the geometry builder's message
    if is_geometry(spec) or any(isinstance(v, Mapping) for v in spec.values()):
        return build_domain(spec, key)
    kind = spec.pop("kind", "box")
    if kind != "box" or _NOT_YET & set(spec):
        what = kind if kind != "box" else sorted(_NOT_YET & set(spec))[0]
        raise ExprError(
            f"{key}: {what!r} domains are not in pinnkit's core yet. An expression problem "
            "lives in a box, one [lower, upper] range per coordinate (e.g. {x: [0, 1], "
            "y: [0, 1]}), or in a shape such as {disk: {center: [0, 0], radius: 1}} "
            "(docs/geometry.md), optionally with a time interval t: [t0, t1]."
        )
    ranges = {}
    for c, r in spec.items():
        if not (isinstance(r, list | tuple) and len(r) == 2):
            raise ExprError(f"{key}.{c}: expected a range [lower, upper], got {r!r}.")
        lo, hi = (read_constant(v, f"{key}.{c}.{i}") for i, v in enumerate(r))
        if not lo < hi:
            raise ExprError(f"{key}.{c}: expected lower < upper, got [{lo:g}, {hi:g}].")
        ranges[str(c)] = (lo, hi)
    space = [c for c in ranges if c != "t"]
    if not space:
        raise ExprError(f"{key}: needs at least one spatial coordinate besides 't'.")
    box = Box([ranges[c][0] for c in space], [ranges[c][1] for c in space], space)
    return SpaceTime(box, *ranges["t"]) if "t" in ranges else box


def _names(raw, key: str, valid: Sequence[str] | None = None) -> tuple[str, ...]:
    names = [raw] if isinstance(raw, str) else raw
    ok = isinstance(names, list | tuple) and names and all(isinstance(n, str) for n in names)
    if not ok:
        raise ExprError(f"{key}: expected a name or a list of names, got {raw!r}.")
    for n in names:
        if valid is not None and n not in valid:
            raise ExprError(
                f"{key}: {n!r} is not a field of the problem.{did_you_mean(n, valid)} Fields: "
                f"{', '.join(valid)}."
            )
    if len(set(names)) != len(names):
        raise ExprError(f"{key}: a name is listed twice in {names}.")
    return tuple(names)


def broadcast(values: tuple[Ex, ...], n: int, key: str) -> tuple[Ex, ...]:
    """``values`` for ``n`` fields: as given (``n`` of them) or one repeated ``n`` times."""
    if len(values) == n:
        return values
    if len(values) == 1:
        return values * n
    raise ExprError(
        f"{key}: dimension mismatch: {len(values)} values for {n} field(s); give one value "
        "per field (a list), or one value for all."
    )


def _uses_params(components: Sequence[Ex]) -> bool:
    stack, seen = list(components), set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if e.op == "param":
            return True
        stack.extend(e.args)
    return False


class _Builder:
    def __init__(self, r: Resolver, domain, fields: tuple[str, ...]):
        self.r, self.alg, self.domain, self.fields = r, r.alg, domain, fields

    def condition(self, name: str, spec) -> tuple[str, str, tuple[str, ...], tuple[Ex, ...], tuple]:
        """``(kind, piece, fields, residual components, boundary values)`` of one condition."""
        key = f"{KEY}.conditions.{name}"
        spec = read_mapping(spec, key, required=True)
        # `on` is accepted for `where`; YAML 1.1 reads an unquoted key `on` as true.
        spec = {("on" if k is True else k): v for k, v in spec.items()}
        if "on" in spec:
            if "where" in spec:
                raise ExprError(f"{key}: give 'where' or its alias 'on', not both.")
            spec["where"] = spec.pop("on")
        allowed = ("where", "fields", "hard", *KINDS)
        for k in spec:
            if k == "periodic":
                raise ExprError(
                    f"{key}.periodic: periodic conditions are imposed exactly by the network: "
                    "set network.periodic: {x: <period>} instead."
                )
            if k not in allowed:
                raise ExprError(
                    f"{key}: unknown key {k!r}.{did_you_mean(k, allowed)} Allowed: "
                    f"{', '.join(allowed)}."
                )
        kinds = [k for k in KINDS if k in spec]
        if len(kinds) != 1:
            raise ExprError(
                f"{key}: give exactly one of {', '.join(KINDS)}; got {kinds or 'none'}."
            )
        kind = kinds[0]
        pieces = self.domain.pieces()
        piece = spec.get("where", "initial" if kind == "initial" else None)
        if piece is None:
            raise ExprError(
                f"{key}: missing 'where' (the piece it holds on): one of "
                f"{name_list(pieces[1:])}."
            )
        if piece not in pieces or piece == "interior" and kind != "residual":
            hint = (
                " The domain has no time coordinate: add t: [t0, t1] to problem.params.domain."
                if piece == "initial" else did_you_mean(piece, pieces[1:])
            )
            raise ExprError(
                f"{key}.where: {described(self.domain)} has no boundary {piece!r}.{hint} Its "
                f"boundaries: {name_list(pieces[1:])}."
            )
        if kind == "initial" and piece != "initial":
            raise ExprError(f"{key}: an initial condition holds on 'initial', not {piece!r}.")
        fields = _names(spec.get("fields", list(self.fields)), f"{key}.fields", self.fields)
        vkey = f"{key}.{kind}"
        if kind == "residual":
            return kind, piece, fields, self.r.components(spec[kind], vkey), ()
        if kind in ("neumann", "robin") and piece == "initial":
            raise ExprError(f"{key}: {kind} conditions need a spatial boundary, not 'initial'.")
        if kind == "robin":
            rob = read_mapping(spec[kind], vkey, required=True)
            for k in rob:
                if k not in ("alpha", "beta", "value"):
                    raise ExprError(f"{vkey}: unknown key {k!r}; allowed: alpha, beta, value.")
            alpha, beta = (
                broadcast(
                    self.r.components(rob.get(k, 1), f"{vkey}.{k}", fields_allowed=False),
                    len(fields), f"{vkey}.{k}",
                )
                for k in ("alpha", "beta")
            )
            raw, vkey = rob.get("value", 0), f"{vkey}.value"
        else:
            raw = spec[kind]
        g = broadcast(self.r.components(raw, vkey, fields_allowed=False), len(fields), vkey)
        out = []
        for i, fname in enumerate(fields):
            u = self.alg.node("partial", (), (fname, ()))
            if kind in ("dirichlet", "initial"):
                lhs = u
            else:
                dn = self.alg.total(
                    self.alg.mul(self.alg.node("normal", (), (piece, c)), self.alg.diff(u, c))
                    for c in self.domain.spatial_coords
                )
                lhs = dn if kind == "neumann" else self.alg.add(
                    self.alg.mul(alpha[i], u), self.alg.mul(beta[i], dn)
                )
            out.append(self.alg.sub(lhs, g[i]))
        return kind, piece, fields, tuple(out), g


def expression(
    domain: Mapping,
    fields: Sequence[str] | str,
    equations: Mapping,
    conditions: Mapping | None = None,
    parameters: Mapping | None = None,
    define: Mapping | None = None,
    exact: Mapping | None = None,
    gauge: Mapping | None = None,
    name: str = "expression",
    description: str = "",
) -> Problem:
    """A problem defined by expressions (grammar: ``docs/expressions.md``).

    **Arguments:**
    - `domain`: ``{coordinate: [lower, upper], ...}`` (a box); a ``t`` range makes it a
      space-time cylinder with the extra piece ``initial``.
    - `fields`: the unknowns (network outputs), e.g. ``[u, v]``.
    - `equations`: ``{name: expression or [expressions]}``, residuals imposed in the
      interior (``= 0``).
    - `conditions`: ``{name: {where: <boundary>, fields: [...], <kind>: value}}`` with
      ``<kind>`` one of ``dirichlet``, ``neumann`` ($\\partial u/\\partial n = g$),
      ``robin`` (``{alpha, beta, value}``: $\\alpha u + \\beta\\,\\partial u/\\partial n = g$),
      ``initial`` (``where`` defaults to ``initial``) or ``residual`` (any expression = 0).
      ``on`` is accepted as an alias of ``where``.
    - `parameters`: ``{name: value}``: coefficients, trainable if listed in
      ``problem.trainable``.
    - `define`: ``{name: expression}`` helpers.
    - `exact`: ``{field: expression}`` for every field: the reference solution for errors.
      A warning (`ExactMismatchWarning`) is issued if it does not satisfy the conditions
      or equations on sampled points.
    - `gauge`: ``{field: mean | mean_per_time}`` for fields the equations fix only up to a
      constant (an incompressible pressure): errors compare them less their means over
      the evaluation points (``mean_per_time``: at each time), `Problem.gauge`.
    - `name`, `description`: for listings.

    **Hard constraints** (used with ``network.hard_constraint: true``): a ``dirichlet``
    condition on ``boundary`` or an ``initial`` condition whose value uses no parameter
    can be imposed exactly (`HardDirichlet`, `pinnkit.InitialValue`) instead of as a loss
    term: the one with ``hard: true``, else the first such Dirichlet condition, else the
    first initial one (``hard: false`` keeps a condition soft). A warning
    (`HardValueIsExactWarning`) says when the imposed value is the exact solution itself.
    """
    dom = read_domain(domain)
    field_names = _names(fields, f"{KEY}.fields")
    params = {
        str(k): read_constant(v, f"{KEY}.parameters.{k}")
        for k, v in read_mapping(parameters, f"{KEY}.parameters").items()
    }
    r = Resolver(
        Symbols(dom.coords, dom.spatial_coords, field_names, params,
                read_mapping(define, f"{KEY}.define"), key=KEY)
    )
    terms, texts = {}, []
    for k, raw in read_mapping(equations, f"{KEY}.equations", required=True).items():
        comps = r.components(raw, f"{KEY}.equations.{k}")
        if not any(e.fields for e in comps):
            raise ExprError(
                f"{KEY}.equations.{k}: {raw!r} does not involve any field "
                f"({', '.join(field_names)}); an equation must constrain the unknowns."
            )
        terms[str(k)] = Equation(residual_function(comps))
        texts.append(f"{k}: {raw} = 0")
    b = _Builder(r, dom, field_names)
    eligible, chosen = [], []  # conditions a hard constraint can impose, and those asking for it
    shaped = []  # on a shape: Dirichlet/initial conditions (name, piece, output indices, value)
    on_shape = not isinstance(dom.space if isinstance(dom, SpaceTime) else dom, Box)
    for k, spec in read_mapping(conditions, f"{KEY}.conditions").items():
        if k in terms:
            raise ExprError(f"{KEY}.conditions.{k}: the name {k!r} is already an equation.")
        kind, piece, fs, comps, g = b.condition(str(k), spec)
        terms[str(k)] = Equation(residual_function(comps, dom.normal), where=piece)
        want = spec.get("hard") if isinstance(spec, Mapping) else None
        if want is not None and not isinstance(want, bool):
            raise ExprError(f"{KEY}.conditions.{k}.hard: expected true or false, got {want!r}.")
        if on_shape:  # every Dirichlet/initial condition exactly, through the shape's distance functions
            if kind in ("dirichlet", "initial") and not _uses_params(g) and want is not False:
                zero = all(e.is_const and e.value == 0 for e in g)
                value = None if zero else point_function(g, dom.coords, params)
                shaped.append((str(k), piece, tuple(field_names.index(f) for f in fs), value))
            continue
        where_ok = kind == "initial" or (kind == "dirichlet" and piece == "boundary")
        ok = where_ok and not _uses_params(g)
        if want and not ok:
            raise ExprError(
                f"{KEY}.conditions.{k}.hard: only a dirichlet condition on 'boundary' or an initial "
                "condition, with a value that uses no parameter, can be imposed exactly."
            )
        if ok and want is not False:
            eligible.append((str(k), kind, fs, g))
            if want:
                chosen.append(eligible[-1])
    if len(chosen) > 1:
        raise ExprError(f"{KEY}.conditions: hard: true on {[c[0] for c in chosen]}; a problem has one hard "
                        "constraint: keep it on one condition.")
    # default: the first Dirichlet condition on the whole boundary, else the first initial one
    pick = chosen or [c for c in eligible if c[1] == "dirichlet"] or eligible
    hard, enforced, hard_outputs = None, (), ()
    if pick:
        cname, ckind, cfields, g = pick[0]
        hard, enforced = _hard_constraint(dom, field_names, params, ckind, cfields, g), (cname,)
        hard_outputs = tuple(field_names.index(f) for f in cfields)
    if shaped:
        try:  # every Dirichlet/initial condition exactly, through the shape's distance functions
            hard = DistanceDirichlet(dom, tuple(s[1] for s in shaped), tuple(s[2] for s in shaped),
                                     tuple(s[3] for s in shaped))
            enforced = tuple(s[0] for s in shaped)
            hard_outputs = shaped[0][2]
        except ValueError as e:  # overlapping pieces, a mesh in a CSG: loss terms only
            if isinstance(e, ConfigError):  # a limit (docs/geometry.md): refused, not ignored
                raise
            hard = None
    reference = None
    if exact is not None:
        ex = read_mapping(exact, f"{KEY}.exact", required=True)
        missing = [f for f in field_names if f not in ex]
        extra = [f for f in ex if f not in field_names]
        if missing or extra:
            raise ExprError(
                f"{KEY}.exact: give one expression per field ({', '.join(field_names)}): "
                f"missing {missing}, not fields {extra}."
            )
        comps = tuple(
            e for f in field_names
            for e in broadcast(r.components(ex[f], f"{KEY}.exact.{f}", fields_allowed=False),
                                1, f"{KEY}.exact.{f}")
        )
        reference = point_function(comps, dom.coords, params)
    problem = Problem(
        dom, field_names, terms, coeffs=params, reference=reference, hard_constraint=hard,
        enforced=enforced, name=name, description=description or "; ".join(texts),
        gauge=_gauge(gauge, field_names, dom),
    )
    if reference is not None:
        check_exact(problem)
        if hard is not None:
            check_hard_value(problem, enforced[0], hard_outputs)
    return problem


def _gauge(raw, field_names, dom) -> dict[str, str]:
    """``problem.params.gauge`` checked: fields of the problem, kinds of `GAUGES`."""
    key = f"{KEY}.gauge"
    out = {}
    for f, kind in read_mapping(raw, key).items():
        if f not in field_names:
            raise ExprError(
                f"{key}.{f}: {f!r} is not a field of the problem.{did_you_mean(f, field_names)} Fields: "
                f"{', '.join(field_names)}; a gauge names a field defined up to a constant (a pressure)."
            )
        if kind not in GAUGES:
            raise ExprError(
                f"{key}.{f}: unknown gauge {kind!r}.{did_you_mean(kind, GAUGES)} Allowed: mean (errors "
                "less the mean over the evaluation points), mean_per_time (less the spatial mean "
                "at each time, for an unsteady pressure)."
            )
        if kind == "mean_per_time" and "t" not in dom.coords:
            raise ExprError(
                f"{key}.{f}: mean_per_time needs a time coordinate, and the domain has none "
                f"({', '.join(dom.coords)}): use mean, or add t: [t0, t1] to {KEY}.domain."
            )
        out[str(f)] = str(kind)
    return out


def _hard_constraint(dom, field_names, params, kind, fs, g):
    """The output transform imposing condition values ``g`` on fields ``fs`` exactly:
    `HardDirichlet` on the spatial faces, or `InitialValue` at $t_0$."""
    outputs = tuple(field_names.index(f) for f in fs)
    zero = all(e.is_const and e.value == 0 for e in g)
    value = point_function(g, dom.coords, params)
    if kind == "initial":
        return InitialValue(dom.t0, dom.t1, value, (1.0,) * len(fs), outputs=outputs)
    space_axes = tuple(dom.coords.index(c) for c in dom.spatial_coords)
    lo, hi = dom.bounds()
    return HardDirichlet(lo, hi, space_axes, outputs, value=None if zero else value)


class HardValueIsExactWarning(UserWarning):
    """A hard constraint's value is the exact solution: the network starts at the answer."""


def check_hard_value(problem: Problem, condition: str, outputs: tuple[int, ...], n: int = 64) -> bool:
    """Warns (one line, `HardValueIsExactWarning`) when the value that the hard
    constraint imposes equals ``problem.reference`` inside the domain (not only on the
    condition's piece): then $y = g + \\phi N$ is exact for $N = 0$, the network has the
    answer built in and the reported error measures nothing. ``outputs``: the indices of
    the fields it constrains. **Returns:** whether it warned."""
    import jax

    hc = problem.hard_constraint
    pts = problem.domain.sample(jax.random.key(1), n, "interior", jnp.asarray(0.0).dtype)
    zero = jnp.zeros((len(problem.out_names),), pts.dtype)
    idx = jnp.asarray(outputs)
    g = jax.vmap(lambda x: hc(x, zero)[idx])(pts)  # N = 0: the value alone
    ref = jax.vmap(lambda x: problem.reference(x)[idx])(pts)
    gap = float(jnp.max(jnp.abs(g - ref)))
    scale = max(1.0, float(jnp.max(jnp.abs(ref))))
    tol = 1e-5 if pts.dtype == jnp.float32 else 1e-10
    if gap > tol * scale:
        return False
    warnings.warn(
        f"{KEY}.conditions.{condition}: the value the hard constraint imposes equals the exact solution "
        f"inside the domain, so with network.hard_constraint: true the network starts at the answer and its "
        f"error measures nothing; give a value that is right only on the condition's piece, or set "
        f"hard: false on it.", HardValueIsExactWarning, stacklevel=3)
    return True


def check_exact(problem: Problem, n: int = 64, rtol: float | None = None) -> dict[str, float]:
    """Warns (`ExactMismatchWarning`) for each term that ``problem.reference`` does not
    satisfy on ``n`` sampled points of its piece.

    The residual of each term is evaluated with the exact solution in place of the
    network (derivatives by `Autodiff`) and compared with the scale of the term's data
    (its residual for a zero solution) and of the solution itself.

    **Returns:** the relative mismatch per term.
    """
    dtype = jnp.asarray(0.0).dtype
    rtol = rtol if rtol is not None else (1e-3 if dtype == jnp.float32 else 1e-8)
    layout, method = problem.layout, Autodiff()
    key = jax.random.key(0)
    points = {
        k: problem.domain.sample(jax.random.fold_in(key, i), n, t.where, dtype)
        for i, (k, t) in enumerate(problem.terms.items())
    }

    def absmax(fn, x):
        return jnp.max(jnp.abs(jax.vmap(fn)(x)))

    @jax.jit  # one compilation for all terms
    def sizes(points, coeffs):
        out = {}
        for k, term in problem.terms.items():
            fn = lambda f, c, term=term: term.residual(f, c, None)  # noqa: E731
            exact = lambda p, fn=fn: method.evaluate(fn, problem.reference, layout, p, coeffs)  # noqa: E731
            # The residual of a zero solution: the size of the term's data (sources, values).
            data = lambda p, fn=fn: fn(Fields(layout, p, lambda _: jnp.zeros((), dtype)), coeffs)  # noqa: E731
            x = points[k]
            scale = jnp.maximum(absmax(data, x), absmax(problem.reference, x))
            out[k] = (absmax(exact, x), scale)
        return out

    out = {}
    for k, (err, scale) in jax.device_get(sizes(points, problem.coeffs)).items():
        err, scale = float(err), max(1.0, float(scale))
        out[k] = err / scale
        if not np.isfinite(err) or err > rtol * scale:
            term = problem.terms[k]
            what = f"equation {k!r}" if term.where == "interior" else (
                f"condition {k!r} (on {term.where!r})"
            )
            warnings.warn(
                f"{KEY}.exact: the exact solution does not satisfy the {what}: max "
                f"|residual| = {err:.3g} at {n} sampled points (scale {scale:.3g}, tolerance "
                f"{rtol:.0e} relative). Check {KEY}.exact and the term {k!r}.",
                ExactMismatchWarning,
                stacklevel=3,
            )
    return out


# The readers' private names, which `pinnkit.problems.flow` imported (kept one release).
_suggest, _mapping, _constant, _domain, _broadcast = (
    did_you_mean, read_mapping, read_constant, read_domain, broadcast)
