"""SOAP and the energy natural gradient (`pinnkit.optim`).

- SOAP on an ill-conditioned quadratic with rotated Kronecker-factored curvature (what
  Shampoo's eigenbasis captures and Adam's diagonal does not) converges far faster than
  Adam at any of four learning rates; with no rotated side (1-D / 0-D leaves, or
  ``max_precond_dim=0``) it is Adam to float32 rounding.
- The natural gradient's one step solves a linear least-squares problem exactly (it is
  Gauss-Newton); its Gramian under shard_map on 4 devices equals one built from the
  full residual Jacobian on one device; training chains soap -> natural_gradient and a
  resumed run equals the uninterrupted one bit for bit.
"""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pinnkit.optim import natural_gradient, scale_by_soap, soap
from pinnkit.parallel.mesh import make_mesh
from pinnkit.run.build import build_run
from pinnkit.run.config import load_config
from pinnkit.train import checkpoint as ckpt
from pinnkit.train.loop import RESULTS, fit
from pinnkit.train.loss import make_loss
from pinnkit.train.step import point_arrays, split_model

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny" / "poisson2d.yaml"


def _run_opt(opt, loss, params, steps):
    def body(c, _):
        p, s = c
        val, g = jax.value_and_grad(loss)(p)
        u, s = opt.update(g, s, p)
        return (optax.apply_updates(p, u), s), val

    (p, _), vals = jax.jit(lambda p: jax.lax.scan(body, (p, opt.init(p)), None, length=steps))(params)
    return p, vals


def test_soap_beats_adam_on_rotated_ill_conditioned_quadratic(x64):
    """f(W) = tr((W-W*)^T H_L (W-W*) H_R) / 2 with H_L, H_R of condition 100 in random
    bases. Measured after 300 steps: Adam's best final loss (over lr 0.3..0.01) ~0.5,
    SOAP's at lr 0.1 ~3e-10, from 2.5e4."""
    m, n = 8, 6
    k = jax.random.split(jax.random.key(0), 3)
    orth = lambda key, d: jnp.linalg.qr(jax.random.normal(key, (d, d)))[0]  # noqa: E731
    ul, ur = orth(k[0], m), orth(k[1], n)
    hl = ul @ jnp.diag(jnp.logspace(0, 2, m)) @ ul.T
    hr = ur @ jnp.diag(jnp.logspace(0, 2, n)) @ ur.T
    w_star = jax.random.normal(k[2], (m, n))

    def loss(p):
        d = p["w"] - w_star
        return 0.5 * jnp.trace(d.T @ hl @ d @ hr)

    p0 = {"w": jnp.zeros((m, n))}
    best_adam = min(float(_run_opt(optax.adam(lr), loss, p0, 300)[1][-1]) for lr in (0.3, 0.1, 0.03, 0.01))
    soap_final = float(_run_opt(soap(0.1), loss, p0, 300)[1][-1])
    assert soap_final < 1e-6 * best_adam, (soap_final, best_adam)


def test_soap_is_adam_without_rotation():
    key = jax.random.split(jax.random.key(1), 3)
    params = {"b": jax.random.normal(key[0], (5,)), "a": jnp.asarray(0.3),
              "w": jax.random.normal(key[1], (4, 3))}
    target = jax.random.normal(key[2], (4, 3))

    def loss(p):
        gram = p["w"] @ p["w"].T - target @ target.T
        return jnp.sum(jnp.sin(p["b"]) ** 2) + p["a"] ** 4 + jnp.sum(gram**2)

    ref, _ = _run_opt(optax.adam(1e-2), loss, params, 50)
    for opt in (
        optax.chain(scale_by_soap(max_precond_dim=0), optax.scale(-1e-2)),  # no side rotated
    ):
        got, _ = _run_opt(opt, loss, params, 50)
        for name in params:
            np.testing.assert_allclose(got[name], ref[name], rtol=2e-5, atol=1e-6)
    # with rotation on, the 1-D and 0-D leaves still follow Adam exactly (the matrix
    # leaf differs, and it does not feed the others' gradients in this loss)
    got, _ = _run_opt(soap(1e-2), loss, params, 50)
    for name in ("a", "b"):
        np.testing.assert_allclose(got[name], ref[name], rtol=2e-5, atol=1e-6)
    assert not np.allclose(got["w"], ref["w"], rtol=1e-3)


