"""Poisson problems: $-k\\,\\Delta u = f$ in a box, Dirichlet data on its boundary.

- `poisson2d`: benchmark P1 (``docs/benchmarks.md``): $f = 2\\pi^2 \\sin\\pi x \\sin\\pi y$
  on $[0,1]^2$, $u = 0$ on the boundary, exact $u = \\sin\\pi x \\sin\\pi y$ (with mode numbers
  and amplitude as parameters).
- `poisson`: the general factory: any dimension and box, source and boundary values as
  constants or user functions, or a manufactured exact solution from which the source
  and boundary values are derived by autodiff.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from .._loader import is_callable_spec, load_callable
from ..geometry.domains import Box
from ..physics.constraints import HardDirichlet
from ..physics.problem import Problem
from ..physics.terms import Dirichlet, Equation


def poisson2d(kx: int = 1, ky: int = 1, amplitude: float = 1.0) -> Problem:
    """P1: $-\\Delta u = A (k_x^2 + k_y^2)\\pi^2 \\sin(k_x\\pi x)\\sin(k_y\\pi y)$ on $[0,1]^2$,
    $u = 0$ on the boundary; exact $u = A \\sin(k_x \\pi x)\\sin(k_y \\pi y)$.

    **Arguments:**
    - `kx`, `ky`: mode numbers (positive integers, so the boundary values stay zero).
    - `amplitude`: $A$.
    """
    if int(kx) != kx or int(ky) != ky or kx < 1 or ky < 1:
        raise ValueError(f"kx and ky must be positive integers: actual=({kx}, {ky})")
    lam = (kx**2 + ky**2) * math.pi**2

    def exact(x):
        return jnp.atleast_1d(
            amplitude * jnp.sin(kx * jnp.pi * x[0]) * jnp.sin(ky * jnp.pi * x[1])
        )

    def pde(f, c):
        return -f.laplacian("u") - lam * exact(f.point)[0]

    domain = Box((0.0, 0.0), (1.0, 1.0))
    return Problem(
        domain,
        ("u",),
        {"pde": Equation(pde), "boundary": Dirichlet("boundary")},
        reference=exact,
        hard_constraint=HardDirichlet(domain.lower, domain.upper, (0, 1), (0,)),
        enforced=("boundary",),
        name="poisson2d",
        description="P1: -Δu = 2π² sin(πx) sin(πy) on [0,1]², u = 0 on the boundary",
    )


def _as_function(value, what: str) -> Callable | None:
    if value is None:
        return None
    if callable(value):
        return value
    if is_callable_spec(value):
        return load_callable(value, what=what)
    if isinstance(value, int | float):
        return lambda x: jnp.full((), value, x.dtype)
    raise ValueError(
        f"{what} must be a number or 'path/to/file.py:function': actual={value!r}"
    )


def _sine_bump(lower, upper):
    def exact(x):
        lo = jnp.asarray(lower, x.dtype)
        hi = jnp.asarray(upper, x.dtype)
        return jnp.atleast_1d(jnp.prod(jnp.sin(jnp.pi * (x - lo) / (hi - lo))))

    return exact


def poisson(
    lower: Sequence[float] = (0.0, 0.0),
    upper: Sequence[float] = (1.0, 1.0),
    k: float = 1.0,
    source: float | str | Callable | None = None,
    boundary_value: float | str | Callable = 0.0,
    exact: str | Callable | None = None,
    coords: Sequence[str] | None = None,
) -> Problem:
    """General Poisson problem $-k\\,\\Delta u = f$ in the box ``[lower, upper]`` (1–3 D),
    $u = g$ on its boundary.

    **Arguments:**
    - `lower`, `upper`: box corners.
    - `k`: diffusivity (a coefficient; can be marked trainable).
    - `source`: $f$ as a number or ``"file.py:function"`` (pointwise ``x -> scalar``).
      If omitted and `exact` is given, $f = -k\\,\\Delta u^*$ by autodiff.
    - `boundary_value`: $g$ as a number or ``"file.py:function"``; ignored when `exact`
      is given (then $g = u^*$).
    - `exact`: ``"sine"`` for the manufactured $u^* = \\prod_i \\sin(\\pi (x_i - l_i)/(u_i - l_i))$,
      or ``"file.py:function"``; enables error reporting.
    - `coords`: coordinate names (default x, y, z).
    """
    domain = Box(lower, upper, coords)
    if exact == "sine":
        ref = _sine_bump(domain.lower, domain.upper)
    else:
        ref = _as_function(exact, "problem.params.exact")
        if ref is not None:
            raw = ref
            ref = lambda x: jnp.atleast_1d(raw(x))  # noqa: E731
    src = _as_function(source, "problem.params.source")
    if src is None:
        if ref is None:
            raise ValueError("poisson needs a `source` or an `exact` solution to derive it from")

        def src(x):
            return -k * jnp.trace(jax.hessian(lambda z: ref(z)[0])(x))

    g = (lambda x: ref(x)[0]) if ref is not None else _as_function(boundary_value, "boundary_value")

    def pde(f, c):
        return -c["k"] * f.laplacian("u") - src(f.point)

    return Problem(
        domain,
        ("u",),
        {"pde": Equation(pde), "boundary": Dirichlet("boundary", target=g)},
        coeffs={"k": float(k)},
        reference=ref,
        hard_constraint=HardDirichlet(
            domain.lower, domain.upper, tuple(range(domain.dim)), (0,),
            value=lambda x: jnp.atleast_1d(g(x)),
        ),
        enforced=("boundary",),
        name="poisson",
        description=f"-k Δu = f on a {domain.dim}-D box, u = g on the boundary",
    )
