"""Self-scaled quasi-Newton (`ssbfgs`, `ssbroyden`) and the Woodbury / SPRING natural
gradient (`pinnkit.optim.woodbury`), float64 throughout.

- SSBFGS and SSBroyden reach the minimiser of 2-D Rosenbrock to the last bit in about the
  three dozen iterations a dense BFGS with a Wolfe line search needs from the standard
  start, and a strictly convex quadratic (least squares, 8 unknowns) in n = 8 steps with
  a near-exact line search (quadratic termination), to machine precision at step 9.
- Two steps' tau_k, phi_k and H_k against a numpy recomputation from the step sizes.
- Skipped updates (y.s = 0), resets (non-finite gradient), a resumed state bit-identical.
- The dense-memory check names the parameter count, the memory and L-BFGS.
- Woodbury and Gramian directions agree on a real network's Jacobian with fewer and with
  more rows than parameters, agree with `natural_gradient` (the Gramian of
  `Loss.gauss_newton`), and 1 and 4 devices agree; SPRING's closed forms agree and
  minimise their objective; momentum 0 is the plain step.
- The lazy (chord) Gauss-Newton step (``refresh``) reads the Gramian on refresh steps
  only, reaches plain Gauss-Newton's minimiser, solves with the old factor in between,
  and refuses (then refreshes after) a step that raises the loss.
"""

import io
from functools import partial
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

from pinnkit.errors import ConfigError
from pinnkit.optim import natural_gradient
from pinnkit.optim.quasi_newton import check_dense_memory, dense_memory_bytes, ssbfgs, ssbroyden
from pinnkit.optim.woodbury import (
    gram_rows,
    gramian,
    natural_gradient_direction,
    weighted_rows,
    woodbury_natural_gradient,
)
from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train.loss import make_loss
from pinnkit.train.step import point_arrays, split_model

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "poisson2d.yaml"
MEMBERS = {"ssbfgs": ssbfgs, "ssbroyden": ssbroyden}
EPS = np.finfo(np.float64).eps


def rosenbrock(p):
    x = p["x"]
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def _run(opt, f, p0, steps, state=None):
    """``steps`` quasi-Newton steps in one scan; returns (params, state, params per step)."""

    def body(c, _):
        p, s = c
        v, g = jax.value_and_grad(f)(p)
        u, s = opt.update(g, s, p, value=v, grad=g, value_fn=f)
        p = optax.apply_updates(p, u)
        return (p, s), p

    (p, s), trace = jax.jit(lambda p, s: jax.lax.scan(body, (p, s), None, length=steps))(
        p0, opt.init(p0) if state is None else state)
    return p, s, trace


@pytest.mark.parametrize("member", sorted(MEMBERS))
@pytest.mark.parametrize(("guess", "bound"), [("unit", 45), ("last", 57)])
def test_rosenbrock_to_machine_precision(x64, member, guess, bound):
    """From (-1.2, 1): x = (1, 1) to 4 ulp, measured at iteration 38 (SSBFGS) and 36
    (SSBroyden); a dense BFGS with a Wolfe line search needs about three dozen from this
    start (superlinear convergence once near the valley's end). Bound 45. With the first
    trial near the last accepted step (``step_guess: last``) 49 and 47 (bound 57): the
    guess grows back to the unit step, so the superlinear end is still reached."""
    _, state, trace = _run(MEMBERS[member](step_guess=guess), rosenbrock, {"x": jnp.array([-1.2, 1.0])}, 80)
    err = np.abs(np.asarray(trace["x"]) - 1.0).max(axis=1)
    reached = np.flatnonzero(err <= 4 * EPS)
    assert reached.size and reached[0] + 1 <= bound and np.all(err[reached[0]:] <= 4 * EPS), err
    assert int(state.resets) == 0


