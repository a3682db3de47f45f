"""`network.parity`: exact even/odd symmetry by group averaging (`pinnkit.nn.Parity`)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import METHODS
from pinnkit.errors import ConfigError
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny"


def _run(name, *over):
    return build_run(load_config(TINY / name, ["numerics.x64=true", *over]), with_mesh=False)


def test_odd_burgers_network_is_odd_and_keeps_the_hard_constraint(x64):
    """u = −sin πx + t(1 − x²)N averaged with −u(t, −x): u(t, −x) = −u(t, x) and
    u(t, 0) = 0 to rounding (float64, |u| ≲ 1: 1e-14), the initial and boundary values
    stay exact, and the average is not the unsymmetrised network (it is not odd)."""
    net = _run("burgers.yaml", "network.hard_constraint=true", "network.parity={x: odd}").network
    flip, on_axis = np.array([[1.0, -1.0]]), np.array([[1.0, 0.0]])
    z = jax.random.uniform(jax.random.key(0), (200, 2), jnp.float64) * np.array([[1.0, 2.0]])
    z = z - np.array([[0.0, 1.0]])  # t in [0, 1], x in [-1, 1]
    u = jax.vmap(net)(z)[:, 0]
    u_reflected = jax.vmap(net)(z * flip)[:, 0]
    np.testing.assert_allclose(u_reflected, -u, atol=1e-14)
    axis = jax.vmap(net)(z * on_axis)[:, 0]
    np.testing.assert_allclose(axis, 0.0, atol=1e-15)
    x = z[:, 1]
    t0 = jax.vmap(net)(jnp.stack([jnp.zeros_like(x), x], 1))[:, 0]
    np.testing.assert_allclose(t0, -np.sin(np.pi * np.asarray(x)), atol=1e-14)
    for side in (-1.0, 1.0):
        wall = jax.vmap(net)(jnp.stack([z[:, 0], jnp.full_like(x, side)], 1))[:, 0]
        np.testing.assert_allclose(wall, 0.0, atol=1e-14)
    raw = jax.vmap(net.unsymmetrised)
    assert np.max(np.abs(raw(z)[:, 0] + raw(z * flip)[:, 0])) > 1e-3


@pytest.mark.parametrize("name, over", [
    ("burgers.yaml", ("network.hard_constraint=true", "network.parity={x: odd}")),
    ("poisson2d.yaml", ("network.parity={x: even, y: odd}",)),  # 4 copies, Laplacian row
])
def test_parity_taylor_matches_autodiff(x64, name, over):
    """The Taylor engine's reflected jets (first-order rows of R x negated in the
    reflected directions) against nested reverse mode on the same symmetric network:
    residuals u_t + u u_x − ν u_xx (Burgers) and Δu + f (Poisson) agree to 1e-10 in
    float64 (both exact up to rounding of O(1e2) second derivatives)."""
    run = _run(name, *over)
    batch = run.sampler.host_arrays(jax.random.key(1), run.problem, run.dtype)
    p = run.problem

    @jax.jit
    def residuals(batch):
        return [p.residuals(run.network, p.coeffs, batch, METHODS[m]()) for m in ("autodiff", "taylor")]

    ref, taylor = residuals(batch)
    for k in ref:
        np.testing.assert_allclose(taylor[k], ref[k], rtol=1e-10, atol=1e-10, err_msg=k)


@pytest.mark.parametrize("value, match", [
    ("{x: oddd}", r"network\.parity\.x: expected odd or even"),
    ("{z: odd}", r"network\.parity: \['z'\] are not coordinates"),
])
def test_parity_config_errors(value, match):
    with pytest.raises(ConfigError, match=match):
        build_run(load_config(TINY / "burgers.yaml", [f"network.parity={value}"]), with_mesh=False)
