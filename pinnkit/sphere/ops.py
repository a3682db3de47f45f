"""Surface operators on the sphere, in tangent-plane (Cartesian) form, for residuals.

Every function takes the `Fields` view ``f`` of a residual on a `pinnkit.sphere.Sphere`
and the *names* of the fields. Fields are assumed 0-homogeneous (constant along rays),
which `pinnkit.sphere.SphereEmbedding` guarantees for the network and which any hard
constraint must keep (write it in terms of $\\mathbf x/|\\mathbf x|$). Then Cartesian
derivatives are surface derivatives and nothing divides by $\\cos\\theta$: the operators
are as regular at the poles as anywhere else.

A tangent wind is given by three Cartesian components $\\mathbf w = (w_x, w_y, w_z)$;
the wind is its tangential part $\\mathbf v = P\\mathbf w$, $P = I - \\mathbf n\\mathbf n^T$,
$\\mathbf n = \\mathbf x/a$. The formulas below are exact for any 0-homogeneous
$\\mathbf w$, tangent or not (radius $a = |\\mathbf x|$):

- $\\nabla_S\\cdot\\mathbf v = \\nabla\\cdot\\mathbf w - 2\\,(\\mathbf n\\cdot\\mathbf w)/a$
  (since $\\nabla\\cdot\\mathbf n = 2/a$ and the radial derivative vanishes);
- $\\zeta = \\mathbf n\\cdot(\\nabla\\times\\mathbf v) = \\mathbf n\\cdot(\\nabla\\times\\mathbf w)$;
- $P[(\\mathbf v\\cdot\\nabla)\\mathbf v] = P J_w \\mathbf v - \\mathbf v\\,(\\mathbf n\\cdot\\mathbf w)/a$,
  $J_w$ the Cartesian Jacobian $\\partial_j w_i$ (the covariant advection of the wind).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
from jaxtyping import Array, Float

from .._types import Scalar
from ..diffops import Fields

XYZ = ("x", "y", "z")


def radius(f: Fields) -> Scalar:
    """$a = |\\mathbf x|$ at the current point."""
    xyz = f.point[-3:]
    return jnp.sqrt(jnp.sum(xyz * xyz))


def normal(f: Fields) -> Float[Array, "3"]:
    """Outward unit normal (local vertical) $\\mathbf n = \\mathbf x/|\\mathbf x|$."""
    return f.point[-3:] / radius(f)


def project(f: Fields, vector: Float[Array, "3"]) -> Float[Array, "3"]:
    """Tangential part $P\\mathbf w = \\mathbf w - \\mathbf n(\\mathbf n\\cdot\\mathbf w)$."""
    n = normal(f)
    return vector - n * jnp.dot(n, vector)


def surface_grad(f: Fields, field: str) -> Float[Array, "3"]:
    """$\\nabla_S u$ as a Cartesian tangent vector (units: field per unit length)."""
    return project(f, f.grad(field, XYZ))


def laplace_beltrami(f: Fields, field: str) -> Scalar:
    """$\\Delta_S u$; on the unit sphere $\\Delta_S Y_{lm} = -l(l+1)\\,Y_{lm}$."""
    return f.laplacian(field, XYZ)


def wind(f: Fields, fields: Sequence[str]) -> Float[Array, "3"]:
    """The tangent wind $\\mathbf v = P\\mathbf w$ from the three named components."""
    return project(f, jnp.stack([f[n] for n in fields]))


def jacobian(f: Fields, fields: Sequence[str]) -> Float[Array, "3 3"]:
    """$J_{ij} = \\partial_j w_i$ over $x, y, z$."""
    return jnp.stack([f.grad(n, XYZ) for n in fields])


def surface_divergence(f: Fields, fields: Sequence[str]) -> Scalar:
    """$\\nabla_S\\cdot(P\\mathbf w) = \\nabla\\cdot\\mathbf w - 2(\\mathbf n\\cdot\\mathbf w)/a$."""
    w = jnp.stack([f[n] for n in fields])
    return f.divergence(tuple(fields), XYZ) - 2.0 * jnp.dot(normal(f), w) / radius(f)


def vorticity(f: Fields, fields: Sequence[str]) -> Scalar:
    """Relative vorticity
    $\\zeta = \\mathbf n\\cdot\\nabla\\times(P\\mathbf w) = \\mathbf n\\cdot\\nabla\\times\\mathbf w$."""
    J = jacobian(f, fields)
    curl = jnp.stack([J[2, 1] - J[1, 2], J[0, 2] - J[2, 0], J[1, 0] - J[0, 1]])
    return jnp.dot(normal(f), curl)


def advection(f: Fields, field: str, velocity: Float[Array, "3"]) -> Scalar:
    """$\\mathbf v\\cdot\\nabla_S u$ for a tangent ``velocity`` (any Cartesian 3-vector;
    only its tangential part matters)."""
    return jnp.dot(project(f, velocity), f.grad(field, XYZ))


def wind_advection(f: Fields, fields: Sequence[str]) -> Float[Array, "3"]:
    """Covariant advection $P[(\\mathbf v\\cdot\\nabla)\\mathbf v]$ of the wind by itself
    (tangent Cartesian vector; see the module docstring)."""
    w = jnp.stack([f[n] for n in fields])
    v = project(f, w)
    return project(f, jacobian(f, fields) @ v) - v * jnp.dot(normal(f), w) / radius(f)
