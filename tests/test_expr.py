"""The expression language (`pinnkit.expr`) and the `expression` problem.

- values and derivatives of compiled expressions against hand-written JAX;
- the derivative requests an expression makes (exactly the derivatives it names);
- every error class, with key, column and suggestion;
- hostile input: rejected with a clear error, nothing executed;
- acceptance: P1 as expressions gives the built-in P1's loss history (float64, rtol 1e-10);
  a tiny heat run lowers the error; a bad expression in a config file exits 2 from the CLI.
"""

import ast
import builtins
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pinnkit.diffops import METHODS, Autodiff, Layout, Request, collect_requests
from pinnkit.errors import ConfigError
from pinnkit.expr import (
    ExprError,
    Resolver,
    Symbols,
    parse,
    point_function,
    residual_function,
)
from pinnkit.problems import PROBLEMS
from pinnkit.problems.expression import ExactMismatchWarning
from pinnkit.run.build import build_run
from pinnkit.run.config import from_dict, load_config
from pinnkit.run.metrics import evaluate
from pinnkit.train.loop import fit

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny"
KEY = "problem.params.equations.pde"

SYM = Symbols(coords=("x", "y"), spatial=("x", "y"), fields=("u", "v"), params={"k": 1.5})
LAYOUT = Layout(("x", "y"), ("x", "y"), ("u", "v"))
COEFFS = {"k": jnp.asarray(1.5)}
POINTS = jnp.asarray([[0.3, 0.7], [0.8, 0.2], [0.55, 0.45]])


def net(z):
    x, y = z
    return jnp.stack([jnp.sin(x) * y**2 + x, jnp.exp(0.5 * x * y)])


def by_hand(fn, layout=LAYOUT, points=POINTS, network=net):
    """``fn(f, coeffs)`` on every point, jitted (one compilation: eager nested autodiff is
    slow on a shared CPU)."""
    at = lambda p: Autodiff().evaluate(fn, network, layout, p, COEFFS)  # noqa: E731
    return jax.jit(jax.vmap(at))(points)


def residuals(text, sym=SYM, layout=LAYOUT, points=POINTS, network=net):
    fn = residual_function(Resolver(sym).components(text, KEY))
    return by_hand(fn, layout, points, network)


def P(f, *cs):
    return f.partial(*cs)


# ------------------------------------------------------------------ values, derivatives

CASES = {
    "u_xx + u_yy": lambda f, c: f.laplacian("u"),
    "lap(u) - u_xx": lambda f, c: P(f, "u", "y", "y"),
    "u_xy - d(u, y, x)": lambda f, c: 0.0 * f["u"],
    "d(x*u, x)": lambda f, c: f["u"] + f.coord("x") * P(f, "u", "x"),
    "d(u*v, x, x)": lambda f, c: (
        P(f, "u", "x", "x") * f["v"] + 2 * P(f, "u", "x") * P(f, "v", "x")
        + f["u"] * P(f, "v", "x", "x")
    ),
    "lap(k*u) - k*lap(u)": lambda f, c: 0.0 * f["u"],
    "div([u, v]) + div(u, v)": lambda f, c: 2 * (P(f, "u", "x") + P(f, "v", "y")),
    "dot(grad(u), grad(v))": lambda f, c: jnp.dot(f.grad("u"), f.grad("v")),
    "div(k*grad(u))": lambda f, c: c["k"] * f.laplacian("u"),
    "-k*lap(u) + sin(pi*x)*exp(-y) - u**3 / (1 + v**2)": lambda f, c: (
        -c["k"] * f.laplacian("u") + jnp.sin(jnp.pi * f.coord("x")) * jnp.exp(-f.coord("y"))
        - f["u"] ** 3 / (1 + f["v"] ** 2)
    ),
    "where(x < 0.5 and not y >= 0.6, u, v) + max(u, v, 0.1) - min(x, y)": lambda f, c: (
        jnp.where((f.coord("x") < 0.5) & ~(f.coord("y") >= 0.6), f["u"], f["v"])
        + jnp.maximum(jnp.maximum(f["u"], f["v"]), 0.1) - jnp.minimum(f.coord("x"), f.coord("y"))
    ),
    "atan2(u, v) + abs(u - v) + sqrt(1 + u**2) + tanh(v)*cosh(u) - sinh(x) + sign(u - 1)": (
        lambda f, c: jnp.arctan2(f["u"], f["v"]) + jnp.abs(f["u"] - f["v"])
        + jnp.sqrt(1 + f["u"] ** 2) + jnp.tanh(f["v"]) * jnp.cosh(f["u"])
        - jnp.sinh(f.coord("x")) + jnp.sign(f["u"] - 1)
    ),
    "arcsin(tanh(u)/2) + arccos(tanh(v)/2) + arctan(u) + log(1 + v**2) + tan(u/10) + e": (
        lambda f, c: jnp.arcsin(jnp.tanh(f["u"]) / 2) + jnp.arccos(jnp.tanh(f["v"]) / 2)
        + jnp.arctan(f["u"]) + jnp.log(1 + f["v"] ** 2) + jnp.tan(f["u"] / 10) + jnp.e
    ),
    "heaviside(x - 0.5) + cos(2*pi*y)": lambda f, c: (
        jnp.heaviside(f.coord("x") - 0.5, 0.5) + jnp.cos(2 * jnp.pi * f.coord("y"))
    ),
}