def test_natural_gradient_step_solves_linear_least_squares(x64):
    """Residuals r = A theta - b (linear): G = 2 A^T A / N, and the step with eta = 1 lands
    on the least-squares solution; the grid line search picks eta = 1."""
    k = jax.random.split(jax.random.key(2), 2)
    a, b = jax.random.normal(k[0], (40, 7)), jax.random.normal(k[1], (40,))
    loss = lambda p: jnp.mean((a @ p["t"] - b) ** 2)  # noqa: E731
    params = {"t": jnp.zeros(7)}
    opt = natural_gradient(damping=0.0, grid=8)
    upd, state = opt.update(jax.grad(loss)(params), opt.init(params), params,
                            gramian=2.0 * a.T @ a / 40, value_fn=loss)
    lstsq = np.linalg.lstsq(np.asarray(a), np.asarray(b), rcond=None)[0]
    np.testing.assert_allclose(upd["t"], lstsq, rtol=1e-10)
    assert float(state.step_size) == 1.0 and int(state.count) == 1


def test_natural_gradient_rejects_a_step_that_raises_the_loss(x64):
    """Levenberg-Marquardt safeguard: with a Gramian far too small for the loss (so that
    even the grid's shortest step overshoots), the step is rejected — no update, step size
    0 — and the damping scale grows x10; an accepted step divides it by 10 again."""
    loss = lambda p: jnp.sum(p["t"] ** 2)  # noqa: E731  (true Gauss-Newton matrix: 2 I)
    params = {"t": jnp.array([1.0, -2.0, 0.5])}
    grads = jax.grad(loss)(params)
    opt = natural_gradient(damping=1e-10, grid=4, safeguard=True)
    plain, _ = natural_gradient(damping=1e-10, grid=4).update(
        grads, opt.init(params), params, gramian=1e-6 * jnp.eye(3), value_fn=loss, value=loss(params))
    assert loss(jax.tree.map(jnp.add, params, plain)) > 100 * loss(params)  # what it prevents
    upd, state = opt.update(grads, opt.init(params), params, gramian=1e-6 * jnp.eye(3),
                            value_fn=loss, value=loss(params))
    np.testing.assert_array_equal(upd["t"], 0.0)
    assert float(state.step_size) == 0.0 and float(state.damping_scale) == 10.0
    upd, state = opt.update(grads, state, params, gramian=2.0 * jnp.eye(3), value_fn=loss,
                            value=loss(params))
    np.testing.assert_allclose(params["t"] + upd["t"], 0.0, atol=1e-8)  # the exact minimiser
    assert float(state.step_size) == 1.0 and float(state.damping_scale) == 1.0


def _cfg(*over):
    return load_config(TINY, list(over))


