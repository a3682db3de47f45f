"""Layers own their Taylor rules (`pinnkit.diffops.jets.taylor_rule`).

- the recipe of docs/diffops.md ("How to add a network with a fast Taylor rule"): a
  user's core registered in the user's own code is taken (the generic rule is not) and
  agrees with the nested reverse-mode oracle to fourth order and for the bi-Laplacian,
  float64, rtol 1e-10 (both sides exact up to rounding, as in tests/test_diffops.py);
- a subclass of a layer with a rule does not inherit it (it may override ``__call__``):
  it goes through the generic rule and is still exact;
- a second rule for one type is refused;
- the engine knows no network class and nn/layers.py does not import nn/nets.py (ast).
"""

import ast
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from test_diffops import assert_close, evaluate  # the oracle helpers (tests/ is on sys.path)

from pinnkit.diffops import Autodiff, Layout, Taylor, _taylor, jets
from pinnkit.nn.embeddings import Normalize
from pinnkit.nn.layers import MLP, Network, activate

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = Layout(("x", "y"), ("x", "y"), ("u", "v"))


class SkipMLP(eqx.Module):
    """The docs' example: $y = W_2 \\tanh(W_1 z) + z$."""

    inner: eqx.nn.Linear
    outer: eqx.nn.Linear

    def __call__(self, z):
        return self.outer(jnp.tanh(self.inner(z))) + z


@jets.taylor_rule(SkipMLP)
def _skip_mlp_jet(m: SkipMLP, jet: jets.Jet, *, plan: jets.Plan, keep) -> jets.Jet:
    h = activate("tanh", jets.propagate(m.inner, jet, plan=plan), plan)
    return jets.add(jets.propagate(m.outer, h, plan=plan), jet)


def _skip_net():
    k1, k2 = jax.random.split(jax.random.key(3))
    inner = eqx.nn.Linear(2, 5, key=k1, dtype=jnp.float64)
    core = SkipMLP(inner, eqx.nn.Linear(5, 2, key=k2, dtype=jnp.float64))
    return Network(core, ("u", "v"), ("x", "y"), (Normalize((0.0, 0.0), (2.0, 1.0)),))


def _residual(f):
    return jnp.stack([
        f["u"], *f.grad("v"), f.laplacian("u"), f.partial("v", "x", "x", "y"),
        f.partial("u", "x", "x", "y", "y"), f.biharmonic("v"),
    ])  # fmt: skip


def _points():
    return jax.random.uniform(jax.random.key(5), (3, 2), jnp.float64, 0.0, 1.0)


@pytest.fixture
def f64():
    with jax.enable_x64(True):
        yield


def test_user_rule_is_taken_and_exact(f64, monkeypatch):
    net, pts = _skip_net(), _points()
    ref = evaluate(Autodiff(), _residual, net, LAYOUT, pts)

    def no_generic(*args):
        raise AssertionError("the generic rule was taken")

    with monkeypatch.context() as m:
        m.setattr(_taylor, "generic", no_generic)
        got = evaluate(Taylor(), _residual, net, LAYOUT, pts)
    assert_close(got, ref)


def test_subclass_does_not_inherit_the_rule(f64):
    class Doubled(MLP):  # overrides __call__: MLP's rule would be wrong for it
        def __call__(self, z):
            return 2.0 * super().__call__(z)

    mlp = MLP(2, 2, 4, 1, "tanh", key=jax.random.key(0), dtype=jnp.float64)
    doubled = Doubled(2, 2, 4, 1, "tanh", key=jax.random.key(0), dtype=jnp.float64)
    assert jets.has_rule(mlp) and not jets.has_rule(doubled)
    net = Network(doubled, ("u", "v"), ("x", "y"))
    pts = _points()
    ref = evaluate(Autodiff(), _residual, net, LAYOUT, pts)
    assert_close(evaluate(Taylor(), _residual, net, LAYOUT, pts), ref)


def test_second_rule_for_a_type_is_refused():
    with pytest.raises(ValueError, match="has a Taylor rule already"):
        jets.taylor_rule(SkipMLP)(_skip_mlp_jet)


def _imports(path: Path) -> set[str]:
    """Modules a file imports (relative imports resolved against pinnkit's layout)."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(p for p in (base, node.module or "") if p)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_engine_imports_no_network_and_layers_not_nets():
    for path in sorted((ROOT / "pinnkit" / "diffops").glob("*.py")):
        assert not {m for m in _imports(path) if m.startswith("pinnkit.nn")}, path.name
    assert not {m for m in _imports(ROOT / "pinnkit/nn/layers.py") if m.startswith("pinnkit.nn.nets")}
    assert "pinnkit.nn.layers" in _imports(ROOT / "pinnkit/nn/nets.py")  # the one direction
