"""Shapes: domains given by a signed distance function, with named boundary parts.

A shape $\\Omega \\subset \\mathbb{R}^d$ ($d$ = 2 or 3) is described by

- ``sdf(x)``: a signed distance, negative inside, zero on $\\partial\\Omega$, positive
  outside, in ``jax.numpy`` (differentiable in the training step). Exact for the
  primitives where a closed form exists; CSG and the ellipse give a *bound*: the sign is
  exact and $|\\text{sdf}| \\le$ the distance (docs/geometry.md);
- ``parts()``: its boundary as a union of smooth `Part` s, each a piece of one
  primitive's boundary (an `AbstractAtom`: a segment, a circle, a face...) placed by an
  affine `Frame` and *trimmed* by CSG: it keeps only the points that lie on the result's
  boundary, ``sign * other.sdf(x) > eps`` for each operand it was combined with. Each
  part carries a boundary name; a piece is the union of the parts of one name.

Sampling is by rejection (`pinnkit.geometry.rejection`): the interior from the bounding
box, a boundary piece from its parts' whole atoms (uniform in arc length / area, the part
chosen in proportion to its atom's measure), keeping the candidates on the piece.
"""

import abc
import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from equinox import AbstractVar
from jaxtyping import Array, Bool, Float

from .._types import Point, Scalar
from . import batched
from ._memo import all_parts, memo, part_measures
from .domains import AbstractRejectionDomain, tensor_grid

RESERVED = ("interior", "boundary", "initial", "data")


def safe_norm(v: Float[Array, " d"]) -> Scalar:
    """$|v|$ with a zero (not NaN) derivative at $v = 0$."""
    ss = jnp.sum(v * v)
    pos = ss > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, ss, 1.0)), 0.0)


def tolerance(dtype, scale: float) -> float:
    """Distance below which two surfaces count as touching: 64 ulp of ``scale``."""
    return 64.0 * float(jnp.finfo(dtype).eps) * scale


class _PlainMethods(eqx.Module):
    """Plain bound methods instead of Equinox's `BoundMethod` modules, whose creation on
    each access flattens the module: parts, atoms and frames are asked for measures and
    normals once per part, 10^4 times for a 10^4-vertex polygon (about 2 CPU s). Their
    methods are closed over, never passed through a transform as pytrees."""

    def __getattribute__(self, name: str):
        return object.__getattribute__(self, name)


class Frame(_PlainMethods):
    """The similarity $x = s R y + b$ from a primitive's frame $y$ to the world $x$
    (rotation $R$, scale $s > 0$, shift $b$); identity by default."""

    rotation: tuple[tuple[float, ...], ...] = eqx.field(static=True)
    scale: float = eqx.field(static=True)
    shift: tuple[float, ...] = eqx.field(static=True)

    @staticmethod
    def identity(dim: int) -> "Frame":
        eye = tuple(tuple(float(i == j) for j in range(dim)) for i in range(dim))
        return Frame(eye, 1.0, (0.0,) * dim)

    def _r(self, dtype):
        return jnp.asarray(self.rotation, dtype)

    def _b(self, z):  # the shift as a row broadcastable against z (rank promotion is explicit)
        return jnp.asarray(self.shift, z.dtype).reshape((1,) * (z.ndim - 1) + (-1,))

    def to_world(self, y: Float[Array, "... d"]) -> Float[Array, "... d"]:
        return self.scale * (y @ self._r(y.dtype).T) + self._b(y)

    def to_local(self, x: Float[Array, "... d"]) -> Float[Array, "... d"]:
        return ((x - self._b(x)) @ self._r(x.dtype)) / self.scale

    def vector(self, n: Float[Array, " d"]) -> Float[Array, " d"]:
        """A direction (a normal) mapped to the world frame."""
        return self._r(n.dtype) @ n

    def then(self, outer: "Frame") -> "Frame":
        """``outer`` after ``self``: $s_2 R_2 (s_1 R_1 y + b_1) + b_2$."""
        r1, r2 = np.asarray(self.rotation), np.asarray(outer.rotation)
        b = outer.scale * (r2 @ np.asarray(self.shift)) + np.asarray(outer.shift)
        return Frame(_tuple2(r2 @ r1), self.scale * outer.scale, tuple(float(v) for v in b))


def _tuple2(a: np.ndarray) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in row) for row in a)