def test_gramian_sharded_equals_full_jacobian(x64):
    """Loss.gauss_newton on 4 devices (per-device J^T J, psum) against the Gramian of the
    full stacked residual Jacobian on one device (jax.jacfwd of Problem.residuals), and
    its gradient against jax.grad of the training loss. float64: rtol 1e-10."""
    from jax.flatten_util import ravel_pytree

    cfg = _cfg("numerics.x64=true", "network.width=4", "sampler.batch.pde=16")
    run4 = build_run(cfg, mesh=make_mesh(4))
    params, static = split_model(run4)
    key = jax.random.key(9)
    gauss_newton = make_loss(run4, static).gauss_newton
    total, terms, gram, grad = jax.jit(lambda *a: gauss_newton(*a))(params, key, point_arrays(run4))

    run1 = build_run(cfg, mesh=make_mesh(1))
    arrays = point_arrays(run1)
    flat, unravel = ravel_pytree(params)
    batch = {"pde": jnp.asarray(arrays["pde"])}
    def stacked(th):
        net, coeffs = eqx.combine(unravel(th), static)
        return run1.problem.residuals(net, coeffs, batch, run1.method)["pde"].reshape(-1)

    jac = jax.jit(jax.jacfwd(stacked))(flat)
    ref = 2.0 * jac.T @ jac / 16
    np.testing.assert_allclose(gram, ref, rtol=1e-10, atol=1e-12 * float(jnp.abs(ref).max()))
    loss1 = make_loss(run1, static)
    (ltot, _), g1 = jax.jit(jax.value_and_grad(loss1, has_aux=True))(params, key, arrays)
    np.testing.assert_allclose(ravel_pytree(grad)[0], ravel_pytree(g1)[0], rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(total, ltot, rtol=1e-12)


@pytest.mark.trained
def test_soap_then_natural_gradient_resume_is_exact(x64, tmp_path, trained):
    """Phases chained in config (soap -> natural_gradient), float64, 2 devices: the loss
    falls by orders of magnitude in the natural-gradient phase, and a run stopped after
    one chunk (inside the SOAP phase: its moments, Shampoo factors and eigenbases come
    from the checkpoint) and resumed ends bit-identical to the uninterrupted one. The
    natural-gradient records carry the line search's step size, one of the grid's."""
    over = ("numerics.x64=true", "network.width=6", "sampler.batch.pde=64", "train.steps=40",
            "train.chunk=10", "checkpoint.every=10",
            "optim.phases.0={kind: soap, lr: 1.0e-2, steps: 20, precondition_frequency: 3}",
            "optim.phases.1={kind: natural_gradient, step_grid: 8}", f"train.seed={trained.seed}")
    full = fit(build_run(_cfg(*over), mesh=make_mesh(2)), out_dir=tmp_path / "a", progress=False)
    losses = {h["step"]: h["loss"] for h in full.history}
    assert full.result is RESULTS.successful
    trained.check("loss 39 / loss 20", losses[39] / losses[20], "<", 1e-3)
    etas = [h["step_size"] for h in full.history if h["phase"] == 1]  # eta* of the grid 2^-k
    assert etas and all(e in [2.0 ** -k for k in range(8)] for e in etas), etas
    assert all("step_size" not in h for h in full.history if h["phase"] == 0)
    calls = iter(range(10_000))
    part = fit(build_run(_cfg(*over), mesh=make_mesh(2)), out_dir=tmp_path / "b", progress=False,
               should_stop=lambda: next(calls) >= 1)
    assert part.result is RESULTS.interrupted and part.step == 10
    rest = fit(build_run(_cfg(*over), mesh=make_mesh(2)), out_dir=tmp_path / "b", resume=True,
               progress=False)
    assert rest.step == 40
    ha = ckpt.latest_valid(tmp_path / "a" / "checkpoints")[1]
    hb = ckpt.latest_valid(tmp_path / "b" / "checkpoints")[1]
    assert ha["payload_sha256"] == hb["payload_sha256"]


@pytest.mark.parametrize(
    "over,match",
    [
        (("optim.phases.0={kind: natural_gradient, clip_norm: 1.0}",), "clip_norm"),
        (("optim.phases.0={kind: soap, precondition_frequency: 0}",), "precondition_frequency"),
        (("optim.phases.0={kind: natural_gradient, damping: -1}",), "damping"),
        (("optim.phases.0={kind: natural_gradient, step_grid: 0}",), "step_grid"),
        (("optim.phases.0={kind: shampoo}",), "optim.phases.0.kind"),
    ],
)
def test_config_errors(over, match):
    from pinnkit.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        _cfg(*over)


def test_exponential_decay_with_warmup():
    """schedule exponential_decay + warmup_steps: linear from 0 to lr, then lr * rate^(k/decay)."""
    from pinnkit.train.phases.optax import schedule

    cfg = _cfg("optim.phases.0={kind: adam, lr: 0.01, schedule: {kind: exponential_decay, "
               "warmup_steps: 10, decay_steps: 20, rate: 0.5}}")
    sched = schedule(cfg.optim.phases[0], cfg.optim.phases[0].lr, 500)
    np.testing.assert_allclose([sched(0), sched(5), sched(10), sched(30), sched(50)],
                               [0.0, 0.005, 0.01, 0.005, 0.0025], rtol=1e-6)
