r"""A 2-D velocity that is divergence-free by construction and exact on the boundaries
where it is given: the curl of a constrained stream function (issue 36).

$$\mathbf u = \nabla^\perp\psi = (\partial_y\psi, -\partial_x\psi), \qquad
\psi = G(x) + \Big(\frac{D(x)}{s}\Big)^2 N_\psi(x),$$

$N_\psi$ the network's first raw output, $D$ the R-equivalence distance function of the
boundary parts where the velocity is given ($s$ its maximum in the shape, as
`pinnkit.geometry.distance.normalised`), $G$ a lifting of the stream function's boundary
data. Then $\nabla\cdot\mathbf u = 0$ identically (no continuity residual to fit, no sink
the network can make: the flux through every section is the inflow's), and on the
given boundaries $\mathbf u$ is the data, whatever $N_\psi$: $D^2 N_\psi$ and its
gradient vanish there, and $G$ carries both the value and the normal derivative of
$\psi$ the data fix.

**The boundary data of $\psi$.** Along a boundary curve walked with unit tangent
$\boldsymbol\tau$, $\partial_\tau\psi = \mathbf u\cdot\boldsymbol\nu$ with
$\boldsymbol\nu = (\tau_y, -\tau_x)$ (the normal velocity), and with $\mathbf n$ the
inward normal $\partial_n\psi = -v\,n_x + u\,n_y$ (the tangential velocity). The given
parts (straight sides, and circles with zero velocity) are joined into chains by their
shared ends; the outflows, where $\psi$ is free, cut the chains. Along a chain $\psi$ is
the integral of the normal velocity (16-point Gauss–Legendre on each side, in the graph,
so it is smooth in its upper limit), up to one constant per chain: the first chain's is
the gauge ($\psi = 0$ at its start); every other chain (an obstacle, or a second wall
between two outflows) carries an unknown constant, a trainable scalar (`levels`) that
starts at the first chain's lifting at the chain's centre (a flux split by the
obstacle's position). A closed chain must carry no net flux (mass conservation of the
data; refused otherwise).

**The lifting.** Each given side $j$ contributes $G_j = \Psi_j(\tilde s) + f_j\,q_j(\tilde
s)$, $\tilde s$ its smoothed closest point's parameter (`pinnkit.geometry.distance.
side_point`), $\Psi_j$ the stream function along it, $q_j$ the tangential velocity and
$f_j$ the signed distance to its line (positive inside); a circle its chain's constant.
They are blended with weights $w_j \propto \phi_j^{-2}$ ($\phi_j$ the part's distance
function): squared, so that every other part's weight has a zero normal derivative on
part $j$ and $\partial_n G = q_j$ there (with $\phi_j^{-1}$ weights the blend adds
$\sum_k G_k\,\partial_n w_k \ne 0$).

**Derivatives.** The Taylor engine differentiates a network with this constraint by the
closed-form rule below (`_stream_velocity_jet`): a row $\partial_\alpha$ of the velocity
is the row $\partial_{\alpha y}$ (or $-\partial_{\alpha x}$) of $\psi$, so $\psi$'s jet is
built one order higher than the request, from the network's raw jet (its layers' own
rules) and the jets of $G_0$, $(D/s)^2$ and the chains' blend weights $W_c$
(`lifting_terms`, functions of the point alone: `jets.of_point`), by Leibniz's rule. The
chains' constants enter as $G = G_0 + \sum_c \ell_c W_c$, outside the differentiated
function, so the training's reverse pass does not go back through the lifting's
derivatives.

**Only the lifting a curl** (`CurlLifting`): $\mathbf u = \nabla^\perp G + (D/s)\,
(N_u, N_v)$, the same $G$ and $D$, the network's velocity outputs times the distance
factor as with the blended lifting of `pinnkit.geometry.DistanceDirichlet`. The lifting
is divergence-free and carries the inflow's flux through every section (the blend's
flux decays away from the inlet: a sink the network must cancel), the data are exact,
and the network is differentiated to the residual's own order (the curl of the whole
stream function differentiates it once more). Continuity stays a residual, for the
network's part.

Limits (refused with a clear message): a given velocity on a curved part must be zero
(no-slip on a disk); 2-D shapes only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._constraint import AbstractFieldConstraint, AbstractHardConstraint
from .._types import Point
from ..diffops import Request, jets
from . import batched
from .base import AbstractShape
from .distance import affine_lifting_jet, part_adf, side_point

GAUSS = 16  # Gauss-Legendre nodes per side for the stream function along it
_NODES = 0.5 * (np.polynomial.legendre.leggauss(GAUSS)[0] + 1)  # on [0, 1]
_WEIGHTS = 0.5 * np.polynomial.legendre.leggauss(GAUSS)[1]


class _Given(eqx.Module):
    """One given part: a side ``a -> b`` walked in that direction (``data`` its velocity,
    None for zero; ``start`` the stream function at ``a`` before its chain's constant;
    ``normal`` the inward unit normal) or a circle (``a`` its centre, ``b`` None)."""

    piece: str = eqx.field(static=True)
    index: int = eqx.field(static=True)
    chain: int = eqx.field(static=True)
    a: tuple[float, float] = eqx.field(static=True)
    b: tuple[float, float] | None = eqx.field(static=True)
    start: float = eqx.field(static=True)
    normal: tuple[float, float] | None = eqx.field(static=True)
    data: Callable | None = eqx.field(static=True)


def _flux_along(a, b, g, s):
    r"""$\int_0^s \mathbf g(a + t(b - a))\cdot\boldsymbol\nu\,L\,dt$, $\boldsymbol\nu$ the
    walking direction turned clockwise ($L\boldsymbol\nu = (e_y, -e_x)$, $e = b - a$)."""
    e = b - a
    t = s * jnp.asarray(_NODES, s.dtype)
    vals = jax.vmap(lambda r: jnp.atleast_1d(g(a + r * e)))(t)
    return s * jnp.dot(jnp.asarray(_WEIGHTS, s.dtype), vals[:, 0] * e[1] - vals[:, 1] * e[0])


class StreamVelocity(AbstractFieldConstraint):
    """The velocity $\\nabla^\\perp\\psi$ of a constrained stream function (module
    docstring) in outputs ``(0, 1)``, from the network's raw output 0 ($N_\\psi$; raw
    output 1 is unused, so that the network keeps the problem's ``u, v, p`` layout); the
    other outputs are the network's own (the pressure). Build it with `stream_velocity`."""

    domain: AbstractShape
    given: tuple[_Given, ...]
    scale: float = eqx.field(static=True)
    levels: Float[Array, " c"]  # the constants of the chains after the first (trainable)

    def lifting(self, x: Point) -> tuple[Float[Array, ""], Float[Array, ""]]:
        """$(G(x), D(x)/s)$."""
        g0, d, w = self.lifting_terms(x)
        return g0 + jnp.dot(w, self.levels.astype(x.dtype)), d

    def lifting_terms(self, x: Point) -> tuple[Float[Array, ""], Float[Array, ""], Float[Array, " c"]]:
        r"""$(G_0(x), D(x)/s, W(x))$ with $G = G_0 + \sum_c \ell_c W_c$: $W_c$ the blend
        weight of chain $c + 1$'s parts, $\ell_c$ its constant (``levels``); functions of the
        point alone, so a derivative rule differentiates them without the trainable
        constants."""
        cutters = {}
        phis, values = [], []
        for p in self.given:
            phis.append(part_adf(self.domain.piece_parts(p.piece)[p.index], x, cutters))
            if p.b is None or p.data is None:
                values.append(jnp.asarray(p.start, x.dtype))
                continue
            a, b = jnp.asarray(p.a, x.dtype), jnp.asarray(p.b, x.dtype)
            e = b - a
            q_point = side_point(a, b, x)
            s = jnp.dot(q_point - a, e) / jnp.dot(e, e)
            n = jnp.asarray(p.normal, x.dtype)
            g = jnp.atleast_1d(p.data(q_point))
            tangential = -g[1] * n[0] + g[0] * n[1]
            values.append(p.start + _flux_along(a, b, p.data, s) + jnp.dot(x - a, n) * tangential)
        # weights phi_j^-2 / sum_k phi_k^-2 written as rho_j^2 / sum_k rho_k^2, rho_j = D / phi_j
        # in (0, 1] (D the R-equivalence): no product over the other parts, no overflow
        phi = jnp.stack(phis)
        ok = jnp.min(phi) > 0
        inv = 1.0 / jnp.where(ok, phi, 1.0)
        d = 1.0 / jnp.sum(inv)
        q = jnp.square(inv * d)
        # on a given part (a corner: several): the mean of those parts' data, D = 0
        on = (phi == 0).astype(x.dtype)
        w = jnp.where(ok, q / jnp.sum(q), on / jnp.maximum(jnp.sum(on), 1.0))
        chain = np.asarray([p.chain for p in self.given])
        levels = range(1, self.levels.shape[0] + 1)
        w_chains = (jnp.stack([jnp.sum(w[np.flatnonzero(chain == c)]) for c in levels]) if levels
                    else jnp.zeros((0,), x.dtype))
        return jnp.dot(w, jnp.stack(values)), jnp.where(ok, d, 0.0) / self.scale, w_chains

    def stream(self, x: Point, raw: Callable[[Point], Float[Array, " m"]]) -> Float[Array, ""]:
        """$\\psi(x) = G + (D/s)^2 N_\\psi$."""
        g, d = self.lifting(x)
        return g + d * d * raw(x)[0]

    def of_field(self, x: Point, raw: Callable[[Point], Float[Array, " m"]]) -> Float[Array, " m"]:
        def psi_and_rest(z):
            return jnp.concatenate([jnp.atleast_1d(self.stream(z, raw)), raw(z)[2:]])

        value, (dx, dy) = jax.vmap(lambda v: jax.jvp(psi_and_rest, (x,), (v,)), out_axes=(None, 0))(
            jnp.eye(2, dtype=x.dtype))
        return jnp.concatenate([jnp.stack([dy[0], -dx[0]]), value[1:]])