class AbstractAtom(_PlainMethods):
    """One smooth piece of a primitive's boundary, in the primitive's own frame.

    - ``measure()``: its length (2-D) or area (3-D);
    - ``from_unit(u)``: unit-cube rows ``(m, d)`` (the first $d - 1$ columns used) to
      points on the atom, uniform in arc length / area;
    - ``normal(y)``: the primitive's outward unit normal at a point of the atom;
    - ``distance(y)``: the (unsigned) distance from any point to the atom;
    - ``level(y) -> (f, t)``: the atom for distance functions (`pinnkit.geometry.distance`):
      $f$ is smooth, zero on the atom's surface, positive on the primitive's inner side
      and normalised to first order ($\\partial f/\\partial n = -1$ on the atom); $t$ is a
      smooth trimming function, $t \\ge 0$ exactly on the part of $\\{f = 0\\}$ that is
      the atom, or None when the atom is all of $\\{f = 0\\}$ (a circle, a sphere).
    """

    # the kind `pinnkit.geometry.batched` stacks ("segment": fields a, b; "round": center,
    # radius), None: evaluated one by one
    stack_kind: ClassVar[str | None] = None
    # several atoms of one class as one vector in `pinnkit.geometry.distance`:
    # ``stack_rows(parts)`` -> host arrays (built once), ``stack_level(*rows, x)`` -> the
    # parts' ``(f, t)`` as vectors; None: level by level
    stack_rows: ClassVar = None
    stack_level: ClassVar = None

    name: AbstractVar[str]

    @abc.abstractmethod
    def measure(self) -> float: ...

    @abc.abstractmethod
    def from_unit(self, u: Float[Array, "m d"]) -> Float[Array, "m d"]: ...

    @abc.abstractmethod
    def normal(self, y: Point) -> Point: ...

    @abc.abstractmethod
    def distance(self, y: Point) -> Scalar: ...

    @abc.abstractmethod
    def level(self, y: Point) -> tuple[Scalar, Scalar | None]: ...


class Part(_PlainMethods):
    """An atom placed in the world and trimmed by CSG (see the module docstring).

    **Arguments:**
    - `atom`: the primitive's boundary piece; `name`: the boundary name it belongs to.
    - `frame`: primitive frame to world. `flip`: the primitive was subtracted, so the
      result's outward normal is the atom's inward one.
    - `trims`: ``((shape, sign, tie), ...)``: the part keeps the points with
      ``sign * shape.sdf(x) > eps`` for every entry, and where it touches ``shape``
      (|sdf| <= eps: coincident surfaces) those whose outward normal agrees
      with ``shape``'s (``tie = 1``), is opposite to it (``tie = -1``), or none (``0``).
    """

    atom: AbstractAtom
    name: str = eqx.field(static=True)
    frame: Frame
    flip: bool = eqx.field(static=True)
    trims: tuple

    def __init__(self, atom, name, frame, flip=False, trims=()):
        # not the dataclass __init__: Equinox flattens a dataclass init's arguments to
        # check them, O(trims) per part and O(n^2) for a union of n operands
        self.atom, self.name, self.frame, self.flip, self.trims = atom, name, frame, flip, tuple(trims)

    def measure(self) -> float:
        """The atom's whole measure in the world (before trimming)."""
        d = len(self.frame.shift)
        return self.frame.scale ** (d - 1) * self.atom.measure()

    def from_unit(self, u):
        return self.frame.to_world(self.atom.from_unit(u))

    def keep(self, x: Point, eps: float) -> Bool[Array, ""]:
        ok = jnp.ones((), bool)
        for shape, sign, tie in self.trims:
            d = shape.sdf(x)
            here = sign * d > eps
            if tie:
                agree = tie * jnp.dot(self.normal(x), shape.normal(x, "boundary")) > 0
                here = here | ((jnp.abs(d) <= eps) & agree)
            ok = ok & here
        return ok

    def normal(self, x: Point) -> Point:
        n = self.frame.vector(self.atom.normal(self.frame.to_local(x)))
        return -n if self.flip else n

    def distance(self, x: Point) -> Scalar:
        return self.frame.scale * self.atom.distance(self.frame.to_local(x))

    def level(self, x: Point) -> tuple[Scalar, Scalar | None]:
        """``(f, t)`` in world units, $f > 0$ on the result's inner side near the part."""
        f, t = self.atom.level(self.frame.to_local(x))
        f = self.frame.scale * f
        return (-f if self.flip else f), (None if t is None else self.frame.scale * t)

    def renamed(self, name: str) -> "Part":
        return Part(self.atom, name, self.frame, self.flip, self.trims)


