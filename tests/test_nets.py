"""Modified MLP, PirateNet and random weight factorisation (`pinnkit.nn.nets`).

- the Taylor engine's fast rules for the gated cores against the nested reverse-mode
  oracle, orders 1–4, float64, rtol 1e-10 (both sides exact up to rounding, as in
  tests/test_diffops.py), with the gates alpha moved away from 0 so the blocks count;
- PirateNet with alpha = 0 is the linear model W Phi(x) + b of its embedding (the paper's
  initial state), and the physics-informed init is the least-squares fit of that model;
- an RWF layer computes diag(exp s) V z + b and initially equals the plain layer.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree
from test_diffops import assert_close, evaluate  # the oracle helpers (tests/ is on sys.path)

from pinnkit.diffops import Autodiff, Layout, Taylor, collect_requests
from pinnkit.nn.layers import MLP, _init_weight
from pinnkit.nn.nets import Dense, ModifiedMLP, PirateNet, build_network, dense, physics_informed_init


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def _residual(f):
    """Orders 0-4: values, gradient, Laplacian, mixed partials up to u_xxyy."""
    return jnp.stack([
        f["u"], *f.grad("u"), f.partial("v", "x", "y"), f.laplacian("u"),
        f.partial("u", "x", "x", "y"), f.partial("v", "x", "x", "y", "y"),
        f.partial("u", "y", "y", "y", "y"),
    ])  # fmt: skip


def _residual3(f):
    return jnp.stack([f["u"], f.partial("v", "x"), f.laplacian("u"), f.partial("u", "x", "x", "y")])


def _residual2(f):
    """Orders 0-2 (the fourth-order oracle dominates test time; its rules for gates are
    the same functions, checked at order 4 on the PirateNet)."""
    return jnp.stack([f["u"], *f.grad("v"), f.partial("v", "x", "y"), f.laplacian("u")])


LAYOUT = Layout(("x", "y"), ("x", "y"), ("u", "v"))


def _net(kind, *, rwf=None, fourier=(4, 1.0), periodic=None, width=4, depth=2, key=0):
    net = build_network(
        kind, ("x", "y"), ("u", "v"), width=width, depth=depth, activation="tanh",
        init="glorot_normal", bounds=((0.0, -1.0), (1.0, 1.0)), fourier=fourier,
        periodic=periodic, rwf=rwf, key=jax.random.key(key), dtype=jnp.float64,
    )  # fmt: skip
    if kind == "pirate":  # move the gates off 0 so the residual blocks take part
        alphas = [jnp.asarray(0.3 + 0.2 * i, jnp.float64) for i in range(depth)]
        net = eqx.tree_at(lambda n: [b.alpha for b in n.core.blocks], net, alphas)
    return net


def _points(n=2):
    u = jax.random.uniform(jax.random.key(3), (n, 2), jnp.float64)
    return u * jnp.array([[1.0, 2.0]]) + jnp.array([[0.0, -1.0]])


@pytest.mark.parametrize(
    "kind,rwf,periodic,residual",
    [
        # the fourth-order oracle takes ~20-45 s to compile: the one slow test here
        pytest.param("pirate", (0.5, 0.1), None, _residual, marks=pytest.mark.slow),
        ("modified_mlp", None, None, _residual3),
        ("modified_mlp", (1.0, 0.1), {"x": 1.0}, _residual2),
        ("mlp", (1.0, 0.1), {"x": 1.0}, _residual2),
    ],
)
def test_fast_rules_vs_oracle(f64, kind, rwf, periodic, residual):
    net = _net(kind, rwf=rwf, periodic=periodic, fourier=None if periodic else (4, 1.0),
               depth=1)
    pts = _points()
    got = evaluate(Taylor(), residual, net, LAYOUT, pts)
    ref = evaluate(Autodiff(), residual, net, LAYOUT, pts)
    assert_close(got, ref)


def test_fast_rules_are_taken(f64, monkeypatch):
    """The gated cores and RWF layers dispatch to their own rules, not the generic one:
    with the generic rule made to fail, their jets still propagate."""
    from pinnkit.diffops import _taylor, jets

    def no_generic(*args):
        raise AssertionError("the generic rule was taken")

    monkeypatch.setattr(_taylor, "generic", no_generic)
    layout = Layout(("x", "y"), ("x", "y"), ("u",))
    res = lambda f: f.laplacian("u") + f.partial("u", "x", "y")
    reqs = collect_requests(res, layout, jnp.zeros(2, jnp.float64))
    for kind, rwf in (("pirate", None), ("modified_mlp", None), ("mlp", (1.0, 0.1))):
        core = _net(kind, rwf=rwf).core
        assert jets.has_rule(core), kind
        plan = jets.make_plan(reqs)
        jet = jets.propagate(core, jets.input_jet(jnp.zeros(4, jnp.float64), plan), plan=plan)
        assert jet.first is not None and set(jet.rest) == set(plan.rest), kind


def test_parameter_gradients_through_gates(f64):
    """Training differentiates the Taylor propagation: d/dparams of a loss built from
    second derivatives equals the oracle's, gates alpha included."""
    net, pts = _net("pirate", depth=1), _points(3)

    def loss(method, net):
        r = jax.vmap(lambda x: method.evaluate(
            lambda f: f.laplacian("u") + f["v"] * f.partial("u", "x"), net, LAYOUT, x))(pts)
        return jnp.mean(r**2)

    params, static = eqx.partition(net, eqx.is_inexact_array)
    g = lambda m: jax.grad(lambda p: loss(m, eqx.combine(p, static)))(params)  # noqa: E731
    gt, ga = g(Taylor()), g(Autodiff())
    alpha_t = [b.alpha for b in gt.core.blocks]
    assert all(float(abs(a)) > 0 for a in alpha_t)
    for a, b in zip(jax.tree_util.tree_leaves(gt), jax.tree_util.tree_leaves(ga), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10 * float(np.abs(b).max()))