class CurlLifting(AbstractHardConstraint):
    """$(u, v) = \\nabla^\\perp G + (D/s)(y_0, y_1)$, the other outputs $y$'s own (module
    docstring): affine in the network's output $y$, with the lifting and distance of
    ``stream`` (whose chain constants stay trainable). Build it with `curl_lifting`."""

    stream: StreamVelocity

    def lifting(self, x: Point, m: int) -> tuple[Float[Array, " m"], Float[Array, " m"]]:
        """$(A, D)$ of $A + D\\,y$: $A = (\\partial_y G, -\\partial_x G, 0, \\dots)$,
        $D = (D/s, D/s, 1, \\dots)$."""
        (_, d), (grad, _) = jax.vmap(lambda e: jax.jvp(self.stream.lifting, (x,), (e,)),
                                     out_axes=(None, 0))(jnp.eye(2, dtype=x.dtype))
        rest = jnp.zeros((m - 2,), x.dtype)
        return (jnp.concatenate([jnp.stack([grad[1], -grad[0]]), rest]),
                jnp.concatenate([jnp.stack([d, d]), rest + 1]))

    def __call__(self, x: Point, y: Float[Array, " m"]) -> Float[Array, " m"]:
        a, d = self.lifting(x, y.shape[0])
        return a + d * y