class AbstractShape(AbstractRejectionDomain):
    """A 2-D or 3-D domain given by a signed distance (module docstring).

    Pieces: ``"interior"``, ``"boundary"`` (every part) and each boundary name. Subclasses
    define ``sdf``, ``parts``, ``bbox`` and ``measure``.
    """

    # the kind `pinnkit.geometry.batched` stacks ("round": center, radius; "box": lower,
    # upper), None: evaluated one by one
    stack_kind: ClassVar[str | None] = None
    coords: AbstractVar[tuple[str, ...]]

    def __getattribute__(self, name: str):
        # A plain bound method, not Equinox's BoundMethod module: building that flattens
        # the whole shape, so each method call on a CSG tree of n operands cost O(n)
        # (a union of 1000 disks spent 35 s in it while estimating its acceptances).
        # A shape's methods are closed over, never passed through a transform as pytrees.
        return object.__getattribute__(self, name)

    @abc.abstractmethod
    def sdf(self, x: Point) -> Scalar:
        """Signed distance (negative inside) at one point."""

    @abc.abstractmethod
    def parts(self) -> tuple[Part, ...]:
        """The boundary as named, trimmed parts."""

    @abc.abstractmethod
    def bbox(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """A box containing the shape: ``(lower, upper)``."""

    @abc.abstractmethod
    def measure(self) -> float | None:
        """Exact area (2-D) or volume (3-D), or None where no closed form is known."""

    def exact_outside(self) -> bool:
        """Whether ``sdf`` is the exact distance outside the shape (False: a bound, e.g.
        an intersection's); lets the rejection test drop trims that cannot remove
        anything (`pinnkit.geometry.batched`)."""
        return False

    def split_trim(self, sign: float, tie: int) -> tuple:
        """The trim "keep ``sign * sdf > eps``" (`Part`) as a conjunction of trims by
        simpler shapes: ``((shape, sign, tie), ...)``; by itself unless CSG splits it."""
        return ((self, sign, tie),)

    # --- the domain interface -----------------------------------------------------------
    def names(self) -> tuple[str, ...]:
        """Boundary names in order of first appearance."""
        return memo(self, "names", lambda: tuple(dict.fromkeys(p.name for p in all_parts(self))))

    def pieces(self) -> tuple[str, ...]:
        return memo(self, "pieces", lambda: ("interior", "boundary",
                                             *(n for n in self.names() if n != "boundary")))

    def bounds(self):
        return self.bbox()

    def piece_parts(self, piece: str) -> tuple[Part, ...]:
        self.check_piece(piece)
        if piece == "interior":
            raise ValueError("piece_parts() needs a boundary piece, not 'interior'")
        if piece == "boundary":
            return all_parts(self)

        def by_name():
            out: dict[str, list] = {}
            for p in all_parts(self):
                out.setdefault(p.name, []).append(p)
            return {k: tuple(v) for k, v in out.items()}
        return memo(self, "by name", by_name).get(piece, ())

    def _eps(self, dtype) -> float:
        lo, hi = memo(self, "bbox", lambda: self.bbox())
        return tolerance(dtype, math.dist(lo, hi))

    def contains(self, x):
        return self.sdf(x) <= self._eps(x.dtype)

    def inside(self, points):
        pts = jnp.asarray(points, jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32)
        return np.asarray(jax.jit(jax.vmap(self.contains))(pts))

    def normal(self, x, piece):
        parts = self.piece_parts(piece)
        if len(parts) == 1:
            return parts[0].normal(x)
        # the part the point lies on: the nearest (a corner is a measure-zero tie)
        k = jnp.argmin(jnp.stack([p.distance(x) for p in parts]))
        return jnp.stack([p.normal(x) for p in parts])[k]

    def candidates(self, u, piece):
        self.check_piece(piece)
        if piece == "interior":
            lo, hi = (jnp.asarray(b, u.dtype)[None, :] for b in self.bbox())
            x = lo + u * (hi - lo)
            return x, batched.sdf_rows(self, x) < 0
        if batched.vectorise(self, piece):
            return batched.candidates(self, u, piece)
        parts = self.piece_parts(piece)
        eps = self._eps(u.dtype)
        k, v = batched.choose_parts(self, u, piece)
        rows = jnp.arange(u.shape[0])
        xs = jnp.stack([p.from_unit(v) for p in parts])  # (parts, m, d)
        x = xs[k, rows]
        keeps = jnp.stack([jax.vmap(lambda y, p=p: p.keep(y, eps))(x) for p in parts])
        return x, keeps[k, rows]

    def acceptance(self, piece):
        self.check_piece(piece)
        return memo(self, ("acceptance", piece), lambda: self._acceptance(piece))

    def _estimated(self, piece) -> bool:
        """Whether ``piece``'s acceptance is a Monte Carlo estimate of its own."""
        if piece == "interior":
            return self.measure() is None
        return any(p.trims for p in self.piece_parts(piece)) and not batched.per_tree(self)

    def _acceptance(self, piece):
        if piece == "interior" and not self._estimated(piece):
            lo, hi = self.bbox()
            return min(1.0, self.measure() / math.prod(b - a for a, b in zip(lo, hi, strict=True)))
        if piece != "interior" and all(not p.trims for p in self.piece_parts(piece)):
            return 1.0
        if piece != "interior" and batched.per_tree(self):
            p = batched.tree_acceptance(self, piece)
        else:
            # every estimated piece in one compiled program: one program per piece cost
            # ~0.4 CPU s of compilation each (5 s of a 10-disk union's build)
            from .rejection import estimate_acceptances

            p = memo(self, "estimates", lambda: estimate_acceptances(
                self, [pc for pc in self.pieces() if self._estimated(pc)]))[piece]
        if p <= 0.0:
            what = "the shape's interior is empty" if piece == "interior" else (
                f"boundary {piece!r} lies nowhere on the shape's boundary")
            raise ValueError(
                f"{what} (no Monte Carlo candidate in its bounding box was kept): the CSG "
                "operands do not overlap as intended; check their positions and sizes"
            )
        return p

    def grid(self, resolution):
        return tensor_grid(self.bbox(), resolution)

    def grid_size(self, resolution):
        return resolution**self.dim

    def boundary_measure(self, piece: str = "boundary") -> float | None:
        """Exact length/area of a boundary piece if none of its parts is trimmed."""
        parts = self.piece_parts(piece)
        return sum(part_measures(self, parts)) if all(not p.trims for p in parts) else None

    def estimate(self, piece: str = "interior", points: int = 2**16) -> float:
        """Monte Carlo measure of ``piece`` (area/volume, or length/area of a boundary):
        acceptance times the candidates' measure; standard error about
        $\\sqrt{p(1-p)/\\text{points}}$ relative to it for acceptance $p$."""
        from .rejection import estimate_acceptance

        p = estimate_acceptance(self, piece, points)
        if piece == "interior":
            lo, hi = self.bbox()
            return p * math.prod(b - a for a, b in zip(lo, hi, strict=True))
        return p * sum(part_measures(self, self.piece_parts(piece)))


def relabel(defaults: tuple[str, ...], name: str | None, names, what: str) -> tuple[str, ...]:
    """Boundary names of a primitive's atoms: ``name`` for all of them, or ``names``
    mapping some default names to new ones; raises `ValueError` on unknown or reserved."""
    if name is not None and names:
        raise ValueError(f"{what}: give `name` (one name for the whole boundary) or `names` "
                         "(a mapping from its default names), not both")
    if name is not None:
        out = (str(name),) * len(defaults)
    else:
        names = dict(names or {})
        bad = sorted(set(names) - set(defaults))
        if bad:
            raise ValueError(f"{what}: names {bad} are not boundary names of this shape; its "
                             f"boundary names are {list(dict.fromkeys(defaults))}")
        out = tuple(str(names.get(d, d)) for d in defaults)
    for n in out:
        if n in RESERVED or not n or not n.replace("_", "a").isalnum():
            raise ValueError(f"{what}: {n!r} cannot name a boundary: use letters, digits and "
                             f"'_', not one of the reserved {RESERVED}")
    return out


def check_point(v, dim: int, what: str) -> tuple[float, ...]:
    """A finite point of ``dim`` coordinates as floats, else `ValueError` naming ``what``."""
    try:
        out = tuple(float(c) for c in v)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a list of {dim} numbers: actual={v!r}") from None
    if len(out) != dim or not all(math.isfinite(c) for c in out):
        raise ValueError(f"{what} must be {dim} finite numbers: actual={v!r}")
    return out


def check_positive(v, what: str) -> float:
    try:
        out = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number: actual={v!r}") from None
    if not (math.isfinite(out) and out > 0):
        raise ValueError(f"{what} must be finite and > 0: actual={v!r}")
    return out
