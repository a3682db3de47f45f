"""incompressible_flow with hard_velocity: stream (`pinnkit.geometry.stream`): the velocity
of any network is divergence-free to rounding, equals the given data on every given
boundary, and carries the inflow's flux through every section, obstacles included; the
derivative engines agree on it; the limits are refused in one paragraph."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from pinnkit.diffops import Autodiff, Layout, Taylor
from pinnkit.errors import ConfigError
from pinnkit.nn.nets import build_mlp_network
from pinnkit.physics.flow import momentum_residual
from pinnkit.problems.flow import incompressible_flow

FLOWS = Path(__file__).resolve().parents[1] / "configs" / "flows"


def _flow(name, **over):
    params = yaml.safe_load((FLOWS / f"{name}.yaml").read_text())["problem"]["params"]
    params.update(fem_reference=False, hard_velocity="stream", **over)
    return incompressible_flow(**params)


def _net(problem, seed=0):
    return build_mlp_network(("x", "y"), ("u", "v", "p"), width=8, depth=2, activation="tanh",
                             init="glorot_normal", bounds=problem.domain.bounds(),
                             transform=problem.hard_constraint, key=jax.random.key(seed),
                             dtype=jnp.float64)


def test_stream_velocity_is_divergence_free_exact_on_the_boundaries_and_carries_the_flux(x64):
    p = _flow("obstacles")
    hc = p.hard_constraint
    assert p.enforced == ("inlet", "walls", "obstacles") and hc.levels.shape == (3,)  # one per obstacle
    net = _net(p)
    x = p.domain.sample(jax.random.key(3), 500, "interior", jnp.float64)
    jac = jax.vmap(jax.jacfwd(lambda z: net(z)[:2]))(x)
    div = jac[:, 0, 0] + jac[:, 1, 1]
    assert float(jnp.max(jnp.abs(div))) < 1e-12 * float(jnp.max(jnp.abs(jac)))
    for piece in p.enforced:
        b = p.domain.sample(jax.random.key(4), 300, piece, jnp.float64)
        target = p.terms[piece].target
        want = jax.vmap(target)(b) if target is not None else jnp.zeros((300, 2))
        np.testing.assert_allclose(jax.vmap(net)(b)[:, :2], want, rtol=0, atol=1e-12)
    # the flux through sections (Gauss-Legendre on the fluid's intervals) is the inflow's
    t, w = np.polynomial.legendre.leggauss(64)

    def flux(x0, intervals):
        total = 0.0
        for lo, hi in intervals:
            y = lo + (hi - lo) * (t + 1) / 2
            u = jax.vmap(net)(jnp.asarray(np.stack([np.full_like(y, x0), y], 1)))[:, 0]
            total += float(jnp.dot(jnp.asarray(w), u)) * (hi - lo) / 2
        return total

    for x0, intervals in ((0.25, [(0, 1)]), (0.5, [(0, 0.3), (0.5, 1)]), (1.3, [(0, 0.47), (0.77, 1)]),
                          (2.1, [(0, 0.3), (0.5, 1)]), (2.9, [(0, 1)])):
        assert abs(flux(x0, intervals) - 2 / 3) < 1e-7, x0


@pytest.mark.slow  # 80 s on one core: the compile of third derivatives of the lifting, twice
def test_the_derivative_engines_agree_on_the_stream_velocity(x64):
    """The momentum residual (second derivatives of the velocity, third of the stream
    function) by the Taylor engine's generic rule and by nested autodiff, on the tiny
    channel (three given sides; the compile of either grows with the lifting's size)."""
    p = incompressible_flow(
        domain={"rectangle": {"lower": [0, 0], "upper": [2, 1], "names": {
            "left": "inlet", "right": "outlet", "bottom": "walls", "top": "walls"}}},
        velocity={"inlet": ["4*y*(1 - y)", 0], "walls": 0}, nu=0.05, hard_velocity="stream")
    net = _net(p, seed=1)
    layout = Layout(("x", "y"), ("x", "y"), ("u", "v", "p"))
    x = p.domain.sample(jax.random.key(5), 4, "interior", jnp.float64)

    def run(method):
        one = lambda z: method.evaluate(momentum_residual, net, layout, z, {"nu": 0.05})  # noqa: E731
        return jax.jit(jax.vmap(one))(x)

    got, ref = run(Taylor()), run(Autodiff())
    assert np.all(np.isfinite(np.asarray(ref)))
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * float(jnp.max(jnp.abs(ref))))


def test_the_stream_velocity_refuses_what_it_cannot_impose():
    with pytest.raises(ConfigError, match="curved part with a nonzero value"):
        _flow("obstacles", velocity={"inlet": ["4*y*(1 - y)", 0], "walls": 0, "obstacles": [1, 0]})
    with pytest.raises(ConfigError, match="net flux"):  # in through the lid, out nowhere
        _flow("cavity", velocity={"lid": [0, -1], "walls": 0})


def test_corner_functions_are_refused_with_the_stream_velocity(x64):
    """network.singular adds to a constraint's value; the stream velocity differentiates the
    network, so the combination would enrich nothing it claims to: one paragraph naming the key."""
    from pinnkit.run.build import build_run
    from pinnkit.run.config import load_config

    cfg = load_config(FLOWS / "step.yaml", ["problem.params.hard_velocity=stream",
                                            "network.singular=[{at: [1.0, 0.5]}]",
                                            "problem.params.fem_reference=false"])
    with pytest.raises(ConfigError, match="network.singular: the problem's hard constraint"):
        build_run(cfg)