@jets.taylor_rule(CurlLifting)
def _curl_lifting_jet(cl: CurlLifting, x_jet: jets.Jet, y_jet: jets.Jet, *, plan: jets.Plan,
                      keep) -> jets.Jet:
    # affine in y: G's derivatives one order up and D's along the input's rows only
    return affine_lifting_jet(cl.lifting, x_jet, y_jet, plan)


def _row_terms(key: jets.Row) -> tuple[tuple[int, ...], ...]:
    """A row of a plan as the sum of the partials (multi-indices) it stands for."""
    kind, axes = key
    if kind is jets.RowKind.PARTIAL:
        return (axes,)
    if kind is jets.RowKind.LAPLACIAN:
        return tuple((a, a) for a in axes)
    if kind is jets.RowKind.GRAD_LAPLACIAN:  # axes = (c, *S)
        return tuple(tuple(sorted((axes[0], a, a))) for a in axes[1:])
    return tuple(tuple(sorted((a, a, b, b))) for a in axes for b in axes)  # bi-Laplacian


def _component(jet: jets.Jet, i: int) -> jets.Jet:
    return jets.Jet(jet.value[i], None if jet.first is None else jet.first[:, i],
                    {k: r[i] for k, r in jet.rest.items()})


@jets.taylor_rule(StreamVelocity)
def _stream_velocity_jet(sv: StreamVelocity, x_jet: jets.Jet, raw_jet, *, plan: jets.Plan, keep) -> jets.Jet:
    r"""Every row $\partial_\alpha$ of $\mathbf u = (\psi_y, -\psi_x)$ is a row
    $\partial_{\alpha + y}$, $-\partial_{\alpha + x}$ of $\psi$ (a Laplacian the sum of
    its partials): $\psi$'s jet one order higher than ``plan``, from the raw field's jet
    (its layers' own rules) and the jets of $G$ and $(D/s)^2$ (functions of the point
    alone, `jets.of_point`), by Leibniz's rule; the other outputs are the raw field's."""
    terms = {(): ((),), **{(a,): ((a,),) for a in plan.dirs}, **{k: _row_terms(k) for k in plan.rest}}
    wanted = {t for ts in terms.values() for t in ts}
    psi_plan = jets.make_plan([Request("partial", 0, tuple(sorted((*t, c)))) for t in wanted for c in (0, 1)])
    raw = raw_jet(psi_plan)

    def lift(z):  # G_0, (D/s)^2, W_c (the trainable constants enter below, not differentiated)
        g0, d, w = sv.lifting_terms(z)
        return jnp.concatenate([jnp.stack([g0, d * d]), w])

    gd = jets.of_point(lift, jets.input_jet(x_jet.value, psi_plan), psi_plan)
    g = _component(gd, 0)
    for c, level in enumerate(sv.levels.astype(x_jet.value.dtype)):
        g = jets.add(g, jets.scale(_component(gd, 2 + c), level))
    psi = jets.add(g, jets.product(_component(gd, 1), _component(raw, 0), psi_plan))

    def read(jet: jets.Jet, t: tuple[int, ...]) -> Array:
        return jet.value if not t else jet.row_or_zero(jets.partial_row(*t), psi_plan.dirs)

    def out(ts) -> Array:  # (u, v, the raw field's other outputs) summed over the partials ts
        rows = [jnp.concatenate([jnp.stack([read(psi, (*t, 1)), -read(psi, (*t, 0))]), read(raw, t)[2:]])
                for t in ts]
        return sum(rows[1:], rows[0])

    first = jnp.stack([out(terms[(a,)]) for a in plan.dirs]) if plan.dirs else None
    return jets.Jet(out(terms[()]), first, {k: out(terms[k]) for k in plan.rest})