def test_pirate_starts_as_linear_model_of_embedding(f64):
    net = _net("pirate", rwf=(1.0, 0.1))
    net = eqx.tree_at(lambda n: [b.alpha for b in n.core.blocks], net,
                      [jnp.zeros((), jnp.float64)] * len(net.core.blocks))
    pts = _points(16)

    def embed(x):
        for e in net.embedding:
            x = e(x)
        return x

    phi = jax.vmap(embed)(pts)
    out = net.core.out
    linear = phi @ out.matrix().T + out.bias[None]
    np.testing.assert_allclose(jax.vmap(net)(pts), linear, rtol=1e-14, atol=1e-15)
    # a freshly built PirateNet has alpha = 0
    fresh = build_network("pirate", ("x", "y"), ("u", "v"), width=4, depth=2, activation="tanh",
                          init="glorot_normal", bounds=((0.0, -1.0), (1.0, 1.0)), fourier=(4, 1.0),
                          key=jax.random.key(0), dtype=jnp.float64)
    assert all(float(b.alpha) == 0.0 for b in fresh.core.blocks)


def test_physics_informed_init_is_least_squares(f64):
    """Fitting u to a combination of the embedding's own features recovers it exactly;
    fitting a generic function gives the least-squares solution (zero normal-equation
    residual), and v's output row is left unchanged."""
    net = build_network("pirate", ("x", "y"), ("u", "v"), width=4, depth=1, activation="tanh",
                        init="glorot_normal", bounds=((0.0, -1.0), (1.0, 1.0)), fourier=(6, 1.0),
                        key=jax.random.key(5), dtype=jnp.float64)
    pts = jax.random.uniform(jax.random.key(4), (64, 2), jnp.float64)
    phi = jax.vmap(lambda x: net.embedding[1](net.embedding[0](x)))(pts)
    exact = phi @ jnp.arange(1.0, 7.0) - 0.5
    fit = physics_informed_init(net, pts, exact[:, None], outputs=(0,))
    np.testing.assert_allclose(jax.vmap(fit)(pts)[:, 0], exact, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(fit.core.out.weight[1], net.core.out.weight[1])
    target = jnp.sin(3 * pts[:, 0]) * pts[:, 1]
    fit = physics_informed_init(net, pts, target[:, None], outputs=(0,))
    design = jnp.concatenate([phi, jnp.ones((64, 1))], axis=1)
    normal = design.T @ (jax.vmap(fit)(pts)[:, 0] - target)
    assert float(jnp.abs(normal).max()) < 1e-10 * float(jnp.abs(design).max() * jnp.abs(target).max() * 64)


def test_rwf_layer_is_factorised_plain_layer(f64):
    key = jax.random.key(11)
    layer = dense(5, 3, "glorot_normal", (1.0, 0.1), key=key, dtype=jnp.float64)
    plain = dense(5, 3, "glorot_normal", None, key=key, dtype=jnp.float64)
    z = jnp.linspace(-1.0, 1.0, 5)
    s, v = layer.log_scale, layer.weight
    np.testing.assert_allclose(layer(z), (jnp.diag(jnp.exp(s)) @ v) @ z + layer.bias, rtol=1e-14)
    # same initial function as the plain layer (V = diag(e^-s) W0), different parameters
    np.testing.assert_allclose(layer(z), plain(z), rtol=1e-13)
    assert not np.allclose(v, plain.weight)
    assert abs(float(jnp.mean(s)) - 1.0) < 0.2  # s ~ N(1, 0.1)
    w0 = _init_weight(key, "glorot_normal", 3, 5, jnp.float64)
    np.testing.assert_allclose(plain.weight, w0)


def test_rwf_mlp_equals_plain_mlp_at_init(f64):
    a = _net("mlp", rwf=(1.0, 0.1))
    b = _net("mlp")
    assert type(a.core) is MLP and all(type(lin) is Dense for lin in a.core.layers)
    pts = _points(8)
    np.testing.assert_allclose(jax.vmap(a)(pts), jax.vmap(b)(pts), rtol=1e-12)


def test_modified_mlp_gating_formula(f64):
    net = _net("modified_mlp", fourier=None, depth=1)
    core = net.core
    assert type(core) is ModifiedMLP and type(_net("pirate").core) is PirateNet
    z = jnp.array([0.3, -0.4])
    u, v = jnp.tanh(core.encoder_u(z)), jnp.tanh(core.encoder_v(z))
    zz = jnp.tanh(core.hidden[0](z))
    expected = core.out((1 - zz) * u + zz * v)
    np.testing.assert_allclose(core(z), expected, rtol=1e-14)


# ---- selected from config -------------------------------------------------------------

TINY = "configs/tiny/poisson2d.yaml"


def _cfg(*over):
    from pathlib import Path

    from pinnkit.run.config import load_config

    return load_config(Path(__file__).resolve().parents[1] / TINY, list(over))


def test_pi_init_from_config_fits_the_reference():
    """PirateNet + Fourier features + pi_init: the network at step 0 is already the
    least-squares fit of sin(pi x) sin(pi y) by 32 random features (measured rel. L2
    0.08), where the unfitted one is O(1) off."""
    from pinnkit.parallel.mesh import make_mesh
    from pinnkit.run.build import build_run
    from pinnkit.run.metrics import evaluate

    base = ("network.kind=pirate", "network.hard_constraint=false", "network.depth=1",
            "network.fourier={dim: 32, scale: 1.0}", "sampler.batch.boundary=64")
    plain = build_run(_cfg(*base), mesh=make_mesh(1))
    fitted = build_run(_cfg(*base, "network.pi_init=reference"), mesh=make_mesh(1))
    e0 = evaluate(plain.network, plain.problem, 41)[0]["rel_l2"]["u"]
    e1 = evaluate(fitted.network, fitted.problem, 41)[0]["rel_l2"]["u"]
    assert e0 > 0.5 and e1 < 0.1, (e0, e1)


@pytest.mark.trained
def test_pirate_rwf_trains_on_four_devices(trained):
    """A PirateNet with RWF trains under shard_map on 4 devices (the one code path; the
    other kinds differ only in the core, which the oracle tests above cover)."""
    from pinnkit.parallel.mesh import make_mesh
    from pinnkit.run.build import build_run
    from pinnkit.train.loop import RESULTS, fit

    cfg = _cfg("network.kind=pirate", "network.rwf={mean: 0.5, std: 0.1}", "network.width=8",
               "network.depth=1", "train.steps=40", "train.chunk=40", "network.fourier={dim: 8}",
               f"train.seed={trained.seed}")
    res = fit(build_run(cfg, mesh=make_mesh(4)), progress=False)
    losses = [h["loss"] for h in res.history]
    assert res.result is RESULTS.successful
    trained.check("final/first loss", losses[-1] / losses[0], "<", 1 / 5)


@pytest.mark.parametrize(
    "over,match",
    [
        (("network.pi_init=reference",), "network.pi_init: the physics-informed"),
        (("network.kind=pirate", "network.pi_init=reference"), "hard constraint"),
        (("network.kind=pirate", "network.hard_constraint=false", "sampler.batch.boundary=8",
          "network.pi_init=pde"), "not a Dirichlet or initial term"),
        (("network.rwf={std: -1}",), "network.rwf.std"),
        (("network.kind=resnet",), "network.kind: expected one of"),
    ],
)
def test_config_errors(over, match):
    from pinnkit.errors import ConfigError
    from pinnkit.run.build import build_run

    with pytest.raises(ConfigError, match=match):
        build_run(_cfg(*over), with_mesh=False)


def test_pi_init_from_initial_term_extends_it_in_time():
    """pi_init naming Burgers' initial term: the network fits u0(x) = -sin(pi x) on the
    whole (t, x) domain (the initial condition extended constantly in time), so at t = 0
    and at t = 1 it is close to u0: measured 3e-5 with 128 random features (0.7 with 32:
    random plane waves in (t, x) fit a t-independent function poorly)."""
    from pinnkit.run.build import build_run
    from pinnkit.run.config import from_dict

    cfg = from_dict({
        "problem": {"name": "burgers"},
        "network": {"kind": "pirate", "width": 8, "depth": 1, "fourier": {"dim": 128},
                    "pi_init": "initial"},
        "sampler": {"batch": {"pde": 16, "initial": 16, "boundary": 16}},
    })  # fmt: skip
    net = build_run(cfg, with_mesh=False).network
    x = jnp.linspace(-1.0, 1.0, 41)
    u0 = -jnp.sin(jnp.pi * x)
    for t in (0.0, 1.0):
        u = jax.vmap(net)(jnp.stack([jnp.full_like(x, t), x], axis=1))[:, 0]
        assert float(jnp.linalg.norm(u - u0) / jnp.linalg.norm(u0)) < 1e-3, t


def _tangent_fit(squares: bool, target) -> float:
    """Relative residual of the least-squares fit of ``target`` in the span of the
    parameter gradients of a 20-input silu network at initialisation (its tangent space),
    at 3000 points of [-0.3, 0.3]^20."""
    d = 20
    net = build_network(
        "mlp", [f"x{i}" for i in range(d)], ["u"], width=24, depth=2, activation="silu",
        init="glorot_normal", bounds=([-1.0] * d, [1.0] * d), squares=squares,
        key=jax.random.key(0), dtype=jnp.float64,
    )  # fmt: skip
    params, static = eqx.partition(net, eqx.is_inexact_array)
    flat, unravel = ravel_pytree(params)
    x = 0.3 * jax.random.uniform(jax.random.key(1), (3000, d), jnp.float64, -1.0, 1.0)
    jac = np.asarray(jax.vmap(jax.grad(lambda th, p: eqx.combine(unravel(th), static)(p)[0]),
                              (None, 0))(flat, x))
    t = np.asarray(target(x))
    coef, *_ = np.linalg.lstsq(jac, t, rcond=None)
    return float(np.linalg.norm(jac @ coef - t) / np.linalg.norm(t))


def test_squares_put_axis_cubics_in_the_tangent_space(f64):
    """`network.squares` (docs/accuracy.md): with z_i^2 among the inputs, the cubic
    x_0^2 x_1 is nearly in the initial tangent space (measured residual 0.10; what is left
    is the O(|x|) curvature of sigma' over the points) while the plain network misses half
    of it (0.50: its cubic directions x_k (w_j . x)^2 use random w_j). The cubic x_0 x_1 x_2,
    which no square holds, is missed by both (0.63 / 0.51): the gain is the squares'."""
    axis = lambda x: x[:, 0] ** 2 * x[:, 1]  # noqa: E731
    mixed = lambda x: x[:, 0] * x[:, 1] * x[:, 2]  # noqa: E731
    assert _tangent_fit(True, axis) < 0.2 < 0.4 < _tangent_fit(False, axis)
    assert min(_tangent_fit(True, mixed), _tangent_fit(False, mixed)) > 0.4
