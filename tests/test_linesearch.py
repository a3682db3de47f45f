"""`pinnkit.optim.linesearch.zoom_linesearch` takes optax's zoom line search's steps to the
bit (the same arithmetic, one evaluation of the objective per iteration instead of one per
branch), and its program holds the objective once where optax's holds it twice.

The trajectories are L-BFGS's (optax.lbfgs with either line search) on a small tanh
network's regression loss, float32 and float64, with each initial-guess strategy, and
with 2 line-search iterations at most (searches that run out and take the safe step).
The self-scaled methods' `search_step` (the loss at the parameters evaluated in the same
loop) takes their `update`'s steps to the bit.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from pinnkit.optim.linesearch import zoom_linesearch


def _problem(dtype):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.uniform(-1, 1, (64, 2)), dtype)
    y = jnp.sin(3 * x[:, :1]) * jnp.cos(2 * x[:, 1:])
    params = {"w1": jnp.asarray(rng.normal(0, 1, (2, 16)), dtype), "b1": jnp.zeros((1, 16), dtype),
              "w2": jnp.asarray(rng.normal(0, 0.3, (16, 1)), dtype)}

    def loss(p):
        return jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] - y) ** 2)

    return loss, params


def _trajectory(linesearch, dtype, steps):
    loss, params = _problem(dtype)
    opt = optax.lbfgs(memory_size=5, linesearch=linesearch)

    @jax.jit
    def step(params, state):
        value, grad = jax.value_and_grad(loss)(params)
        updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        return optax.apply_updates(params, updates), state, value

    state, values = opt.init(params), []
    for _ in range(steps):
        params, state, value = step(params, state)
        values.append(value)
    return np.asarray(values), params, state


@pytest.mark.parametrize(("x64_on", "guess", "max_steps"),
                         [(False, "keep", 16), (True, "one", 16), (True, "keep", 2), (False, "one", 2)])
def test_same_steps_as_optax_to_the_bit(x64_on, guess, max_steps):
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", x64_on)
    try:
        dtype = jnp.float64 if x64_on else jnp.float32
        ref = optax.scale_by_zoom_linesearch(max_steps, initial_guess_strategy=guess)
        ours = zoom_linesearch(max_steps, initial_guess_strategy=guess)
        v_ref, p_ref, s_ref = _trajectory(ref, dtype, 20)
        v_new, p_new, s_new = _trajectory(ours, dtype, 20)
    finally:
        jax.config.update("jax_enable_x64", old)
    assert v_ref[-1] < 0.5 * v_ref[0]  # it trains: the comparison is not of a stuck run
    np.testing.assert_array_equal(v_new, v_ref)
    for a, b in zip(jax.tree.leaves((p_new, s_new)), jax.tree.leaves((p_ref, s_ref)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _tanh_count(linesearch):
    loss, params = _problem(jnp.float32)
    value, grad = jax.value_and_grad(loss)(params)
    state = linesearch.init(params)
    jaxpr = jax.make_jaxpr(lambda p, s: linesearch.update(
        jax.tree.map(jnp.negative, grad), s, p, value=value, grad=grad, value_fn=loss))(params, state)
    return str(jaxpr).count(" tanh ")


def test_objective_traced_once():
    assert _tanh_count(optax.scale_by_zoom_linesearch(16)) == 2  # one per branch
    assert _tanh_count(zoom_linesearch(16)) == 1


@pytest.mark.parametrize("member", ["ssbfgs", "ssbroyden"])
def test_search_step_equals_update_to_the_bit(x64, member):
    """`search_step` (the loss at the parameters evaluated in the line search's loop) takes
    `update`'s steps (the loss evaluated before the line search) to the bit, and its
    program holds the loss once where `update`'s holds it twice."""
    from pinnkit.optim import quasi_newton

    loss, params = _problem(jnp.float64)
    opt = getattr(quasi_newton, member)()
    def with_aux(p):
        value = loss(p)
        return value, {"mse": value}

    vg = jax.value_and_grad(with_aux, has_aux=True)

    @jax.jit
    def by_update(params, state):
        (value, _), grad = vg(params)
        updates, state = opt.update(grad, state, params, value=value, value_fn=loss)
        return optax.apply_updates(params, updates), state, value

    @jax.jit
    def searched(params, state):
        updates, state, value, aux, _ = opt.search_step(state, params, vg)
        return optax.apply_updates(params, updates), state, value

    a = b = (params, opt.init(params))
    for _ in range(12):
        *a, va = by_update(*a)
        *b, vb = searched(*b)
        assert va == vb
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert float(vb) < 0.5 * float(loss(params))
    count = lambda f: str(jax.make_jaxpr(f)(params, opt.init(params))).count(" tanh ")  # noqa: E731
    assert (count(by_update), count(searched)) == (2, 1)
