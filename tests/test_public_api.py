"""The public API covers pinnkit's own examples: hard initial conditions (`InitialValue`,
its window restart, and in the expression language), `Sphere` at the top level, the
warning when a hard constraint imposes the exact solution, and the EBM's albedo and
insolation coefficients as parameters."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pinnkit
from pinnkit.diffops import Taylor
from pinnkit.expr import ExprError
from pinnkit.problems import PROBLEMS
from pinnkit.problems.expression import HardValueIsExactWarning, expression

HEAT = dict(
    domain={"t": [0, 1], "x": [0, 1]},
    fields=["u", "v"],
    define={"ue": "exp(-t)*sin(pi*x)"},
    equations={"pde": "u_t - u_xx/pi**2", "other": "v - u"},
    exact={"u": "ue", "v": "ue"},
)


def test_public_names():
    assert pinnkit.Sphere is pinnkit.sphere.Sphere
    assert pinnkit.InitialValue is pinnkit.physics.constraints.InitialValue
    assert pinnkit.problems.climate.InitialValue is pinnkit.InitialValue  # the examples use the library's


def test_initial_value_is_exact_at_t0_whatever_the_network():
    g = lambda x: jnp.stack([jnp.cos(x[1])])  # noqa: E731  (one value per constrained output)
    iv = pinnkit.InitialValue(0.5, 2.0, g, (3.0,), outputs=(1,))
    x0, x1 = jnp.array([0.5, 0.3]), jnp.array([2.0, 0.3])
    y = jnp.array([7.0, -4.0])
    np.testing.assert_allclose(iv(x0, y), [7.0, math.cos(0.3)], rtol=1e-6)  # output 0 passes through
    np.testing.assert_allclose(iv(x1, y)[1], math.cos(0.3) + 3.0 * -4.0, rtol=1e-6)  # phi(t1) = 1
    # restart: the previous window's full state (all outputs) at the new start
    later = iv.restart(2.0, 3.0, lambda x: jnp.array([1.0, 5.0]))
    np.testing.assert_allclose(later(jnp.array([2.0, 0.3]), y), [7.0, 5.0])
    with pytest.raises(ValueError, match="one scale per constrained output"):
        pinnkit.InitialValue(0.0, 1.0, g, (1.0, 1.0), outputs=(1,))


def test_expression_hard_initial_condition():
    p = expression(**HEAT, conditions={
        "ends": {"where": "boundary", "dirichlet": 0, "fields": ["u"], "hard": False},
        "start": {"initial": "sin(pi*x)", "fields": ["u"]},
    })
    assert isinstance(p.hard_constraint, pinnkit.InitialValue) and p.enforced == ("start",)
    pts = p.domain.sample(jax.random.key(0), 16, "initial")
    y = jax.vmap(lambda x: p.hard_constraint(x, jnp.ones(2)))(pts)
    np.testing.assert_allclose(y[:, 0], jnp.sin(jnp.pi * pts[:, 1]), atol=1e-6)  # exact at t0
    np.testing.assert_allclose(y[:, 1], 1.0)  # v is not constrained
    # default choice: the Dirichlet condition on the whole boundary before an initial one
    q = expression(**HEAT, conditions={"start": {"initial": "sin(pi*x)", "fields": ["u"]},
                                       "ends": {"where": "boundary", "dirichlet": 0, "fields": ["u"]}})
    assert q.enforced == ("ends",) and isinstance(q.hard_constraint, pinnkit.HardDirichlet)
    with pytest.raises(ExprError, match="one hard constraint"):
        expression(**HEAT, conditions={"a": {"initial": 0, "fields": ["u"], "hard": True},
                                       "b": {"where": "boundary", "dirichlet": 0, "hard": True}})
    with pytest.raises(ExprError, match="can be imposed exactly"):
        expression(**HEAT, conditions={"a": {"where": "left", "dirichlet": 0, "hard": True}})
    with pytest.raises(ExprError, match="expected true or false"):
        expression(**HEAT, conditions={"a": {"initial": 0, "hard": "yes"}})


def test_hard_value_equal_to_the_exact_solution_warns_once():
    with pytest.warns(HardValueIsExactWarning, match="starts at the answer") as rec:
        expression(**HEAT, conditions={"ends": {"where": "boundary", "dirichlet": "ue", "fields": ["u"]}})
    assert len(rec) == 1 and "\n" not in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a value right only on the boundary: no warning
        expression(**HEAT, conditions={"ends": {"where": "boundary", "dirichlet": 0, "fields": ["u"]}})


def test_ebm_albedo_coefficients_are_parameters():
    """Another co-albedo and insolation: the exact solution (Legendre modes from the same
    coefficients) still has ~zero residual, and it differs from the default one."""
    with jax.enable_x64(True):
        p = PROBLEMS["ebm"](a0=0.68, a2=0.1, s2=0.5)
        pts = p.domain.sample(jax.random.key(0), 32, "interior", jnp.float64)
        res = p.residuals(p.reference, p.coeff_values(), {"energy": pts, "poles": pts[:4],
                                                          "initial": pts[:4]}, Taylor())
        assert float(jnp.max(jnp.abs(res["energy"]))) < 1e-9  # tolerance: as tests/test_climate.py
        default = PROBLEMS["ebm"]()
        late = jnp.array([5.0, 0.3])
        assert abs(float(p.reference(late)[0] - default.reference(late)[0])) > 0.5


def test_hard_constraints_share_one_abstract_type():
    """HardDirichlet, InitialValue and DistanceDirichlet are final implementations of one
    `AbstractHardConstraint`; the old import paths give the same classes."""
    from pinnkit.geometry import DistanceDirichlet
    from pinnkit.physics import constraints

    base = pinnkit.AbstractHardConstraint
    assert base is pinnkit.physics.AbstractHardConstraint is constraints.AbstractHardConstraint
    for cls in (constraints.HardDirichlet, constraints.InitialValue, DistanceDirichlet,
                constraints.AbstractTimeRestart):
        assert issubclass(cls, base), cls
    assert pinnkit.nn.layers.HardDirichlet is pinnkit.nn.HardDirichlet is pinnkit.HardDirichlet \
        is constraints.HardDirichlet
    with pytest.raises(TypeError):  # abstract: no __call__
        base()
    for name, params in [("poisson2d", {}), ("burgers", {}), ("kovasznay", {}),
                         ("lid_driven_cavity", {}), ("poisson_ball", {"dim": 3}), ("ebm_inverse", {})]:
        hc = PROBLEMS[name](**params).hard_constraint
        assert isinstance(hc, base), (name, type(hc))


def test_problem_takes_only_a_declared_hard_constraint():
    """A transform of one's own is an `AbstractHardConstraint` subclass; a bare module
    is refused with a message naming the type to subclass."""
    import equinox as eqx

    class Halved(pinnkit.AbstractHardConstraint):
        def __call__(self, x, y):
            return 0.5 * y

    class Bare(eqx.Module):
        def __call__(self, x, y):
            return 0.5 * y

    dom = pinnkit.Interval(0.0, 1.0)
    terms = {"pde": pinnkit.Equation(lambda f, c: f.partial("u", "x"))}
    p = pinnkit.Problem(dom, ("u",), terms, hard_constraint=Halved())
    np.testing.assert_allclose(p.hard_constraint(jnp.zeros(1), jnp.ones(1)), [0.5])
    with pytest.raises(TypeError, match="not a pinnkit.physics.AbstractHardConstraint"):
        pinnkit.Problem(dom, ("u",), terms, hard_constraint=Bare())