@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_least_squares_quadratic_termination(x64, member):
    """f = mean((A t - b)^2)/2, A 40 x 8. With a near-exact line search (curv_rtol 1e-3)
    every member of the (self-scaled) Broyden family ends on a quadratic in n = 8 steps
    (conjugate directions); measured relative error 8e-12 at step 8 (the line search's
    1e-3 tolerance), 5e-15 (23 eps) at step 9: machine precision, as lstsq's own
    reference carries kappa(A^T A) eps ~ 1e-15 (bound 100 eps). With the default inexact
    search (0.9): 2e-11 at step 14 (bound 1e-9 at 16)."""
    k = jax.random.split(jax.random.key(0), 2)
    a, b = jax.random.normal(k[0], (40, 8)), jax.random.normal(k[1], (40,))
    solution = np.linalg.lstsq(np.asarray(a), np.asarray(b), rcond=None)[0]
    f = lambda p: 0.5 * jnp.mean((a @ p["t"] - b) ** 2)
    scale = np.abs(solution).max()
    _, _, trace = _run(MEMBERS[member](curv_rtol=1e-3), f, {"t": jnp.zeros(8)}, 10)
    err = np.abs(np.asarray(trace["t"]) - solution).max(axis=1) / scale
    assert err[7] < 1e-10 and err[8] < 100 * EPS, err
    _, _, trace = _run(MEMBERS[member](), f, {"t": jnp.zeros(8)}, 16)
    assert np.abs(np.asarray(trace["t"][-1]) - solution).max() / scale < 1e-9


def _numpy_scalars(b, h, n, broyden):
    """tau, phi of the papers' formulas, written out again in numpy."""
    tau1 = min(1.0, 1.0 / b)
    if not broyden:
        return tau1, 1.0
    a = b * h - 1.0
    c = np.sqrt(a / (1.0 + a))
    rho = min(1.0, h * (1.0 - c))
    theta = max((rho - 1.0) / a, min(1.0 / rho, (1.0 - b) / b))
    sigma = 1.0 + a * theta
    p = sigma ** (-1.0 / (n - 1))
    tau = tau1 * min(p, 1.0 / theta) if theta > 0 else min(tau1 * p, sigma)
    return tau, (1.0 - theta) / (1.0 + a * theta)