def test_values_match_hand_written():
    texts = list(CASES)  # all cases as one vector residual: one compilation
    got = residuals(texts)
    want = by_hand(lambda f, c: jnp.stack([jnp.asarray(CASES[t](f, c)) for t in texts]))
    for i, t in enumerate(texts):
        np.testing.assert_allclose(got[:, i], want[:, i], rtol=2e-5, atol=2e-5, err_msg=t)


def test_vector_residual_and_time_coordinate():
    sym = Symbols(("t", "x"), ("x",), ("u",), {"k": 1.5})
    layout = Layout(("t", "x"), ("x",), ("u",))
    one = lambda z: jnp.atleast_1d(jnp.exp(-z[0]) * jnp.sin(3 * z[1]))  # noqa: E731
    got = residuals(["u_t - k*lap(u)", "grad(u)"], sym, layout, network=one)
    want = by_hand(
        lambda f, c: jnp.stack([P(f, "u", "t") - c["k"] * f.laplacian("u"), P(f, "u", "x")]),
        layout, network=one,
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


FUNCS = ["sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "sinh", "cosh", "arcsin",
         "arccos", "arctan", "abs"]


# (expression, derivative orders): every rule to second order, compositions to third.
SMOOTH = [(f"{g}(0.3*x + 0.2*y + 0.1)", [("x",), ("x", "y")]) for g in FUNCS] + [
    (t, [("y", "y", "x")]) for t in (
        "atan2(x, y + 2) * x**y / (1 + x**2)", "max(x, y**2) + min(x*y, 0.3)",
        "where(x > y, x**3, y**0.5)", "(1 + x)**(1.5) / sqrt(1 + y)",
    )
]


def _directional(h, v):
    return lambda p: jax.jvp(h, (p,), (v,))[1]


def test_symbolic_derivatives_match_autodiff():
    r = Resolver(SYM)
    texts = [f"d({t}, {', '.join(cs)})" for t, orders in SMOOTH for cs in orders]
    symbolic = point_function(r.components(texts, KEY, fields_allowed=False), ("x", "y"), {})

    def nested_jvps(z):  # forward-mode autodiff of the compiled (underived) expression
        out = []
        for t, orders in SMOOTH:
            f = point_function(r.components(t, KEY, fields_allowed=False), ("x", "y"), {})
            for cs in orders:
                h = lambda p, f=f: f(p)[0]  # noqa: E731
                for c in cs:
                    h = _directional(h, jnp.eye(2)["xy".index(c)])
                out.append(h(z))
        return jnp.stack(out)

    got = jax.jit(jax.vmap(symbolic))(POINTS)
    want = jax.jit(jax.vmap(nested_jvps))(POINTS)
    for i, t in enumerate(texts):
        np.testing.assert_allclose(got[:, i], want[:, i], rtol=1e-4, atol=1e-5, err_msg=t)


def test_derivative_requests_are_exactly_those_named():
    x = jnp.zeros(2)

    def requests(text):
        fn = residual_function(Resolver(SYM).components(text, KEY))
        return set(collect_requests(fn, LAYOUT, x, COEFFS))

    U, V = 0, 1
    assert requests("u_xx + u_yy + lap(v)") == {
        Request("partial", U, (0, 0)), Request("partial", U, (1, 1)),
        Request("laplacian", V, (0, 1)),
    }
    assert requests("d(k*u_x, x) + v") == {
        Request("partial", U, (0, 0)), Request("partial", V, ()),
    }
    assert requests("lap(u)") == {Request("laplacian", U, (0, 1))}


def test_laplacian_of_a_laplacian_is_one_biharmonic_request():
    """``lap(lap(u))`` over one coordinate set, times factors constant in those coordinates,
    reaches the engine as `f.biharmonic`; a factor that varies, a different inner set or an
    extra term keep the symbolic expansion into partials."""
    x = jnp.zeros(2)

    def requests(text):
        fn = residual_function(Resolver(SYM).components(text, KEY))
        return set(collect_requests(fn, LAYOUT, x, COEFFS))

    U, V = 0, 1
    bilap = Request("biharmonic", U, (0, 1))
    assert requests("lap(lap(u))") == {bilap}
    assert requests("-k*lap(lap(u)) + u") == {bilap, Request("partial", U, ())}
    assert requests("lap(lap(u, y, x), x, y)") == {bilap}
    assert requests("lap(k*lap(u)) - lap(lap(v)/k)") == {bilap, Request("biharmonic", V, (0, 1))}
    assert requests("lap(lap(u, x), x)") == {Request("biharmonic", U, (0,))}
    fourth = {Request("partial", U, a) for a in ((0, 0, 0, 0), (0, 0, 1, 1), (1, 1, 1, 1))}
    assert requests("lap(lap(u) + u)") == fourth | {
        Request("partial", U, (0, 0)), Request("partial", U, (1, 1))}
    assert requests("lap(x*lap(u))") == fourth | {
        Request("partial", U, (0, 0, 0)), Request("partial", U, (0, 1, 1))}
    assert requests("lap(lap(u, x), x, y)") == {
        Request("partial", U, (0, 0, 0, 0)), Request("partial", U, (0, 0, 1, 1))}


def test_biharmonic_expression_matches_the_fourth_partials(x64):
    """configs/tiny/expr_biharmonic.yaml (-D*lap(lap(w)), a hard-constrained network) against
    the same config with -D*(w_xxxx + 2*w_xxyy + w_yyyy): one bi-Laplacian request and 9
    Taylor rows (value, 2 first-order, 3 Hessian, 2 gradient-of-Laplacian, 1 bi-Laplacian)
    against 13; equal residuals with taylor and with autodiff. Tolerance: both sides are
    exact up to float64 rounding of sums of the same terms (~1e-15 of the largest
    residual); 1e-10 of the largest |residual| leaves room without hiding a missing term."""
    from pinnkit.diffops.jets import make_plan as _make_plan

    partials = "-D*(w_xxxx + 2*w_xxyy + w_yyyy)/pi**4 + 4*D*we"
    runs = [
        build_run(load_config(TINY / "expr_biharmonic.yaml", over), with_mesh=False)
        for over in ([], [f"problem.params.equations.pde={partials}"])
    ]
    reqs = []
    for r in runs:
        term = r.problem.terms["pde"]
        fn = lambda f, c, term=term: term.residual(f, c, None)  # noqa: E731
        reqs.append(set(collect_requests(fn, r.problem.layout, jnp.zeros(2), r.problem.coeffs)))
    assert reqs[0] == {Request("biharmonic", 0, (0, 1))}
    assert reqs[1] == {Request("partial", 0, a) for a in ((0, 0, 0, 0), (0, 0, 1, 1), (1, 1, 1, 1))}
    rows = [1 + len(p.dirs) + len(p.rest) for p in map(_make_plan, reqs)]
    assert rows == [9, 13]

    fast, slow = runs
    batch = fast.sampler.host_arrays(jax.random.key(0), fast.problem, fast.dtype)

    @jax.jit
    def pde(batch):
        return {m: [r.problem.residuals(r.network, r.problem.coeffs, batch, METHODS[m]())["pde"]
                    for r in runs] for m in ("taylor", "autodiff")}

    got = pde(batch)
    ref = np.asarray(got["autodiff"][1])
    assert ref.shape == (128, 1) and np.abs(ref).max() > 1.0
    for m, (a, b) in got.items():
        for x in (a, b):
            np.testing.assert_allclose(x, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max(), err_msg=m)


def test_point_functions_constants_and_helpers():
    sym = Symbols(("x", "y"), ("x", "y"), ("u",), {"a": 2.0},
                  helpers={"s": "sin(a*pi*x)", "g": "s*y + lap(s)", "w": ["s", "g"]})
    r = Resolver(sym)
    comps = r.components(["g", "2*pi**2", "dot(w, w)"], KEY, fields_allowed=False)
    fn = point_function(comps, ("x", "y"), {"a": 2.0})
    x, y = 0.3, 0.6
    s = np.sin(2 * np.pi * x)
    g = s * y - 4 * np.pi**2 * s
    np.testing.assert_allclose(fn(jnp.asarray([x, y])), [g, 2 * np.pi**2, s**2 + g**2], rtol=1e-5)
    assert r.components("2*pi**2", KEY)[0].value == 2 * np.pi**2  # folded at build time


# ------------------------------------------------------------------------------- errors


def err(text, sym=SYM, **kw) -> str:
    with pytest.raises(ExprError) as e:
        Resolver(sym).components(text, KEY, **kw)
    msg = str(e.value)
    assert msg.startswith(KEY) and "\n" not in msg
    return msg


def test_unknown_symbol_suggests_and_points_at_the_column():
    msg = err("-lap(u) - sin(pi*xx)")
    assert "unknown symbol 'xx'" in msg and "column 18" in msg and "Did you mean 'x'?" in msg
    assert "'-lap(u) - sin(pi*xx)'" in msg
    msg = err("lapp(u)")
    assert "unknown function 'lapp'" in msg and "Did you mean 'lap'?" in msg
    assert "Did you mean 'k'?" in err("u + kk")
    msg = err("u_z")
    assert "derivative of field 'u'" in msg and "(x, y)" in msg
    assert "not one" in err("d(u, z)") and "is a function" in err("sin + 1")


def test_type_and_dimension_errors():
    assert "dimension mismatch: vectors of 2 and 3" in err("[u, v] + [1, 2, 3]")
    assert "one component per spatial coordinate" in err("div(u, v, u)")
    assert "takes 1 argument, got 2" in err("sin(x, y)")
    assert "comparison" in err("x < 1")
    assert "comparison" in err("where(x, u, v)")
    assert "exponent must be a scalar" in err("sin(grad(u)) ** grad(u)")
    assert "got a vector of 2 components" in err("atan2(grad(u), 1)")
    assert "depends on the field" in err("u + x", fields_allowed=False)
    assert "division by the constant zero" in err("u / (1 - 1)")
    assert "cannot be evaluated" in err("log(0) + u")


def test_declaration_errors():
    def decl(**kw):
        args = dict(coords=("x", "y"), spatial=("x", "y"), fields=("u",))
        with pytest.raises(ExprError) as e:
            Resolver(Symbols(**{**args, **kw}))
        return str(e.value)

    assert "reads as a derivative of field 'u'" in decl(fields=("u", "u_x"))
    assert "reserved" in decl(params={"pi": 3.0})
    assert "declared twice" in decl(params={"u": 1.0})
    assert "may not contain '_'" in decl(coords=("x_1", "y"))
    assert "cycle: a -> b -> a" in decl(helpers={"a": "b + 1", "b": "2*a"})
    # A name that reads as two different derivatives is ambiguous where it is used.
    sym = Symbols(("x", "xx"), ("x", "xx"), ("u",))
    assert "ambiguous" in err("u_xxx", sym) and "d(u, x, xx)" in err("u_xxx", sym)


def problem(**kw):
    base = dict(
        domain={"x": [0, 1], "y": [0, 1]}, fields=["u"],
        equations={"pde": "-lap(u) - 1"},
        conditions={"boundary": {"where": "boundary", "dirichlet": 0}},
    )
    return PROBLEMS["expression"](**{**base, **kw})


def problem_error(**kw) -> str:
    with pytest.raises(ExprError) as e:
        problem(**kw)
    return str(e.value)


def test_problem_errors():
    msg = problem_error(conditions={"c": {"where": "topp", "dirichlet": 0}})
    assert "no boundary 'topp'" in msg and "Did you mean 'top'?" in msg
    assert "add t: [t0, t1]" in problem_error(conditions={"c": {"initial": 0}})
    assert "dimension mismatch: 2 values for 1 field" in problem_error(
        conditions={"c": {"where": "left", "dirichlet": [0, 1]}}
    )
    assert "'w' is not a field" in problem_error(
        conditions={"c": {"where": "left", "dirichlet": 0, "fields": ["w"]}}
    )
    assert "network.periodic" in problem_error(conditions={"c": {"where": "left", "periodic": 1}})
    assert "'sphere' domains are not in pinnkit's core yet" in problem_error(
        domain={"kind": "sphere", "radius": 1}
    )
    assert "does not involve any field" in problem_error(equations={"pde": "sin(x)"})
    assert "missing ['u']" in problem_error(exact={"v": "x"})
    assert "depends on the field" in problem_error(exact={"u": "u_x"})
    assert "problem.params.equations.pde" in problem_error(equations={"pde": "lap(w)"})


def test_exact_solution_mismatch_warns_with_size():
    with pytest.warns(ExactMismatchWarning, match=r"condition 'boundary'.*max \|residual\| = 0\.1"):
        problem(equations={"pde": "-lap(u)"}, exact={"u": "x + y + 0.1"},
                conditions={"boundary": {"on": "boundary", "dirichlet": "x + y"}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a consistent exact solution gives no warning
        p = problem(equations={"pde": "-lap(u) - 2*pi**2*sin(pi*x)*sin(pi*y)"},
                    exact={"u": "sin(pi*x)*sin(pi*y)"})
    assert p.hard_constraint is not None and p.enforced == ("boundary",)


# ------------------------------------------------------------------------ hostile input

HOSTILE = {
    "__import__('os').system('touch {marker}')": "attribute access",
    "__import__('os')": "names starting with '_'",
    "__builtins__": "names starting with '_'",
    "().__class__.__bases__[0].__subclasses__()": "attribute access",
    "u.__class__": "attribute access",
    "lambda: __import__('os')": "lambda",
    "[i for i in range(10)]": "comprehensions",
    "{i: 1 for i in u}": "comprehensions",
    "9**9**9": "exponent 387420489 too large",
    "u**(10**400)": "exponent",
    "1e999 * u": "number too large",
    "9" * 400 + "*u": "number too large",
    "(" * 10_000 + "u" + ")" * 10_000: "nested too deeply",
    "-" * 3000 + "u": "nested too deeply",
    "u + " * 2000 + "u": "too long",
    "open('/etc/passwd')": "strings",
    "eval(u)": "unknown function 'eval'",
    "exec(u)": "unknown function 'exec'",
    "sin(*u)": "starred",
    "sin(x=1)": "keyword arguments",
    "f'{u}'": "strings",
    "u if x else v": "where(c, a, b)",
    "(u := 1)": "assignment",
    "u @ v": "operator '@'",
    "u[0]": "indexing",
    "import os": "invalid syntax",
    "u; __import__('os')": "invalid syntax",
    "None": "the constant None",
    "...": "the constant Ellipsis",
    "True + u": "the constant True",
}


def test_hostile_expressions_are_rejected_without_running_anything(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"

    def forbidden(*a, **k):
        raise AssertionError("user text reached eval/exec/system")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(os, "system", forbidden)
    for text, fragment in HOSTILE.items():
        msg = err(text.replace("{marker}", str(marker)))
        assert fragment in msg, (text[:40], msg)
        assert len(msg) < 800
    assert not marker.exists()


def test_the_expression_package_never_evaluates_text():
    banned = {"eval", "exec", "compile", "__import__", "open"}
    for path in (ROOT / "pinnkit" / "expr").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in banned, (path, node.func.id)
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = {a.name for a in node.names} | {getattr(node, "module", None)}
                assert not names & {"os", "subprocess", "importlib", "builtins"}, path


def test_parse_positions():
    tree = parse("  1 +\n sin(x)", KEY)
    assert tree.kind == "bin" and tree.args[1].kind == "call" and tree.args[1].pos == 4


# ----------------------------------------------------------------------------- configs


@pytest.mark.parametrize(
    "name", ["poisson2d_expr", "helmholtz2d", "heat_source", "reaction_diffusion"]
)
def test_example_configs_build_without_warnings(name):
    cfg = load_config(ROOT / "configs" / f"{name}.yaml")
    run = build_run(cfg, with_mesh=False)
    assert run.problem.reference is not None and set(run.problem.terms) == set(cfg.sampler.batch)


@pytest.mark.skipif("taylor" not in METHODS, reason="no Taylor method")
def test_expression_residuals_under_the_taylor_method_match_autodiff():
    run = build_run(load_config(TINY / "expr_heat_source.yaml"), with_mesh=False)
    batch = run.sampler.host_arrays(jax.random.key(0), run.problem, run.dtype)

    @jax.jit
    def losses(batch):
        p = run.problem
        return [p.loss_terms(run.network, p.coeffs, batch, METHODS[m]()) for m in ("fwd_rev", "taylor")]

    ref, taylor = losses(batch)
    for k in ref:
        np.testing.assert_allclose(taylor[k], ref[k], rtol=1e-5, err_msg=k)


def test_p1_as_expressions_matches_builtin_loss_history(x64):
    histories = []
    for name in ("expr_poisson2d_builtin", "expr_poisson2d"):
        run = build_run(load_config(TINY / f"{name}.yaml"))
        histories.append(fit(run, progress=False).history)
    a, b = histories
    assert [r["step"] for r in a] == [r["step"] for r in b] and len(a) >= 5
    np.testing.assert_allclose([r["loss"] for r in b], [r["loss"] for r in a], rtol=1e-10)
    for ra, rb in zip(a, b, strict=True):
        assert ra["terms"].keys() == rb["terms"].keys()
        for k in ra["terms"]:
            np.testing.assert_allclose(rb["terms"][k], ra["terms"][k], rtol=1e-10)


@pytest.mark.trained
def test_tiny_heat_run_lowers_the_error(trained):
    run = build_run(load_config(TINY / "expr_heat_source.yaml", [f"train.seed={trained.seed}"]))
    before = evaluate(run.network, run.problem, resolution=21)[0]["rel_l2"]["u"]
    res = fit(run, progress=False)
    after = evaluate(res.network, run.problem, resolution=21)[0]["rel_l2"]["u"]
    trained.check("final/first loss", res.history[-1]["loss"] / res.history[0]["loss"], "<", 1.0)
    trained.check("error after/before", after / before, "<", 0.5)


def test_bad_expression_in_a_config_file_exits_2_with_one_paragraph(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "problem:\n  name: expression\n  params:\n    domain: {x: [0, 1], y: [0, 1]}\n"
        "    fields: [u]\n    equations: {pde: -lap(u) - sin(pi*xx)}\n"
    )
    exe = Path(sys.executable).with_name("pinnkit")
    out = subprocess.run(
        [str(exe), "train", str(cfg), "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert out.returncode == 2, out.stderr
    err_text = out.stderr.strip()
    assert "Traceback" not in err_text and "\n\n" not in err_text
    flat = " ".join(err_text.split())
    assert "problem.params.equations.pde" in flat and "unknown symbol 'xx'" in flat
    assert "column 18" in flat and "Did you mean 'x'?" in flat


def test_config_errors_name_the_key():
    data = {"problem": {"name": "expression", "params": {
        "domain": {"x": [0, 1]}, "fields": ["u"], "equations": {"pde": "u_xx + 1"},
        "conditions": {"ends": {"where": "top", "dirichlet": 0}}}}}
    with pytest.raises(ConfigError, match=r"conditions\.ends\.where: the domain has no boundary 'top'"):
        build_run(from_dict(data), with_mesh=False)
    # `on` is an alias of `where`; unquoted in YAML it arrives as the key True.
    for on in ("on", True):
        conds = {"left": {on: "left", "neumann": 1}, "b": {"where": "bottom", "robin": {"alpha": 2}}}
        p = problem(conditions=conds)
        assert p.terms["left"].where == "left" and p.terms["b"].where == "bottom"


def test_small_integer_powers_are_products(x64):
    """``a**n`` for a constant integer 1 <= |n| <= 16 is written with ``*`` (and one
    division for n < 0), not ``lax.integer_pow`` (whose derivative rule trips shard_map's
    varying-axes check, tests/test_geometry_config.py); the values agree with ``**`` to
    float64 rounding of the few products (rtol 1e-14), other exponents are left alone."""
    r = Resolver(SYM)
    texts = ["x**2", "x**3", "y**5", "x**(-3)", "(x + y)**16", "x**0.5", "x**0", "y**17"]
    fn = point_function(r.components(texts, KEY, fields_allowed=False), ("x", "y"), {})
    p = jnp.asarray([0.7, 1.3])
    want = np.asarray([0.7**2, 0.7**3, 1.3**5, 0.7**-3, 2.0**16, 0.7**0.5, 1.0, 1.3**17])
    np.testing.assert_allclose(np.asarray(fn(p)), want, rtol=1e-14)
    jaxpr = str(jax.make_jaxpr(fn)(p))
    assert jaxpr.count("integer_pow") == 1  # y**17 only (the IR folds x**0 to 1)