def _ends(part) -> tuple[np.ndarray, np.ndarray]:
    return (np.asarray(batched._to_world(part, part.atom.a), float),
            np.asarray(batched._to_world(part, part.atom.b), float))


def stream_velocity(shape: AbstractShape, data: Mapping[str, Callable | None], key: str = "hard_velocity",
                    n: int = 4096) -> StreamVelocity:
    """A `StreamVelocity` for the velocity ``data`` (``{piece: g(x) -> (2,) or None for
    zero}``) on ``shape``. Raises `ValueError` (naming ``key``) where the construction
    does not apply (module docstring, limits)."""
    if not isinstance(shape, AbstractShape) or shape.dim != 2:
        raise ValueError(f"{key}: a stream-function velocity needs a 2-D shape")
    sides, circles = [], []
    for piece, g in data.items():
        for i, part in enumerate(shape.piece_parts(piece)):
            kind = type(part.atom).stack_kind
            if kind == "segment":
                sides.append((piece, i, *_ends(part), g))
            elif kind == "round" and g is None:
                circles.append((piece, i, np.asarray(batched._to_world(part, part.atom.center), float)))
            else:
                raise ValueError(
                    f"{key}: the velocity on {piece!r} is given on a curved part with a nonzero value "
                    "(or on a part that is neither a straight side nor a circle); the stream-function "
                    "velocity takes straight sides with any data and circles with zero velocity only")
    # chains of sides by shared ends (rounded), walked from an end no other given side shares
    def node(p):
        return tuple(np.round(p, 9))
    at: dict[tuple, list[int]] = {}
    for j, (_, _, a, b, _) in enumerate(sides):
        at.setdefault(node(a), []).append(j)
        at.setdefault(node(b), []).append(j)
    if any(len(v) > 2 for v in at.values()):
        raise ValueError(f"{key}: more than two given sides meet at one point; the stream-function "
                         "velocity needs the given boundary as simple chains")
    free = set(range(len(sides)))
    chains: list[list[tuple[int, bool]]] = []  # (side, reversed)
    starts = [j for j in range(len(sides)) if any(len(at[node(p)]) == 1 for p in sides[j][2:4])]
    for j0 in [*starts, *range(len(sides))]:
        if j0 not in free:
            continue
        a, b = sides[j0][2], sides[j0][3]
        rev = len(at[node(b)]) == 1 and len(at[node(a)]) != 1  # start at the free end
        chain, j = [], j0
        while j in free:
            free.discard(j)
            chain.append((j, rev))
            end = sides[j][2] if rev else sides[j][3]
            nxt = [k for k in at[node(end)] if k != j and k in free]
            if not nxt:
                break
            j = nxt[0]
            rev = node(sides[j][3]) == node(end)
        chains.append(chain)
    given, centre_of = [], []
    for c, chain in enumerate(chains):
        psi = 0.0
        pts = []
        for j, rev in chain:
            piece, i, a, b, g = sides[j]
            a, b = (b, a) if rev else (a, b)
            e = b - a
            n_in = np.asarray([-e[1], e[0]]) / np.linalg.norm(e)
            mid = 0.5 * (a + b)
            h = 1e-6 * np.linalg.norm(e)
            if float(shape.sdf(jnp.asarray(mid + h * n_in))) > float(shape.sdf(jnp.asarray(mid - h * n_in))):
                n_in = -n_in
            given.append(_Given(piece, i, c, tuple(map(float, a)), tuple(map(float, b)), psi,
                                tuple(map(float, n_in)), g))
            if g is not None:
                with jax.enable_x64(True):
                    psi += float(_flux_along(jnp.asarray(a), jnp.asarray(b), g, jnp.asarray(1.0)))
            pts += [a, b]
        closed = node(given[-1].b) == node(given[-len(chain)].a)
        if closed and abs(psi) > 1e-9 * max(1.0, max(abs(q.start) for q in given[-len(chain):])):
            raise ValueError(f"{key}: the velocity given on a closed boundary curve carries a net "
                             f"flux {psi:.3g} through it (mass is not conserved by the data)")
        centre_of.append(np.mean(pts, axis=0))
    for piece, i, centre in circles:
        chains.append([])
        given.append(_Given(piece, i, len(chains) - 1, tuple(map(float, centre)), None, 0.0, None, None))
        centre_of.append(centre)
    dtype = jnp.result_type(float)
    plain = StreamVelocity(shape, tuple(given), 1.0, jnp.zeros((max(len(chains) - 1, 0),), dtype))
    x = shape.sample(jax.random.key(0), n, "interior", dtype)
    d = float(jnp.max(jax.jit(jax.vmap(lambda z: plain.lifting(z)[1]))(x)))
    # the other chains' constants start at the first chain's lifting at their centres
    first = StreamVelocity(shape, tuple(p for p in given if p.chain == 0), 1.0, plain.levels)
    start = [float(first.lifting(jnp.asarray(c, dtype))[0]) if first.given else 0.0 for c in centre_of[1:]]
    return StreamVelocity(shape, tuple(given), float(f"{d:.2g}"), jnp.asarray(start, dtype))


def curl_lifting(shape: AbstractShape, data: Mapping[str, Callable | None],
                 key: str = "hard_velocity") -> CurlLifting:
    """A `CurlLifting` for the velocity ``data`` on ``shape`` (the arguments and limits of
    `stream_velocity`)."""
    return CurlLifting(stream_velocity(shape, data, key))
