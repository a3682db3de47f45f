"""The derivative interface against hand-derived derivatives of analytic fields."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import METHODS, Layout, collect_requests

LAYOUT = Layout(("t", "x", "y"), ("x", "y"), ("u", "v"))


def field(z):
    t, x, y = z
    return jnp.stack([jnp.exp(-t) * jnp.sin(x) * y**3, x**2 * y + t * x])


def exact(t, x, y):
    e, s, c = np.exp(-t), np.sin(x), np.cos(x)
    return {
        "u": e * s * y**3,
        "u_t": -e * s * y**3,
        "u_x": e * c * y**3,
        "u_xx": -e * s * y**3,
        "u_yy": 6 * e * s * y,
        "u_xyy": 6 * e * c * y,
        "u_xxyy": -6 * e * s * y,
        "lap_u": e * s * (6 * y - y**3),
        "bih_u": e * s * (y**3 - 12 * y),  # u_xxxx + 2 u_xxyy + u_yyyy
        "div_uv": e * c * y**3 + x**2,
        "v_x": 2 * x * y + t,
    }


def residual(f, c):
    return jnp.stack([
        f["u"], f.partial("u", "t"), f.partial("u", "x"), f.partial("u", "x", "x"),
        f.partial("u", "y", "y"), f.partial("u", "y", "x", "y"), f.partial("u", "y", "x", "y", "x"),
        f.laplacian("u"), f.biharmonic("u"), f.divergence(("u", "v")), f.grad("v")[0],
    ])


@pytest.mark.parametrize("method", sorted(METHODS))
def test_against_hand_derivatives(method, x64):
    z = jnp.array([0.3, 0.7, -1.2])
    got = jax.jit(lambda z: METHODS[method]().evaluate(residual, field, LAYOUT, z, {}))(z)
    want = np.array(list(exact(0.3, 0.7, -1.2).values()))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_float32_tolerance():
    # float32: eps ~ 1.2e-7; nested derivatives of O(1) fields lose a few digits.
    z = jnp.array([0.3, 0.7, -1.2], jnp.float32)
    got = METHODS["autodiff"]().evaluate(residual, field, LAYOUT, z, {})
    want = np.array(list(exact(0.3, 0.7, -1.2).values()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_requests_are_canonical_and_minimal():
    reqs = collect_requests(
        lambda f: f.partial("u", "x", "y") + f.partial("u", "y", "x") + f.laplacian("v"),
        LAYOUT, jnp.zeros(3),
    )
    assert len(reqs) == 2  # u_xy asked twice in two orders: one request


def test_unknown_names_are_clear():
    with pytest.raises(ValueError, match="unknown field 'w'.*outputs are \\('u', 'v'\\)"):
        METHODS["autodiff"]().evaluate(lambda f, c: f["w"], field, LAYOUT, jnp.zeros(3), {})
    with pytest.raises(ValueError, match="unknown coordinate 'z'"):
        METHODS["autodiff"]().evaluate(lambda f, c: f.partial("u", "z"), field, LAYOUT, jnp.zeros(3), {})