@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_scaling_factors_against_numpy(x64, member):
    """Two steps on f = x^T A x / 2 + sum(x^4)/4 (A's eigenvalues 0.05..0.5, so b_k > 1 and
    the scaling is active): tau_k, phi_k, H_2 and x_2 recomputed in numpy from the step
    sizes alpha_k alone. rtol 1e-11: a few float64 roundings of O(1) quantities."""
    n = 5
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(n, n)))
    a = q @ np.diag(np.linspace(0.05, 0.5, n)) @ q.T
    f = lambda p: 0.5 * p["x"] @ jnp.asarray(a) @ p["x"] + 0.25 * jnp.sum(p["x"] ** 4)
    grad = lambda x: a @ x + x**3
    opt = MEMBERS[member]()
    x, h = np.linspace(1.0, -1.0, n), np.eye(n)
    p, state = {"x": jnp.asarray(x)}, opt.init({"x": jnp.asarray(x)})
    taus = []
    for _ in range(2):
        v, g = jax.value_and_grad(f)(p)
        u, state = opt.update(g, state, p, value=v, grad=g, value_fn=f)
        p = optax.apply_updates(p, u)
        alpha = float(state.step_size)
        gx = grad(x)
        s = -alpha * h @ gx
        y = grad(x + s) - gx
        ys, hy = y @ s, h @ y
        tau, phi = _numpy_scalars(-alpha * (s @ gx) / ys, (y @ hy) / ys, n, member == "ssbroyden")
        v_k = np.sqrt(y @ hy) * (s / ys - hy / (y @ hy))
        h = (h - np.outer(hy, hy) / (y @ hy) + phi * np.outer(v_k, v_k)) / tau + np.outer(s, s) / ys
        x = x + s
        np.testing.assert_allclose([float(state.tau), float(state.phi)], [tau, phi], rtol=1e-11)
        np.testing.assert_allclose(float(state.curvature), ys, rtol=1e-11)
        taus.append(tau)
    np.testing.assert_allclose(state.inv_hessian, h, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(p["x"], x, rtol=1e-11, atol=1e-14)
    assert min(taus) < 0.9  # the self-scaling did act


def test_skipped_update_and_reset(x64):
    """A linear f has y_k = 0: the update is skipped and H stays I. A NaN gradient resets
    H to I and the step is not taken."""
    f = lambda p: jnp.sum(jnp.arange(1.0, 4.0) * p["x"])
    p = {"x": jnp.zeros(3)}
    opt = ssbroyden(max_linesearch_steps=5)
    v, g = jax.value_and_grad(f)(p)
    u, state = opt.update(g, opt.init(p), p, value=v, value_fn=f)
    assert int(state.skipped) == 1 and int(state.resets) == 0
    np.testing.assert_array_equal(state.inv_hessian, np.eye(3))
    assert float(jnp.abs(u["x"]).max()) > 0  # the step itself is still taken
    bad = {"x": jnp.array([1.0, jnp.nan, 0.0])}
    u, state = opt.update(bad, state._replace(inv_hessian=2 * jnp.eye(3)), p, value=v, value_fn=f)
    np.testing.assert_array_equal(u["x"], 0.0)
    np.testing.assert_array_equal(state.inv_hessian, np.eye(3))
    assert int(state.resets) == 1


def test_resume_bit_identical(x64):
    """10 SSBroyden steps on Rosenbrock against 5 steps, the state (inverse Hessian, line
    search, counters) through equinox's tree_serialise_leaves to bytes and back into a
    fresh template, then 5 more: every bit equal."""
    opt = ssbroyden()
    p0 = {"x": jnp.array([-1.2, 1.0])}
    p_full, s_full, _ = _run(opt, rosenbrock, p0, 10)
    p_half, s_half, _ = _run(opt, rosenbrock, p0, 5)
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, (p_half, s_half))
    buf.seek(0)
    template = (p0, opt.init(p0))
    p_back, s_back = eqx.tree_deserialise_leaves(buf, template)
    p_rest, s_rest, _ = _run(opt, rosenbrock, p_back, 5, state=s_back)
    assert float(rosenbrock(p_full)) > 1e-6  # still moving at step 10: a real test
    for a, b in zip(jax.tree.leaves((p_full, s_full)), jax.tree.leaves((p_rest, s_rest)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_dense_memory_check():
    """3 x P^2 x itemsize; past the limit a ConfigError with the count, memory and lbfgs."""
    assert dense_memory_bytes(1000, np.float64) == 3 * 8 * 10**6
    assert dense_memory_bytes(1000, np.float32) == 3 * 4 * 10**6
    check_dense_memory(3021, np.float64)  # the papers' Burgers network: 219 MB
    message = r"1,000 trainable parameters in float32 it needs 11\.4 MiB.*977 KiB.*lbfgs"
    with pytest.raises(ConfigError, match=message):
        ssbfgs(max_memory_bytes=1e6).init({"w": jnp.zeros((10, 100))})
    with pytest.raises(ConfigError, match="ssbroyden"):
        check_dense_memory(10**6, np.float64, name="ssbroyden")


def _rows(n_pde, n_boundary, mesh=1):
    """A real network's weighted residual rows: tiny Poisson config, width 8 (105
    parameters), soft boundary term, float64."""
    cfg = load_config(TINY, ["numerics.x64=true", "network.width=8", "network.hard_constraint=false",
                             f"sampler.batch={{pde: {n_pde}, boundary: {n_boundary}}}"])
    run = build_run(cfg, mesh=make_mesh(mesh))
    params, static = split_model(run)
    flat, unravel = ravel_pytree(params)
    batch = {k: jnp.asarray(v) for k, v in point_arrays(build_run(cfg, mesh=make_mesh(1))).items()}
    res = run.problem.residual_jacobians(lambda th: eqx.combine(unravel(th), static), flat, batch,
                                         run.method)
    return run, params, static, *weighted_rows(res, run.weights)


# Damping 1e-3: kappa(G + lambda I) <= 1 + P/damping ~ 1e5, so either solve's relative
# error is <= ~eps * 1e5 = 2e-11; measured 1e-12 (rows < P) and 1e-12 (rows > P).
REGIMES = pytest.mark.parametrize("n_pde,n_boundary", [(16, 8), (256, 64)], ids=["rows<P", "rows>P"])


@REGIMES
def test_woodbury_equals_gramian_and_natural_gradient(x64, n_pde, n_boundary):
    run, params, static, jac, res = _rows(n_pde, n_boundary)
    assert (jac.shape[0] < jac.shape[1]) == (n_pde < 100)
    d_w, lam_w = natural_gradient_direction(jac, res, damping=1e-3, solver="woodbury")
    d_g, lam_g = natural_gradient_direction(jac, res, damping=1e-3, solver="gramian")
    np.testing.assert_allclose(d_w, d_g, rtol=1e-10, atol=1e-10 * float(jnp.abs(d_g).max()))
    np.testing.assert_allclose(lam_w, lam_g, rtol=1e-14)
    # the same rows give Loss.gauss_newton's Gramian and gradient, so natural_gradient's step
    gauss_newton = make_loss(run, static).gauss_newton
    _, _, gram, grads = jax.jit(lambda *a: gauss_newton(*a))(params, jax.random.key(0), point_arrays(run))
    np.testing.assert_allclose(jac.T @ jac, gram, rtol=1e-12, atol=1e-14 * float(jnp.abs(gram).max()))
    old, _ = natural_gradient(damping=1e-3, grid=1).update(
        grads, natural_gradient().init(params), params, gramian=gram, value_fn=lambda p: 0.0)
    np.testing.assert_allclose(ravel_pytree(old)[0], d_w, rtol=1e-10, atol=1e-10 * float(jnp.abs(d_g).max()))


@pytest.mark.parametrize("n", [512, 515, 256, 100, 6])
def test_gram_rows_blocks(x64, n):
    """The block-triangular J J^T (4 row blocks when each has >= 64 rows: n = 512, 256,
    and 515 in blocks one row apart; the plain product for 100 and 6) equals J @ J.T to
    rounding (sums of P = 700 products, |error| <= P eps max|J|^2, ~1e-13 here) and is
    exactly symmetric; with it
    the point-space direction still equals the parameter-space one (rows < P)."""
    jac = jax.random.normal(jax.random.key(n), (n, 700), jnp.float64)
    k = gram_rows(jac)
    np.testing.assert_allclose(k, jac @ jac.T, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(k, k.T)
    res = jax.random.normal(jax.random.key(1), (n,), jnp.float64)
    d_w, _ = natural_gradient_direction(jac, res, damping=1e-3, solver="woodbury")
    d_g, _ = natural_gradient_direction(jac, res, damping=1e-3, solver="gramian")
    np.testing.assert_allclose(d_w, d_g, rtol=0, atol=1e-9 * float(jnp.abs(d_g).max()))


@pytest.mark.parametrize("p", [515, 40])
def test_gramian_is_jtj_by_blocks(x64, p):
    """`gramian` (J^T J as the blocks of the transposed copy; the plain product under 64
    parameters a block) equals J.T @ J to rounding (sums of 700 products) and is exactly
    symmetric."""
    jac = jax.random.normal(jax.random.key(p), (700, p), jnp.float64)
    g = jax.jit(gramian)(jac)
    np.testing.assert_allclose(g, jac.T @ jac, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(g, g.T)


@REGIMES
@pytest.mark.parametrize("solver", ["woodbury", "gramian"])
def test_one_and_four_devices_same_direction(x64, n_pde, n_boundary, solver):
    """The transformation with ``mesh`` (shard_map over 4 devices, rows sharded; SPRING
    momentum 0.9 from a nonzero velocity) against the same on one device, rtol 1e-10
    (measured 1e-14 woodbury, 2e-12 gramian: different summation orders)."""
    _, params, _, jac, res = _rows(n_pde, n_boundary)
    mesh = make_mesh(4)
    velocity = jax.random.normal(jax.random.key(3), (jac.shape[1],))
    outs = []
    for m in (None, mesh):
        opt = woodbury_natural_gradient(damping=1e-3, solver=solver, momentum=0.9, learning_rate=1.0, mesh=m)
        state = opt.init(params)._replace(velocity=velocity)
        args = (jac, res) if m is None else jax.device_put(
            (jac, res), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data")))
        upd, new = jax.jit(partial(opt.update, value_fn=lambda p: 0.0))(
            params, state, params, jacobian=args[0], residual=args[1])
        outs.append((np.asarray(ravel_pytree(upd)[0]), np.asarray(new.velocity)))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-10, atol=1e-10 * np.abs(outs[0][0]).max())
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-10, atol=1e-10 * np.abs(outs[0][1]).max())


@REGIMES
def test_spring_momentum(x64, n_pde, n_boundary):
    """phi_k of the Woodbury form equals (G + lambda I)^-1 (J^T r + lambda mu phi_{k-1}) and
    zeroes the gradient of |J phi - r|^2 + lambda |phi - mu phi_{k-1}|^2; momentum 0 with a
    velocity is exactly the plain step."""
    _, _, _, jac, res = _rows(n_pde, n_boundary)
    prev = jax.random.normal(jax.random.key(5), (jac.shape[1],)) * 1e-2
    kw = dict(damping=1e-3, momentum=0.9, previous=prev)
    d_w, lam = natural_gradient_direction(jac, res, solver="woodbury", **kw)
    d_g, _ = natural_gradient_direction(jac, res, solver="gramian", **kw)
    np.testing.assert_allclose(d_w, d_g, rtol=1e-10, atol=1e-10 * float(jnp.abs(d_g).max()))
    phi = -d_w
    stationary = jac.T @ (jac @ phi - res) + lam * (phi - 0.9 * prev)
    assert float(jnp.linalg.norm(stationary)) < 1e-9 * float(jnp.linalg.norm(jac.T @ res))
    plain, _ = natural_gradient_direction(jac, res, damping=1e-3)
    zero_mu, _ = natural_gradient_direction(jac, res, damping=1e-3, momentum=0.0, previous=prev)
    np.testing.assert_array_equal(plain, zero_mu)
    assert not np.allclose(plain, d_w, rtol=1e-3)


def test_woodbury_step_solves_underdetermined_least_squares(x64):
    """Residuals A t - b with 10 rows and 30 unknowns: at damping 0 the Gramian is singular
    but the point-space step is the minimum-norm Gauss-Newton step, so one step from 0
    lands on pinv(A) b; the grid picks eta = 1; a fixed learning rate scales the step."""
    k = jax.random.split(jax.random.key(2), 2)
    a, b = jax.random.normal(k[0], (10, 30)), jax.random.normal(k[1], (10,))
    loss = lambda p: jnp.mean((a @ p["t"] - b) ** 2)
    params = {"t": jnp.zeros(30)}
    scale = jnp.sqrt(2.0 / 10)
    kw = dict(jacobian=scale * a, residual=scale * (a @ params["t"] - b), value_fn=loss)
    opt = woodbury_natural_gradient(damping=0.0, grid=8)
    upd, state = opt.update(params, opt.init(params), params, **kw)
    np.testing.assert_allclose(upd["t"], np.linalg.pinv(np.asarray(a)) @ np.asarray(b), rtol=1e-10)
    assert float(state.step_size) == 1.0 and int(state.count) == 1
    half, _ = woodbury_natural_gradient(damping=0.0, learning_rate=0.5).update(
        params, opt.init(params), params, **kw)
    np.testing.assert_allclose(half["t"], 0.5 * upd["t"], rtol=1e-14)


def test_woodbury_fixed_step_follows_a_schedule_of_the_step_count(x64):
    """``learning_rate`` as a schedule: step k takes eta_k = 0.5^(k+1) of the same
    direction. From 0 with damping 0 the direction is pinv(A) b (as above), so the first
    update is 0.5 pinv(A) b; from 0 again with the state of one step taken, 0.25 pinv(A) b
    (the count, not the parameters, picks eta; powers of 2 are exact also in the float32
    that optax's exponential_decay returns)."""
    k = jax.random.split(jax.random.key(3), 2)
    a, b = jax.random.normal(k[0], (10, 30)), jax.random.normal(k[1], (10,))
    params = {"t": jnp.zeros(30)}
    scale = jnp.sqrt(2.0 / 10)
    kw = dict(jacobian=scale * a, residual=scale * (a @ params["t"] - b),
              value_fn=lambda p: jnp.mean((a @ p["t"] - b) ** 2))
    opt = woodbury_natural_gradient(damping=0.0, learning_rate=optax.exponential_decay(0.5, 1, 0.5))
    first, state = opt.update(params, opt.init(params), params, **kw)
    second, state = opt.update(params, state, params, **kw)
    exact = np.linalg.pinv(np.asarray(a)) @ np.asarray(b)
    np.testing.assert_allclose(first["t"], 0.5 * exact, rtol=1e-10)
    np.testing.assert_allclose(second["t"], 0.5 * first["t"], rtol=1e-14)
    assert float(state.step_size) == 0.25 and int(state.count) == 2


@pytest.mark.parametrize("kw,match", [
    ({"solver": "cholesky"}, "solver"), ({"momentum": 1.0}, "momentum"),
    ({"damping": -1.0}, "damping"), ({"learning_rate": 0.0}, "learning_rate"),
])
def test_woodbury_rejects_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        woodbury_natural_gradient(**kw)


# ------------------------------------------------------------ lazy (chord) Gauss-Newton


def _nonlinear_least_squares():
    """r(p) = A p - b + 0.1 sin(A p) (40 rows, 6 unknowns), its mean-square loss and
    Gauss-Newton matrix 2 J^T J / 40: a well-conditioned problem (cond(A) ~ 3)."""
    a = jax.random.normal(jax.random.key(0), (40, 6))
    b = jax.random.normal(jax.random.key(1), (40,))
    res = lambda p: a @ p["x"] - b + 0.1 * jnp.sin(a @ p["x"])  # noqa: E731
    loss = lambda p: jnp.mean(res(p) ** 2)  # noqa: E731

    def gram(p):
        j = jax.jacfwd(lambda x: res({"x": x}))(p["x"])
        return 2 * j.T @ j / 40

    return loss, gram


def _gn(opt, loss, gram, p, steps, lazy):
    """``steps`` updates; with ``lazy`` the Gramian passed off refresh steps is all NaN
    (so a step that read it would be NaN)."""
    from pinnkit.optim.natgrad import refreshes

    state = opt.init(p)
    for _ in range(steps):
        g = gram(p) if not lazy or bool(refreshes(state, lazy)) else jnp.full((6, 6), jnp.nan)
        u, state = opt.update(jax.grad(loss)(p), state, p, gramian=g, value_fn=loss, value=loss(p))
        p = optax.apply_updates(p, u)
    return p, state


def test_lazy_gauss_newton_reads_the_gramian_on_refresh_steps_only_and_converges(x64):
    """``refresh=4``: the Gramian is read on steps 0, 4, 8, ... only (NaN elsewhere) and
    30 chord steps reach plain Gauss-Newton's minimiser to 1e-10 relative. Tolerance:
    the chord iteration contracts by about the change of J over a step (the 0.1 sin
    term) per step, so 30 steps end at the rounding floor, ~cond(A) x eps ~ 1e-15."""
    loss, gram = _nonlinear_least_squares()
    p0 = {"x": jnp.zeros(6)}
    plain, _ = _gn(natural_gradient(damping=1e-12, grid=10), loss, gram, p0, 15, lazy=0)
    lazy, state = _gn(natural_gradient(damping=1e-12, grid=10, refresh=4), loss, gram, p0, 30, lazy=4)
    assert np.all(np.isfinite(lazy["x"]))
    assert _rel_norm(lazy["x"], plain["x"]) < 1e-10
    assert int(state.count) == 30 and 1 <= int(state.age) <= 4


def _rel_norm(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def test_lazy_gauss_newton_step_solves_with_the_old_factor(x64):
    """The second step of ``refresh=3`` is -eta (G_0 + lambda_0 I)^{-1} grad L(p_1): the
    first step's damped Gramian with the second point's gradient, against numpy's solve
    (cond(G_0 + lambda I) ~ 10: rtol 1e-12)."""
    loss, gram = _nonlinear_least_squares()
    opt, p0 = natural_gradient(damping=1e-3, grid=10, refresh=3), {"x": jnp.zeros(6)}
    state = opt.init(p0)
    u, state = opt.update(jax.grad(loss)(p0), state, p0, gramian=gram(p0), value_fn=loss, value=loss(p0))
    p1 = optax.apply_updates(p0, u)
    g1 = jax.grad(loss)(p1)
    u, state2 = opt.update(g1, state, p1, gramian=jnp.full((6, 6), jnp.nan), value_fn=loss, value=loss(p1))
    g0 = np.asarray(gram(p0))
    want = -np.linalg.solve(g0 + 1e-3 * np.trace(g0) / 6 * np.eye(6), np.asarray(g1["x"]))
    assert float(state2.step_size) > 0 and int(state2.age) == 2
    np.testing.assert_allclose(np.asarray(u["x"]), float(state2.step_size) * want, rtol=1e-12, atol=0)


def test_lazy_gauss_newton_refuses_a_step_that_raises_the_loss(x64):
    """With an old factor that no longer fits (here 1e-4 I: a direction 1e8 x the
    gradient) every trial point of a 2-point grid raises the loss: the step is refused
    (zero update, step_size 0) and the next step refreshes; a refresh step never is."""
    from pinnkit.optim.natgrad import LazyGramianState, refreshes

    loss, gram = _nonlinear_least_squares()
    opt, p = natural_gradient(damping=1e-3, grid=2, refresh=5), {"x": jnp.zeros(6)}
    stale = LazyGramianState(jnp.asarray(3), jnp.asarray(1.0), 1e-4 * jnp.eye(6), jnp.asarray(1))
    assert not bool(refreshes(stale, 5))
    u, state = opt.update(jax.grad(loss)(p), stale, p, gramian=jnp.full((6, 6), jnp.nan),
                          value_fn=loss, value=loss(p))
    np.testing.assert_array_equal(np.asarray(u["x"]), 0.0)
    assert float(state.step_size) == 0.0 and bool(refreshes(state, 5))
    u, state = opt.update(jax.grad(loss)(p), state, p, gramian=gram(p), value_fn=loss, value=loss(p))
    assert float(state.step_size) > 0 and int(state.age) == 1
    assert float(loss(optax.apply_updates(p, u))) < float(loss(p))


def test_lazy_gauss_newton_rejects_bad_arguments():
    for kw in ({"refresh": 0}, {"refresh": 2, "safeguard": True}):
        with pytest.raises(ValueError, match="refresh"):
            natural_gradient(**kw)
