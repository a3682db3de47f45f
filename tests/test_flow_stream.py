"""incompressible_flow with hard_velocity: stream (`pinnkit.geometry.stream`): the velocity
of any network is divergence-free to rounding, equals the given data on every given
boundary, and carries the inflow's flux through every section, obstacles included; the
closed-form Taylor rule equals nested autodiff; the limits are refused in one paragraph."""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml

from pinnkit.diffops import Request, Taylor, jets
from pinnkit.errors import ConfigError
from pinnkit.nn.nets import build_mlp_network
from pinnkit.problems.flow import incompressible_flow

FLOWS = Path(__file__).resolve().parents[1] / "configs" / "flows"


def _flow(name, **over):
    params = yaml.safe_load((FLOWS / f"{name}.yaml").read_text())["problem"]["params"]
    params.update({"fem_reference": False, "hard_velocity": "stream", **over})
    return incompressible_flow(**params)


def _net(problem, seed=0):
    return build_mlp_network(("x", "y"), ("u", "v", "p"), width=8, depth=2, activation="tanh",
                             init="glorot_normal", bounds=problem.domain.bounds(),
                             transform=problem.hard_constraint, key=jax.random.key(seed),
                             dtype=jnp.float64)


def _channel(hard_velocity):
    """A channel with one disk, every velocity given but the outflow's."""
    return incompressible_flow(
        domain={"difference": [
            {"rectangle": {"lower": [0, 0], "upper": [2, 1], "names": {
                "left": "inlet", "right": "outlet", "bottom": "walls", "top": "walls"}}},
            {"disk": {"center": [0.7, 0.45], "radius": 0.15, "name": "obstacles"}}]},
        velocity={"inlet": ["4*y*(1 - y)", 0], "walls": 0, "obstacles": 0}, nu=0.05,
        hard_velocity=hard_velocity)


def test_stream_velocity_is_divergence_free_exact_on_the_boundaries_and_carries_the_flux(x64):
    p = _flow("obstacles")
    hc = p.hard_constraint
    assert p.enforced == ("inlet", "walls", "obstacles", "continuity")
    assert hc.levels.shape == (3,)  # one per obstacle
    net = _net(p)
    x = p.domain.sample(jax.random.key(3), 500, "interior", jnp.float64)
    jac = jax.vmap(jax.jacfwd(lambda z: net(z)[:2]))(x)
    div = jac[:, 0, 0] + jac[:, 1, 1]
    assert float(jnp.max(jnp.abs(div))) < 1e-12 * float(jnp.max(jnp.abs(jac)))
    for piece in p.enforced[:3]:
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


@pytest.mark.slow  # 50 CPU s: the compile of third derivatives of the lifting, twice
def test_the_stream_velocity_rule_equals_nested_autodiff(x64):
    """The closed-form Taylor rule of `StreamVelocity` (the raw field's jet one order up,
    the lifting's by `jets.of_point`, Leibniz's rule) against nested `jax.jacfwd` of the
    stream function $\\psi$ itself, float64, a random network, on a channel with one
    obstacle (whose trainable constant, moved off its start, enters the rule apart from
    the lifting's derivatives): every output's value, gradient, mixed partial and
    Laplacian, the velocity's from third derivatives of $\\psi$."""
    p = _channel("stream")
    hc = p.hard_constraint
    assert jets.has_rule(hc) and hc.levels.shape == (1,)
    net = _net(p, seed=1)
    net = eqx.tree_at(lambda n: n.transform.levels, net, hc.levels + 0.05)
    x = p.domain.sample(jax.random.key(5), 4, "interior", jnp.float64)
    requests = [Request(kind, out, axes) for out in range(3) for kind, axes in (
        ("partial", ()), ("partial", (0,)), ("partial", (1,)), ("partial", (0, 1)), ("laplacian", (0, 1)))]
    got = jax.jit(jax.vmap(lambda z: Taylor().derivatives(net, z, requests)))(x)

    def reference(z):  # psi's derivatives to third order, the pressure's to second
        psi = lambda q: net.transform.stream(q, net.raw)  # noqa: E731
        d1, d2 = jax.jacfwd(psi)(z), jax.jacfwd(jax.jacfwd(psi))(z)
        d3 = jax.jacfwd(jax.jacfwd(jax.jacfwd(psi)))(z)
        pr = lambda q: net.raw(q)[2]  # noqa: E731
        p1, p2 = jax.jacfwd(pr)(z), jax.jacfwd(jax.jacfwd(pr))(z)
        rows = {(): (d1[1], -d1[0], pr(z))}
        for a in (0, 1):
            rows[(a,)] = (d2[a, 1], -d2[a, 0], p1[a])
        rows[(0, 1)] = (d3[0, 1, 1], -d3[0, 1, 0], p2[0, 1])
        rows["lap"] = (d3[0, 0, 1] + d3[1, 1, 1], -d3[0, 0, 0] - d3[1, 1, 0], p2[0, 0] + p2[1, 1])
        return {r: rows["lap" if r.kind == "laplacian" else r.axes][r.out] for r in requests}

    ref = jax.jit(jax.vmap(reference))(x)
    for r in requests:
        scale = float(jnp.max(jnp.abs(ref[r])))
        assert np.all(np.isfinite(np.asarray(ref[r]))) and scale > 0, r
        np.testing.assert_allclose(got[r], ref[r], rtol=0, atol=1e-12 * scale, err_msg=str(r))


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


