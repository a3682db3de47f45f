"""Poisson on any shape: $-k\\,\\Delta u = f$ in a geometry-tree domain, $u = g$ on its
boundary, with a manufactured exact solution written as an expression.

The configs ``configs/poisson_hole.yaml`` (a square with an off-centre hole),
``poisson_lshape.yaml`` (the re-entrant corner: $u \\sim r^{2/3}$), ``poisson_ball_hole.yaml``
(a cube minus a ball) and ``poisson_mesh.yaml`` (a triangle-mesh torus) use it.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..expr import Resolver, Symbols, point_function
from ..geometry.config import build_domain
from ..geometry.distance import DistanceDirichlet
from ..physics.problem import Problem
from ..physics.terms import Dirichlet, Equation

KEY = "problem.params"


def _scalar_fn(text, coords, key):
    comps = Resolver(Symbols(tuple(coords), tuple(coords), (), key=KEY)).components(text, key)
    if len(comps) != 1:
        raise ValueError(f"{key}: expected one scalar expression, got {len(comps)} components")
    fn = point_function(comps, coords, {})
    return lambda x: fn(x)[0], comps[0].is_const and comps[0].value == 0


def poisson_domain(domain: Mapping, exact: str, boundary_value: str | float | None = None,
                   k: float = 1.0) -> Problem:
    """$-k\\,\\Delta u = f$ on the shape ``domain`` (a geometry tree, `pinnkit.geometry.config`),
    $u = g$ on its whole boundary; $f = -k\\,\\Delta u^*$ by autodiff of ``exact``.

    **Arguments:**
    - `domain`: the geometry tree (2-D or 3-D, no time).
    - `exact`: $u^*$, an expression of the coordinates (``docs/expressions.md``).
    - `boundary_value`: $g$, an expression or number (default, or ``"exact"``: the
      exact solution's values). It must agree with $u^*$ on the boundary (checked on
      sampled boundary points). As a loss term only its boundary values count; the hard
      constraint evaluates $g$ inside the domain too, so with the default its lift *is*
      $u^*$ and the builder refuses it unless the config opts in with
      ``network.allow_exact_lift: true`` (`pinnkit.run.exactlift`). Give ``0`` when $u^*$
      vanishes there, or any expression right on the boundary only.
    - `k`: the diffusivity (a coefficient).

    A mesh file (``mesh: {file: ...}``) is read relative to the config file, then the
    working directory (`pinnkit.geometry.config.resolve_files`).

    ``network.hard_constraint: true`` imposes $u = g$ exactly through the shape's distance
    function (`pinnkit.geometry.DistanceDirichlet`; on a triangle mesh the smooth distance of
    `pinnkit.geometry.mesh_adf`). At re-entrant
    corners a loss term is often the better choice (docs/geometry.md, measured).
    """
    dom = build_domain(domain, f"{KEY}.domain")
    coords = dom.coords
    if "t" in coords:
        raise ValueError(f"{KEY}.domain: poisson_domain is steady; remove t from the domain")
    ref, _ = _scalar_fn(str(exact), coords, f"{KEY}.exact")
    g_text = exact if boundary_value is None or boundary_value == "exact" else boundary_value
    g, zero = _scalar_fn(str(g_text), coords, f"{KEY}.boundary_value")
    pts = dom.sample(jax.random.key(0), 256, "boundary", jnp.asarray(0.0).dtype)
    gap = float(jnp.max(jnp.abs(jax.vmap(ref)(pts) - jax.vmap(g)(pts))))
    scale = max(1.0, float(jnp.max(jnp.abs(jax.vmap(ref)(pts)))))
    if not np.isfinite(gap) or gap > 1e-4 * scale:
        raise ValueError(f"{KEY}.boundary_value: the exact solution differs from the boundary data by "
                         f"up to {gap:.3g} on the boundary; make them agree there")

    def src(x):
        return -k * jnp.trace(jax.hessian(ref)(x))

    def pde(f, c):
        return -c["k"] * f.laplacian("u") - src(f.point)

    value = None if zero else (lambda x: jnp.atleast_1d(g(x)))
    hard = DistanceDirichlet(dom, ("boundary",), ((0,),), (value,))
    return Problem(
        dom, ("u",), {"pde": Equation(pde), "boundary": Dirichlet("boundary", target=g)},
        coeffs={"k": float(k)}, reference=lambda x: jnp.atleast_1d(ref(x)),
        hard_constraint=hard, enforced=("boundary",) if hard is not None else (),
        name="poisson_domain", description=f"-k Δu = f on a {dom.dim}-D shape, u = g on its boundary",
    )
