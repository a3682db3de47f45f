"""Problems: the exact solution zeroes every term; a wrong one does not."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit import Box, Dirichlet, Equation, Neumann, Observation, Problem, Robin
from pinnkit.diffops import Autodiff, ForwardOverReverse
from pinnkit.problems import PROBLEMS


def _batch(problem, n=64, seed=0):
    key = jax.random.key(seed)
    out = {}
    for i, (name, term) in enumerate(sorted(problem.terms.items())):
        if term.where == "data":
            out[name] = jnp.asarray(term.rows())
        else:
            out[name] = problem.domain.sample(jax.random.fold_in(key, i), n, term.where, jnp.float64)
    return out


def _max_residuals(problem, net, coeffs=None):
    res = problem.residuals(net, coeffs or problem.coeffs, _batch(problem), Autodiff())
    return {k: float(jnp.max(jnp.abs(r))) for k, r in res.items()}


@pytest.mark.parametrize(
    "name,params",
    [
        ("poisson2d", {}),
        ("poisson2d", {"kx": 2, "ky": 3, "amplitude": 0.5}),
        ("poisson", {"lower": [0, 0, 0], "upper": [1, 2, 0.5], "exact": "sine", "k": 2.0}),
        ("poisson", {"lower": [-1.0], "upper": [1.0], "exact": "sine"}),
    ],
)
def test_exact_solution_zeroes_every_term(name, params, x64):
    problem = PROBLEMS[name](**params)
    res = _max_residuals(problem, problem.reference)
    # The PDE residual of sin products is O(λ) ~ 10-100 in size; x64 leaves ~1e-13 of it.
    assert all(v < 1e-9 for v in res.values()), res


def test_negative_control(x64):
    """A perturbed solution (or a wrong coefficient) leaves a clearly non-zero residual."""
    problem = PROBLEMS["poisson2d"]()
    wrong = lambda x: problem.reference(x) * 1.01  # noqa: E731
    assert _max_residuals(problem, wrong)["pde"] > 1e-2
    gen = PROBLEMS["poisson"](exact="sine", k=1.0)
    assert _max_residuals(gen, gen.reference, {"k": jnp.asarray(1.1)})["pde"] > 1e-1


def test_user_source_file(tmp_path, x64):
    src = tmp_path / "user_fns.py"
    src.write_text(
        "import jax.numpy as jnp\n"
        "def exact(x):\n    return x[0]**2 + x[1]**2\n"
        "def source(x):\n    return -4.0 * jnp.ones_like(x[0])\n"
    )
    p = PROBLEMS["poisson"](source=f"{src}:source", exact=f"{src}:exact")
    assert max(_max_residuals(p, p.reference).values()) < 1e-10
    with pytest.raises(Exception, match="has no attribute 'nope'.*defines \\['exact', 'source'\\]"):
        PROBLEMS["poisson"](source=f"{src}:nope")


def test_neumann_robin_observation_terms(x64):
    box = Box((0.0, 0.0), (1.0, 2.0))
    u = lambda x: jnp.atleast_1d(jnp.exp(x[0]) * jnp.cos(x[1]))  # noqa: E731
    pts = np.array([[0.2, 0.3], [0.5, 1.5]])
    obs = np.asarray(jax.vmap(u)(jnp.asarray(pts)))
    terms = {
        "pde": Equation(lambda f, c: f.laplacian("u")),  # harmonic
        # outward normal on the right face is +x: du/dn = u there.
        "right": Neumann("right", target=lambda x: jnp.exp(x[0]) * jnp.cos(x[1])),
        # on the left face n = -x: du/dn = -u, so u + du/dn = 0.
        "left": Robin("left", alpha=1.0, beta=1.0),
        "top": Dirichlet("top", target=lambda x: jnp.exp(x[0]) * jnp.cos(2.0)),
        "data": Observation(pts, obs),
    }
    p = Problem(box, ("u",), terms, reference=u)
    assert max(_max_residuals(p, u).values()) < 1e-12
    bad = lambda x: u(x) + 0.1 * x[0]  # noqa: E731
    res = _max_residuals(p, bad)
    assert res["right"] > 0.05 and res["left"] > 0.05 and res["data"] > 0.01


def test_methods_agree_on_problem_residuals(x64):
    problem = PROBLEMS["poisson2d"]()
    net = lambda x: jnp.atleast_1d(jnp.tanh(x[0] * x[1]) + x[0] ** 3)  # noqa: E731
    b = _batch(problem)
    a = problem.residuals(net, {}, b, Autodiff())
    f = problem.residuals(net, {}, b, ForwardOverReverse())
    for k in a:
        np.testing.assert_allclose(a[k], f[k], rtol=1e-12, atol=1e-12)


def test_problem_validation():
    box = Box((0.0, 0.0), (1.0, 1.0))
    with pytest.raises(ValueError, match="'lid', which this Box does not have"):
        Problem(box, ("u",), {"lid": Dirichlet("lid")})
    with pytest.raises(ValueError, match="constrains field 'v'"):
        Problem(box, ("u",), {"b": Dirichlet("top", fields=("v",))})
    with pytest.raises(ValueError, match="Observation values must be"):
        Observation(np.zeros((3, 2)), np.zeros((2, 1)))


def test_burgers_hard_constraint_is_exact_on_initial_and_boundary(x64):
    """`network.hard_constraint: true` on P3: u = -sin(pi x) + t (1 - x^2) N, so a random
    network meets u(0, x) = -sin(pi x) and u(t, +-1) = 0 to rounding, and is free inside."""
    from pinnkit.run.build import build_run
    from pinnkit.run.config import from_dict

    run = build_run(from_dict({
        "problem": {"name": "burgers"}, "network": {"width": 8, "depth": 2, "hard_constraint": True},
        "sampler": {"batch": {"pde": 64}}, "numerics": {"x64": True},
    }), with_mesh=False)
    net = jax.vmap(run.network)
    x = jnp.linspace(-1.0, 1.0, 11)
    t = jnp.linspace(0.0, 1.0, 11)
    initial = net(jnp.stack([jnp.zeros_like(x), x], 1))[:, 0]
    np.testing.assert_allclose(initial, -jnp.sin(jnp.pi * x), atol=1e-15)
    for side in (-1.0, 1.0):
        np.testing.assert_allclose(net(jnp.stack([t, jnp.full_like(t, side)], 1))[:, 0], 0.0, atol=1e-15)
    inside = net(jnp.array([[0.5, 0.3]]))[0, 0] + jnp.sin(jnp.pi * 0.3)
    assert abs(float(inside)) > 1e-6  # the network's own part is not switched off inside
    assert set(run.sampler.batch) == {"pde"}  # initial and boundary terms are enforced, not sampled