def test_a_curl_drops_the_continuity_and_flux_terms_only_when_it_is_imposed(x64):
    """With ``stream`` the continuity and circle-flux residuals are zero to rounding (above):
    the builder drops them with the enforced boundaries, and their batch entries are unused,
    not errors. Without ``network.hard_constraint`` the velocity is the raw network's and
    both terms stay."""
    from pinnkit.run.build import build_run
    from pinnkit.run.config import load_config

    sets = ["problem.params.hard_velocity=stream", "problem.params.fem_reference=false",
            "problem.params.flux_circles=4"]
    hard = build_run(load_config(FLOWS / "step.yaml", sets))
    assert set(hard.problem.terms) == {"momentum", "outlet"}
    assert set(hard.sampler.batch) == {"momentum", "outlet"}
    soft_sets = [*sets, "network.hard_constraint=false", "sampler.batch.inlet=64", "sampler.batch.walls=64"]
    soft = build_run(load_config(FLOWS / "step.yaml", soft_sets))
    assert {"momentum", "continuity", "flux", "outlet", "inlet", "walls"} <= set(soft.problem.terms)


def test_the_curl_lifting_is_divergence_free_carries_the_flux_and_meets_the_data(x64):
    """`CurlLifting`: $\\mathbf u = \\nabla^\\perp G + (D/s)\\,(N_u, N_v)$. Its lifting (the
    network's part zero) has no divergence and carries the inflow's 2/3 through every
    section of a channel with an obstacle (the blend of ``hard_velocity: all`` loses it);
    with a random network the velocity is the data on every given boundary;
    float64."""
    p = _channel("curl_lifting")
    hc = p.hard_constraint
    assert p.enforced == ("inlet", "walls", "obstacles") and "continuity" in p.terms
    assert jets.has_rule(hc) and hc.stream.levels.shape == (1,)
    lift = jax.jit(jax.vmap(lambda z: hc.lifting(z, 3)[0][:2]))
    x = p.domain.sample(jax.random.key(3), 200, "interior", jnp.float64)
    jac = jax.jit(jax.vmap(jax.jacfwd(lambda z: hc.lifting(z, 3)[0][:2])))(x)
    assert float(jnp.max(jnp.abs(jac[:, 0, 0] + jac[:, 1, 1]))) < 1e-11 * float(jnp.max(jnp.abs(jac)))
    t, w = np.polynomial.legendre.leggauss(64)
    for x0, intervals in ((0.25, [(0, 1)]), (0.7, [(0, 0.3), (0.6, 1)]), (1.8, [(0, 1)])):
        total = 0.0
        for lo, hi in intervals:
            y = lo + (hi - lo) * (t + 1) / 2
            u = lift(jnp.asarray(np.stack([np.full_like(y, x0), y], 1)))[:, 0]
            total += float(jnp.dot(jnp.asarray(w), u)) * (hi - lo) / 2
        assert abs(total - 2 / 3) < 1e-7, x0
    net = _net(p, seed=2)
    net = eqx.tree_at(lambda n: n.transform.stream.levels, net, hc.stream.levels + 0.05)
    for piece in p.enforced:
        b = p.domain.sample(jax.random.key(4), 100, piece, jnp.float64)
        target = p.terms[piece].target
        want = jax.vmap(target)(b) if target is not None else jnp.zeros((100, 2))
        np.testing.assert_allclose(jax.jit(jax.vmap(net))(b)[:, :2], want, rtol=0, atol=1e-12)


@pytest.mark.slow  # 26 s: nested jacfwd through the lifting's own derivative
def test_the_curl_lifting_rule_equals_nested_autodiff(x64):
    """The Taylor rule of `CurlLifting` (affine in the network's output, $G$'s derivatives
    one order up by `jets.of_point`) against nested `jax.jacfwd` of the constrained output,
    float64, a random network with the obstacle's constant moved off its start: value,
    gradient, mixed partial and Laplacian of u, v, p to 1e-12 of each row's scale."""
    p = _channel("curl_lifting")
    net = _net(p, seed=2)
    net = eqx.tree_at(lambda n: n.transform.stream.levels, net, p.hard_constraint.stream.levels + 0.05)
    z = p.domain.sample(jax.random.key(3), 4, "interior", jnp.float64)
    requests = [Request(kind, out, axes) for out in range(3) for kind, axes in (
        ("partial", ()), ("partial", (0,)), ("partial", (1,)), ("partial", (0, 1)), ("laplacian", (0, 1)))]
    got = jax.jit(jax.vmap(lambda q: Taylor().derivatives(net, q, requests)))(z)
    d2 = jax.jit(jax.vmap(jax.jacfwd(jax.jacfwd(net))))(z)
    d1 = jax.jit(jax.vmap(jax.jacfwd(net)))(z)
    for r in requests:
        ref = ({(): jax.vmap(net)(z)[:, r.out], (0,): d1[:, r.out, 0], (1,): d1[:, r.out, 1],
                (0, 1): d2[:, r.out, 0, 1]}[r.axes] if r.kind == "partial"
               else d2[:, r.out, 0, 0] + d2[:, r.out, 1, 1])
        scale = float(jnp.max(jnp.abs(ref)))
        assert scale > 0, r
        np.testing.assert_allclose(got[r], ref, rtol=0, atol=1e-12 * scale, err_msg=str(r))
